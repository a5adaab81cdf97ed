package reconciler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

// operatorRules are the rules controller-gen makes of the +kubebuilder:rbac markers in doc.go;
// keep the two in step.
var operatorRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"example.com"}, Resources: []string{"tasks"}, Verbs: []string{"get", "list", "watch", "patch"}},
	{APIGroups: []string{"example.com"}, Resources: []string{"tasks/status"}, Verbs: []string{"patch"}},
	{APIGroups: []string{"example.com"}, Resources: []string{"tasks/finalizers"}, Verbs: []string{"update"}},
	{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
	{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"events.k8s.io", ""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
}

// TestLeastPrivilege runs the operator as a service account holding only the rules of the RBAC
// markers: a run with a retry, and a deletion, must work.
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	e := newEnvWithoutOperator(t)
	name := "task-operator-" + e.ns
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: operatorRules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: e.ns, Name: "task-operator"}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := e.c.Create(t.Context(), obj); err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
		t.Cleanup(func() { _ = e.c.Delete(t.Context(), obj) })
	}
	e.op = e.startOperatorAs(fmt.Sprintf("system:serviceaccount:%s:task-operator", e.ns))

	// The retry waits 3s, as in TestRetryThenSuccess: time to lift the label before its Job exists,
	// also on two loaded cores.
	task := e.create(e.task("limited", withLabels(testenv.OutcomeLabel, testenv.OutcomeFail), withRetries(1), func(t *v1.Task) {
		t.Spec.Retry.Backoff.Initial = &metav1.Duration{Duration: 3 * time.Second}
	}))
	e.waitPhase(task.Name, v1.PhaseRetrying)
	e.update(task.Name, func(t *v1.Task) { delete(t.Labels, testenv.OutcomeLabel) })
	e.waitPhase(task.Name, v1.PhaseSucceeded)
	testenv.Eventually(t, waitTimeout, "events from the restricted operator", func(context.Context) (bool, error) {
		reasons := e.eventReasons(task)
		return len(reasons) >= 3, fmt.Errorf("reasons: %v", reasons)
	})
	if err := e.c.Delete(t.Context(), task); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, waitTimeout, "the Task and its Jobs to be gone", func(context.Context) (bool, error) {
		err := e.c.Get(t.Context(), client.ObjectKeyFromObject(task), &v1.Task{})
		n := len(e.jobs(task.Name))
		return apierrors.IsNotFound(err) && n == 0, fmt.Errorf("task: %v, %d jobs", err, n)
	})
}
