package versions_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/versions"
)

// The ownerReference rewrite resumes after an interruption: the retirement stopped part way
// (its context cancelled, or its process killed by SIGKILL), the dependents it rewrote point at
// v1, the rest are still at v1alpha1 and counted as such, and a second run rewrites exactly
// those, losing none.
func TestOwnerReferenceRewriteResumesAfterAnInterruption(t *testing.T) {
	for _, tc := range []struct {
		name, ns  string
		interrupt func(t *testing.T, env *testEnv, ctx context.Context, stopWhen func(context.Context) (bool, error))
	}{
		{"context cancelled", "versions-resume", cancelMidRewrite},
		{"process killed", "versions-resume-kill", killMidRewrite},
	} {
		t.Run(tc.name, func(t *testing.T) { rewriteResumes(t, tc.ns, tc.interrupt) })
	}
}

// rewriteOpts are the retirement's options in these tests; Observe < 0: the test's own reads
// are not what this is about.
var rewriteOpts = versions.Options{RewriteOwnerRefs: true, QPS: 20, Observe: -1}

func rewriteResumes(t *testing.T, ns string, interrupt func(*testing.T, *testEnv, context.Context, func(context.Context) (bool, error))) {
	env := cluster(t)
	ctx := t.Context()
	const n = 40
	keys := env.previousRelease(ctx, t, ns, 1)
	if err := env.upgrade.UpgradeCRD(ctx); err != nil {
		t.Fatal(err)
	}
	owner, err := env.upgrade.Tasks("v1alpha1", ns).Get(ctx, strings.TrimPrefix(keys[0], ns+"/"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cms := env.kube.CoreV1().ConfigMaps(ns)
	for i := range n {
		if _, err := cms.Create(ctx, ownedConfigMap(ns, fmt.Sprintf("dep-%02d", i), "example.com/v1alpha1", owner), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	atV1 := func(ctx context.Context) (int, error) {
		list, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		done := 0
		for _, cm := range list.Items {
			for _, ref := range cm.OwnerReferences {
				if ref.APIVersion == "example.com/v1" && ref.UID == owner.GetUID() {
					done++
				}
			}
		}
		return done, nil
	}
	interrupt(t, env, ctx, func(ctx context.Context) (bool, error) {
		done, err := atV1(ctx)
		return done >= 10, err
	})
	first, err := atV1(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("interrupted after %d dependents", first)
	if first < 10 || first >= n {
		t.Fatalf("%d of %d dependents at v1 after the interruption", first, n)
	}
	r := env.status(t, versions.Options{})
	if left := len(r.Version("v1alpha1").OwnerRefs); left != n-first {
		t.Errorf("the report counts %d dependents still at v1alpha1, want %d", left, n-first)
	}

	res, err := versions.Retire(ctx, env.cfg, "v1alpha1", rewriteOpts)
	var blocked *versions.BlockedError
	if !errors.As(err, &blocked) || blocked.Has("ownerReferences") {
		t.Fatalf("second run: %v; want it blocked by something else than ownerReferences", err)
	}
	if res.OwnerRefsRewritten != n-first {
		t.Errorf("second run rewrote %d, want the %d left", res.OwnerRefsRewritten, n-first)
	}
	if done, err := atV1(ctx); err != nil || done != n {
		t.Errorf("%d of %d dependents at v1 (%v)", done, n, err)
	}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != n {
		t.Errorf("%d dependents after the runs (%v), want %d: none lost", len(list.Items), err, n)
	}
}

// cancelMidRewrite runs the retirement in this process and cancels it once stopWhen holds.
func cancelMidRewrite(t *testing.T, env *testEnv, ctx context.Context, stopWhen func(context.Context) (bool, error)) {
	runCtx, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()
		_ = testenv.Poll(runCtx, time.Minute, 20*time.Millisecond, "10 dependents rewritten", stopWhen)
	}()
	if _, err := versions.Retire(runCtx, env.cfg, "v1alpha1", rewriteOpts); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted rewrite: err = %v, want context.Canceled", err)
	}
}

// killMidRewrite runs `task-operator versions retire` as a user would and SIGKILLs it once
// stopWhen holds: no deferred cleanup, no last write.
func killMidRewrite(t *testing.T, env *testEnv, ctx context.Context, stopWhen func(context.Context) (bool, error)) {
	bin, err := testenv.OperatorBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "versions", "retire", "v1alpha1", "--rewrite-owner-refs", "--qps=20", "--observe=-1s",
		"--kubeconfig="+env.cp.KubeconfigPath)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := testenv.Poll(ctx, time.Minute, 20*time.Millisecond, "10 dependents rewritten", stopWhen); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("%v\n%s", err, out.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill: %v\n%s", err, out.String())
	}
	if err := cmd.Wait(); err == nil {
		t.Fatalf("the killed retirement exited 0:\n%s", out.String())
	}
}

// TestResourcesTheToolMayNotListAreNamedAndBlock runs the report and a retirement as a user
// who may read Tasks, the CRD and the apiserver's metrics but list no ConfigMaps: a dependent
// could hide there, so the report names configmaps as skipped and the retirement refuses
// (unless --force).
func TestResourcesTheToolMayNotListAreNamedAndBlock(t *testing.T) {
	env := cluster(t)
	ctx := t.Context()
	const ns, user = "versions-rbac", "limited-operator"
	env.previousRelease(ctx, t, ns, 1)
	if err := env.upgrade.UpgradeCRD(ctx); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "versions-limited"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "update"}},
		{APIGroups: []string{"example.com"}, Resources: []string{"tasks"}, Verbs: []string{"get", "list", "create"}},
		{APIGroups: []string{""}, Resources: []string{"pods", "secrets"}, Verbs: []string{"list"}},
		{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "versions-limited"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if _, err := env.kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = env.kube.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	limited := rest.CopyConfig(env.cfg)
	limited.Impersonate = rest.ImpersonationConfig{UserName: user}

	var r *versions.Report
	testenv.Eventually(t, 30*time.Second, "the limited user's role to apply", func(ctx context.Context) (bool, error) {
		var err error
		r, err = versions.Status(ctx, limited, versions.Options{})
		return err == nil, err
	})
	t.Logf("report as %s:\n%s", user, r)
	if !slices.Contains(r.Skipped, "v1 configmaps: forbidden (list in all namespaces)") {
		t.Errorf("skipped %v, want configmaps named", r.Skipped)
	}
	if slices.ContainsFunc(r.Skipped, func(s string) bool { return strings.HasPrefix(s, "v1 pods:") || strings.HasPrefix(s, "v1 secrets:") }) {
		t.Errorf("skipped %v names what the user may list", r.Skipped)
	}
	if !strings.Contains(r.String(), "SKIPPED v1 configmaps: forbidden") {
		t.Errorf("the report does not say configmaps were skipped")
	}
	_, err := versions.Retire(ctx, limited, "v1alpha1", versions.Options{Observe: -1})
	var blocked *versions.BlockedError
	if !errors.As(err, &blocked) || !blocked.Has("scan") {
		t.Fatalf("retire as %s: %v; want it blocked by the unscanned resources", user, err)
	}
	if !strings.Contains(err.Error(), "v1 configmaps: forbidden") {
		t.Errorf("the refusal does not name configmaps: %v", err)
	}
}

// TestRetireRefusesWhileAClientWritesAtTheVersion retires v1alpha1 while a client keeps
// patching a Task at it (no operator runs, so no webhook records the writer): the apiserver's
// request counters, watched for a second, show the writes and the retirement refuses, naming
// the verbs; v1alpha1 stays served and every write succeeded.
func TestRetireRefusesWhileAClientWritesAtTheVersion(t *testing.T) {
	env := cluster(t)
	ctx := t.Context()
	const ns = "versions-race"
	keys := env.previousRelease(ctx, t, ns, 1)
	if err := env.upgrade.UpgradeCRD(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := migrateAll(ctx, env); err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(keys[0], ns+"/")
	writerCtx, stop := context.WithCancel(ctx)
	writes := make(chan error, 1)
	go func() {
		tasks := env.upgrade.Tasks("v1alpha1", ns)
		for i := 0; ; i++ {
			patch := fmt.Sprintf(`{"metadata":{"labels":{"racer":"w-%d"}}}`, i)
			if _, err := tasks.Patch(writerCtx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
				if writerCtx.Err() != nil {
					err = nil
				}
				writes <- err
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	_, err := versions.Retire(ctx, env.cfg, "v1alpha1", versions.Options{Observe: time.Second})
	stop()
	if werr := <-writes; werr != nil {
		t.Errorf("a write at v1alpha1 failed during the checks: %v", werr)
	}
	var blocked *versions.BlockedError
	if !errors.As(err, &blocked) || !blocked.Has("requests") || !strings.Contains(err.Error(), "PATCH") {
		t.Fatalf("retire during writes: %v; want it refused naming the PATCHes", err)
	}
	t.Logf("refused: %v", err)
	if !served(ctx, t, env.cfg, "v1alpha1") {
		t.Error("v1alpha1 not served after a refused retirement")
	}
}
