package install_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

func taskGVR(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "example.com", Version: version, Resource: "tasks"}
}

func runKubectl(t *testing.T, cp *testenv.ControlPlane, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	out, stderr, err := testenv.Kubectl(ctx, cp.KubeconfigPath, nil, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

// troubleshooting runs the README's troubleshooting commands as written, on the live install.
func (e *env) troubleshooting(block string) {
	out := testenv.RunREADME(e.t, e.cp, "troubleshooting", block, 5*time.Minute)
	// The three CA sums (CRD, validating webhook, Secret) are equal.
	var sums []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasSuffix(line, "  -") && len(line) == 67 {
			sums = append(sums, line)
		}
	}
	if len(sums) != 3 || sums[0] != sums[1] || sums[1] != sums[2] {
		e.t.Errorf("troubleshooting step 3 shows CA sums %v, want three equal ones", sums)
	}
	// Step 4: both questions are answered yes (and none no).
	answers := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		answers[strings.TrimSpace(line)]++
	}
	if answers["yes"] != 2 || answers["no"] != 0 {
		e.t.Errorf("troubleshooting step 4 answers %d yes and %d no, want 2 yes: the operator may not create Jobs or patch its CRD", answers["yes"], answers["no"])
	}
	e.checkInstalled(imageV1)
}

// upgrade: a new image rolled out with the README's commands, then the migration Job, run by a
// stand-in as its own ServiceAccount, rewrites the Tasks and trims storedVersions.
func (e *env) upgrade(block string) {
	t := e.t
	ctx := t.Context()
	// As after an upgrade from a release that stored v1alpha1: storedVersions lists it.
	var crd apix.CustomResourceDefinition
	if err := e.c.Get(ctx, client.ObjectKey{Name: crdName}, &crd); err != nil {
		t.Fatal(err)
	}
	crd.Status.StoredVersions = []string{"v1alpha1", "v1"}
	if err := e.c.Status().Update(ctx, &crd); err != nil {
		t.Fatal(err)
	}
	out := testenv.RunREADME(t, e.cp, "upgrade", block, 6*time.Minute)
	if !strings.Contains(out, `["v1"]`) {
		t.Errorf("after the migration storedVersions is not [v1]:\n%s", out)
	}
	e.checkInstalled(imageV1_1)
}

// uninstall: the README's command removes every Task (their finalizers handled by the still
// running operator) and then everything the install made, without hanging.
func (e *env) uninstall(block string) {
	t := e.t
	ctx := t.Context()
	testenv.RunREADME(t, e.cp, "uninstall", block, 6*time.Minute)
	var crd apix.CustomResourceDefinition
	if err := e.c.Get(ctx, client.ObjectKey{Name: crdName}, &crd); !apierrors.IsNotFound(err) {
		t.Errorf("CRD after uninstall: %v", err)
	}
	for _, name := range []string{"task-operator-manager-role", "task-operator-metrics-reader", "task-operator-task-editor-role", "task-operator-migrate-role"} {
		var role rbacv1.ClusterRole
		if err := e.c.Get(ctx, client.ObjectKey{Name: name}, &role); !apierrors.IsNotFound(err) {
			t.Errorf("ClusterRole %s after uninstall: %v", name, err)
		}
	}
	// make migrate (the upgrade step) bound its ClusterRole to a ServiceAccount of the namespace.
	var binding rbacv1.ClusterRoleBinding
	if err := e.c.Get(ctx, client.ObjectKey{Name: "task-operator-migrate-rolebinding"}, &binding); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRoleBinding task-operator-migrate-rolebinding after uninstall: %v", err)
	}
	e.eventually("namespace "+operatorNamespace+" to be gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
		var ns corev1.Namespace
		err := e.c.Get(ctx, client.ObjectKey{Name: operatorNamespace}, &ns)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("namespace: %v, phase %s", err, ns.Status.Phase)
	})
	e.eventually("every stand-in process to exit", time.Minute, func(context.Context) (bool, error) {
		n := len(e.standins.Processes())
		return n == 0, fmt.Errorf("%d still run", n)
	})
}

// drainAtOneReplica: scaled down to one replica, the PodDisruptionBudget still lets a node drain
// evict it (minAvailable: 1 would refuse with 429 for ever).
func (e *env) drainAtOneReplica() {
	t := e.t
	ctx := t.Context()
	runKubectl(t, e.cp, "-n", operatorNamespace, "scale", "deployment/"+deployment, "--replicas=1")
	e.eventually("one replica, and the PodDisruptionBudget observed", 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := e.managerPods(ctx)
		if err != nil || len(pods) != 1 || !podReady(pods[0]) {
			return false, fmt.Errorf("%d pods (%v)", len(pods), err)
		}
		var pdb policyv1.PodDisruptionBudget
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: deployment}, &pdb); err != nil {
			return false, err
		}
		if pdb.Status.ObservedGeneration != pdb.Generation || pdb.Status.CurrentHealthy != 1 {
			return false, fmt.Errorf("PDB status %+v", pdb.Status)
		}
		return true, nil
	})
	pod := e.mustPods()[0]
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	if err := e.c.SubResource("eviction").Create(ctx, &pod, eviction); err != nil {
		t.Errorf("evicting the only replica, as a node drain does: %v", err)
	}
	runKubectl(t, e.cp, "-n", operatorNamespace, "scale", "deployment/"+deployment, "--replicas=2")
	e.checkInstalled(imageV1)
}

// uninstallWithoutOperator: with a run in progress in ns (its Task and Job hold the operator's
// finalizers) and Tasks written at v1alpha1 (managed fields at that version, which every write
// converts to), the operator is scaled to 0; the README's commands for an operator gone remove
// the CRD with every Task, and the Jobs and their pods go, without hanging.
func (e *env) uninstallWithoutOperator(ns, block string) {
	t := e.t
	ctx := t.Context()
	running := v1Task(ns, "running")
	unstructured.RemoveNestedField(running.Object, "spec", "schedule")
	running.SetLabels(map[string]string{testenv.OutcomeLabel: testenv.OutcomeHang})
	if _, err := e.tasks("v1", ns).Create(ctx, running, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	jobsOf := func(ctx context.Context) ([]batchv1.Job, error) {
		var jobs batchv1.JobList
		err := e.c.List(ctx, &jobs, client.InNamespace(ns), client.HasLabels{taskv1.LabelTaskName})
		return jobs.Items, err
	}
	e.eventually("the run's Job, held by the operator's finalizer", 2*time.Minute, func(ctx context.Context) (bool, error) {
		jobs, err := jobsOf(ctx)
		return slices.ContainsFunc(jobs, func(j batchv1.Job) bool { return slices.Contains(j.Finalizers, taskv1.FinalizerRunOutcome) }), err
	})
	runKubectl(t, e.cp, "-n", operatorNamespace, "scale", "deployment/"+deployment, "--replicas=0")
	e.eventually("no manager pod", 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := e.managerPods(ctx)
		return len(pods) == 0, err
	})

	testenv.RunREADME(t, e.cp, "uninstall-without-operator", block, 4*time.Minute)
	var crd apix.CustomResourceDefinition
	if err := e.c.Get(ctx, client.ObjectKey{Name: crdName}, &crd); !apierrors.IsNotFound(err) {
		t.Errorf("CRD after the commands: %v", err)
	}
	e.eventually("the Tasks' Jobs and their pods to be gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		jobs, err := jobsOf(ctx)
		if err != nil || len(jobs) > 0 {
			return false, fmt.Errorf("%d Jobs left: %v", len(jobs), err)
		}
		var pods corev1.PodList
		if err := e.c.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{"batch.kubernetes.io/job-name"}); err != nil {
			return false, err
		}
		return len(pods.Items) == 0, fmt.Errorf("%d pods left", len(pods.Items))
	})
}
