package versions_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apixclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/migrate"
	"example.com/task-operator/versions"
)

const legacyUser, legacyManager = "alice", "legacy-applier"

// step runs one stage of a walk; the walk stops at the first stage that fails.
func step(t *testing.T, name string, fn func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, fn) {
		t.FailNow()
	}
}

// TestRetiringV1alpha1KeepsEverythingWorking walks a cluster of the previous release through
// the whole lifecycle of v1alpha1: Tasks stored at it, a kubectl watch, an SSA manager and a
// ConfigMap owned through an ownerReference at it; migrate, deprecate, the report naming the
// watcher and the writer, retire refused until each blocker is cleared, served: false (GC,
// SSA, kubectl apply and the operator fine, a restarted operator's install keeps it
// unserved), rollback, retire again, and the next release's CRD without v1alpha1.
func TestRetiringV1alpha1KeepsEverythingWorking(t *testing.T) {
	env := cluster(t)
	ctx := t.Context()
	const ns = "versions-walk"
	keys := env.previousRelease(ctx, t, ns, 12)
	op := env.startOperator(ctx, t, "walk")
	env.waitStoredAtV1(ctx, t)
	env.restartControllerManager(t)
	env.waitGarbageCollector(ctx, t, ns)

	alpha := env.upgrade.Tasks("v1alpha1", ns)
	legacy := impersonated(t, env.cfg, legacyUser)
	applyLegacy := func(t *testing.T, i int) {
		t.Helper()
		obj := testenv.V1alpha1Task(ns, "applied", 100+i)
		delete(obj.Object["metadata"].(map[string]any), "labels")
		if _, err := legacy.Resource(taskv1.ResourceAt("v1alpha1")).Namespace(ns).Apply(ctx, "applied", obj,
			metav1.ApplyOptions{FieldManager: legacyManager, Force: true}); err != nil {
			t.Fatalf("apply at v1alpha1 as %s: %v", legacyUser, err)
		}
	}
	var owner *unstructured.Unstructured
	step(t, "the previous release's users", func(t *testing.T) {
		applyLegacy(t, 0)
		// A suspended Task (no finalizer, no runs), so that only the garbage collector decides
		// when its dependent goes.
		var err error
		if owner, err = env.upgrade.Tasks("v1", ns).Create(ctx, v1Task(ns, "owner", true), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cm := ownedConfigMap(ns, "owned-through-v1alpha1", "example.com/v1alpha1", owner)
		if _, err := env.kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	step(t, "migrate", func(t *testing.T) {
		sum, err := migrate.Run(ctx, env.cfg, migrate.Options{})
		if err != nil || !sum.Trimmed {
			t.Fatalf("migrate: %v\n%s", err, sum)
		}
		// The SSA manager keeps writing at v1alpha1 after the migration.
		applyLegacy(t, 1)
	})

	warning := "example.com/v1alpha1 Task stops being served on 2031-01-01; use example.com/v1"
	step(t, "deprecate", func(t *testing.T) {
		if err := versions.Deprecate(ctx, env.cfg, "v1alpha1", versions.Options{Warning: warning}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "kubectl at v1alpha1 to print the warning", func(ctx context.Context) (bool, error) {
			_, stderr, err := testenv.Kubectl(ctx, env.cp.KubeconfigPath, nil, "get", "tasks.v1alpha1.example.com", "-n", ns)
			if err != nil {
				return false, err
			}
			return strings.Contains(stderr, "Warning: "+warning), fmt.Errorf("stderr: %q", stderr)
		})
	})

	// After the deprecation: a change of the CRD's spec closes every watch on it. A kubectl watch
	// and a controller-runtime informer of the previous release's API, both at v1alpha1.
	stopKubectl := env.watchAt(t, "v1alpha1")
	stopInformer, synced := env.informerAt(t, "v1alpha1")
	if !synced {
		t.Fatal("the informer at v1alpha1 did not sync while v1alpha1 was served")
	}
	stopWatch := func() { stopKubectl(); stopInformer() }

	step(t, "the report names the watcher, the writer, the fields and the dependent", func(t *testing.T) {
		r := env.awaitReport(t, "the report to show the v1alpha1 watch and writer", func(r *versions.Report) error {
			v := r.Version("v1alpha1")
			switch {
			case v.LiveWatches < 2:
				return fmt.Errorf("live watches at v1alpha1: %v, want the kubectl watch and the informer", v.LiveWatches)
			case !slices.ContainsFunc(v.Writers, isLegacyWriter):
				return fmt.Errorf("writers at v1alpha1: %v", v.Writers)
			}
			return nil
		})
		v := r.Version("v1alpha1")
		if !v.Deprecated || v.Warning != warning || v.InStoredVersions || v.MayHaveStoredObjects {
			t.Errorf("v1alpha1: %+v", v)
		}
		if len(v.ManagedFields) != 1 || v.ManagedFields[0].Name != "applied" {
			t.Errorf("managedFields at v1alpha1: %v, want the applied Task", v.ManagedFields)
		}
		if len(v.OwnerRefs) != 1 || v.OwnerRefs[0].Name != "owned-through-v1alpha1" {
			t.Errorf("ownerReferences at v1alpha1: %v, want the ConfigMap", v.OwnerRefs)
		}
		if len(r.Skipped) != 0 {
			t.Errorf("skipped: %v", r.Skipped)
		}
		if out := r.String(); !strings.Contains(out, legacyUser+" via "+legacyManager) {
			t.Errorf("the report does not name %s via %s:\n%s", legacyUser, legacyManager, out)
		}
	})

	var before float64
	var writeBefore, listBefore time.Duration
	step(t, "conversion calls per write at v1 with v1alpha1 served", func(t *testing.T) {
		if _, err := env.upgrade.Tasks("v1", ns).Create(ctx, v1Task(ns, "write-probe", true), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		before = env.callsPerWrite(ctx, t, ns, "write-probe", 20)
		t.Logf("conversion webhook calls per write at v1, v1alpha1 and v1beta1 served: %.2f", before)
		writeBefore, listBefore = env.costAtV1(ctx, t, ns, "write-probe", 50)
		t.Logf("at v1 with v1alpha1 served: a write %v, a LIST of the namespace's Tasks %v (mean of 50, one at a time)", writeBefore, listBefore)
	})

	fast := versions.Options{Observe: time.Second}
	step(t, "retire is refused, naming each blocker", func(t *testing.T) {
		_, err := versions.Retire(ctx, env.cfg, "v1alpha1", fast)
		blocked := requireBlocked(t, err, "managedFields", "ownerReferences", "watches", "writers")
		if !strings.Contains(err.Error(), legacyUser+" via "+legacyManager) || !strings.Contains(err.Error(), "owned-through-v1alpha1") {
			t.Errorf("the refusal does not name the writer and the dependent:\n%v", err)
		}
		_ = blocked
		if served(ctx, t, env.cfg, "v1alpha1") != true {
			t.Fatal("a refused retirement stopped serving v1alpha1")
		}
	})

	step(t, "dry run prints the plan and changes nothing", func(t *testing.T) {
		opts := fast
		opts.DryRun, opts.Migrate, opts.RewriteOwnerRefs = true, true, true
		res, err := versions.Retire(ctx, env.cfg, "v1alpha1", opts)
		if err != nil || len(res.Plan) == 0 {
			t.Fatalf("dry run: %v, plan %v", err, res.Plan)
		}
		t.Logf("plan:\n%s", strings.Join(res.Plan, "\n"))
		if !served(ctx, t, env.cfg, "v1alpha1") {
			t.Fatal("the dry run stopped serving v1alpha1")
		}
	})

	step(t, "with the watch stopped, the fields moved and the dependent rewritten only the writer blocks", func(t *testing.T) {
		stopWatch()
		env.awaitReport(t, "the watch at v1alpha1 to close", func(r *versions.Report) error {
			if n := r.Version("v1alpha1").LiveWatches; n != 0 {
				return fmt.Errorf("%v watches open", n)
			}
			return nil
		})
		opts := fast
		opts.Migrate, opts.RewriteOwnerRefs = true, true
		// A controller of kube-controller-manager may watch at v1alpha1 again for a while after
		// a CRD change, and the garbage collector GETs the dependent's owner there, backing off,
		// until it has observed it: retire rightly refuses while they do, and, as a person
		// would, the step runs it again until they have stopped.
		// What the attempts did adds up: the first moves the fields and rewrites the dependent,
		// a later one finds nothing left.
		var err error
		rewritten, moved := 0, 0
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(3 * time.Second) {
			var res versions.RetireResult
			res, err = versions.Retire(ctx, env.cfg, "v1alpha1", opts)
			rewritten += res.OwnerRefsRewritten
			if res.Migrated != nil {
				moved += res.Migrated.ManagedFieldsMoved
			}
			if !(blockedBy(err, "watches") || blockedBy(err, "requests")) || time.Now().After(deadline) {
				break
			}
			t.Logf("a watch or requests at v1alpha1 (kube-controller-manager's, for a while) still block; again in 3s:\n%v", err)
		}
		requireBlocked(t, err, "writers")
		if rewritten != 1 || moved != 1 {
			t.Errorf("%d dependents rewritten, %d Tasks' fields moved; want 1 and 1", rewritten, moved)
		}
	})

	step(t, "retire with --force stops serving v1alpha1", func(t *testing.T) {
		opts := fast
		opts.Force = true
		res, err := versions.Retire(ctx, env.cfg, "v1alpha1", opts)
		if err != nil || !res.Retired {
			t.Fatalf("retire --force: %v (%+v)", err, res)
		}
		if served(ctx, t, env.cfg, "v1alpha1") {
			t.Fatal("v1alpha1 still served")
		}
		if _, err := alpha.List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("LIST at v1alpha1 after the retirement: %v, want NotFound", err)
		}
		// A controller still on the old version cannot start: its informer never syncs.
		if _, synced := env.informerAt(t, "v1alpha1"); synced {
			t.Error("an informer at v1alpha1 synced after the retirement")
		}
	})

	var after float64
	step(t, "conversion calls per write at v1 with v1alpha1 retired", func(t *testing.T) {
		after = env.callsPerWrite(ctx, t, ns, "write-probe", 20)
		t.Logf("conversion webhook calls per write at v1: %.2f with v1alpha1 served, %.2f retired", before, after)
		write, list := env.costAtV1(ctx, t, ns, "write-probe", 50)
		t.Logf("at v1 with v1alpha1 retired: a write %v (%.2fx served), a LIST %v (%.2fx served)",
			write, float64(write)/float64(writeBefore), list, float64(list)/float64(listBefore))
		if after >= before {
			t.Errorf("calls per write did not drop: %.2f -> %.2f", before, after)
		}
	})

	step(t, "everything works with v1alpha1 unserved", func(t *testing.T) {
		env.requireWorking(ctx, t, ns, "retired", len(keys)+3)
		// The garbage collector still collects the dependent: its reference names v1 now.
		if err := env.upgrade.Tasks("v1", ns).Delete(ctx, owner.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 2*time.Minute, "the garbage collector to delete the dependent ConfigMap", func(ctx context.Context) (bool, error) {
			cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "owned-through-v1alpha1", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			_, ownerErr := env.upgrade.Tasks("v1", ns).Get(ctx, owner.GetName(), metav1.GetOptions{})
			return false, fmt.Errorf("the ConfigMap is there with ownerReferences %+v; the owner: %v", cm.OwnerReferences, ownerErr)
		})
	})

	// A restarted operator applies its CRD (--install-crd) again; it lives as long as the walk.
	if err := op.Stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	op = env.restartOperator(ctx, t, "walk-restarted")
	step(t, "a restarted operator applying its CRD keeps v1alpha1 unserved", func(t *testing.T) {
		if served(ctx, t, env.cfg, "v1alpha1") {
			t.Fatal("the operator's --install-crd served v1alpha1 again")
		}
	})

	step(t, "rollback serves v1alpha1 again, losing nothing", func(t *testing.T) {
		if err := versions.Serve(ctx, env.cfg, "v1alpha1", versions.Options{}); err != nil {
			t.Fatal(err)
		}
		atV1, err := env.upgrade.Tasks("v1", ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		atAlpha, err := alpha.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("LIST at v1alpha1 after the rollback: %v", err)
		}
		if len(atAlpha.Items) != len(atV1.Items) || len(atV1.Items) < len(keys) {
			t.Errorf("after the rollback: %d Tasks at v1alpha1, %d at v1", len(atAlpha.Items), len(atV1.Items))
		}
	})

	step(t, "retire again", func(t *testing.T) {
		opts := fast
		opts.Force = true // the writer's record is recent
		if res, err := versions.Retire(ctx, env.cfg, "v1alpha1", opts); err != nil || !res.Retired {
			t.Fatalf("retire again: %v", err)
		}
	})

	crds := apixclient.NewForConfigOrDie(env.cfg).CustomResourceDefinitions()
	setVersions := func(t *testing.T, from func() (*apix.CustomResourceDefinition, error)) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			live, err := crds.Get(ctx, taskv1.CRDName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			shipped, err := from()
			if err != nil {
				return err
			}
			live.Spec.Versions = shipped.Spec.Versions // an atomic list: an apply replaces it whole
			_, err = crds.Update(ctx, live, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("install the CRD's versions: %v", err)
		}
	}

	step(t, "an install re-applied as shipped serves v1alpha1 again, and the report says so", func(t *testing.T) {
		setVersions(t, testenv.CurrentCRD)
		if !served(ctx, t, env.cfg, "v1alpha1") {
			t.Fatal("the re-applied install did not serve v1alpha1")
		}
		r := env.awaitReport(t, "the report to flag v1alpha1 as served again", func(r *versions.Report) error {
			if !r.Version("v1alpha1").ServedAgain {
				return errors.New("v1alpha1 not flagged as served again")
			}
			return nil
		})
		if out := r.String(); !strings.Contains(out, "SERVED AGAIN") || !strings.Contains(out, "config/components/retire-v1alpha1") {
			t.Errorf("the report does not say what happened and what to do:\n%s", out)
		}
		opts := fast
		opts.Force = true
		if res, err := versions.Retire(ctx, env.cfg, "v1alpha1", opts); err != nil || !res.Retired {
			t.Fatalf("retire after the re-apply: %v", err)
		}
		env.requireWorking(ctx, t, ns, "reapplied", -1)
	})

	step(t, "the next release's CRD without v1alpha1", func(t *testing.T) {
		setVersions(t, NextReleaseCRD)
		env.requireWorking(ctx, t, ns, "removed", -1)
		if !op.Alive() {
			t.Fatal("the operator exited")
		}
	})

	// The Tasks go while the operator still runs to take off its finalizers, so that the next
	// test can replace the CRD.
	env.deleteTasks(ctx, t, ns)
}

func isLegacyWriter(e versions.UsageEntry) bool {
	return e.User == legacyUser && e.Agent == legacyManager
}

// blockedBy says err is a refusal that names check among its blockers.
func blockedBy(err error, check string) bool {
	var blocked *versions.BlockedError
	return errors.As(err, &blocked) && slices.ContainsFunc(blocked.Blockers, func(b versions.Blocker) bool { return b.Check == check })
}

// requireBlocked fails unless err is a refusal with exactly the blockers checks.
func requireBlocked(t *testing.T, err error, checks ...string) *versions.BlockedError {
	t.Helper()
	var blocked *versions.BlockedError
	if !errors.As(err, &blocked) {
		t.Fatalf("retire: err = %v, want a refusal", err)
	}
	t.Logf("refused:\n%v", err)
	var got []string
	for _, b := range blocked.Blockers {
		got = append(got, b.Check)
	}
	if !slices.Equal(got, checks) {
		t.Errorf("blockers %v, want %v", got, checks)
	}
	return blocked
}

// NextReleaseCRD is this release's CRD without v1alpha1: what the release after every cluster
// retired it ships.
func NextReleaseCRD() (*apix.CustomResourceDefinition, error) {
	crd, err := testenv.CurrentCRD()
	if err != nil {
		return nil, err
	}
	crd.Spec.Versions = slices.DeleteFunc(crd.Spec.Versions, func(v apix.CustomResourceDefinitionVersion) bool { return v.Name == "v1alpha1" })
	return crd, nil
}

func impersonated(t testing.TB, cfg *rest.Config, user string) dynamic.Interface {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters"}}
	dyn, err := dynamic.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

func served(ctx context.Context, t testing.TB, cfg *rest.Config, version string) bool {
	t.Helper()
	crd, err := apixclient.NewForConfigOrDie(cfg).CustomResourceDefinitions().Get(ctx, taskv1.CRDName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			return v.Served
		}
	}
	return false
}

// requireWorking checks what must keep working while v1alpha1 is not served: every Task
// readable at v1 and v1beta1 (want of them, unless negative), server-side apply at v1 of the
// Task whose fields an SSA manager once owned at v1alpha1, kubectl apply at v1, and the
// operator running a new Task to success.
func (env *testEnv) requireWorking(ctx context.Context, t *testing.T, ns, suffix string, want int) {
	t.Helper()
	atV1, err := env.upgrade.Tasks("v1", ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	atBeta, err := env.upgrade.Tasks("v1beta1", ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(atV1.Items) != len(atBeta.Items) || (want >= 0 && len(atV1.Items) != want) {
		t.Errorf("%d Tasks at v1, %d at v1beta1, want %d", len(atV1.Items), len(atBeta.Items), want)
	}
	apply := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Task",
		"metadata": map[string]any{"namespace": ns, "name": "applied", "labels": map[string]any{"applied-at-" + suffix: "true"}},
	}}
	if _, err := env.dyn.Resource(taskv1.ResourceAt("v1")).Namespace(ns).Apply(ctx, "applied", apply,
		metav1.ApplyOptions{FieldManager: "new-applier-" + suffix}); err != nil {
		t.Errorf("server-side apply at v1: %v", err)
	}
	manifest := fmt.Sprintf("apiVersion: example.com/v1\nkind: Task\nmetadata: {name: kubectl-%s, namespace: %s}\nspec:\n  runner: {type: Shell, shell: {script: \"true\"}}\n", suffix, ns)
	if _, stderr, err := testenv.Kubectl(ctx, env.cp.KubeconfigPath, []byte(manifest), "apply", "-f", "-"); err != nil {
		t.Errorf("kubectl apply at v1: %v (%s)", err, stderr)
	}
	testenv.Eventually(t, 2*time.Minute, "the operator to run the Task kubectl applied", func(ctx context.Context) (bool, error) {
		task, err := env.upgrade.Tasks("v1", ns).Get(ctx, "kubectl-"+suffix, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(task.Object, "status", "phase")
		return phase == string(taskv1.PhaseSucceeded), fmt.Errorf("phase %q", phase)
	})
}
