package migrate_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/migrate"
)

const attackNamespace = "migrate-b"

// TestAttack13ContainerOwnershipAfterMove: at an old version, owning a field that decides
// whether a v1 object exists (v1beta1's schedule string, v1alpha1's shell script) is owning
// that object: a re-apply without the field removes the object, its defaulted and hidden
// fields included. After the move the manager owns only the one v1 leaf; a re-apply at v1 (the
// same Apply manager for the apiserver) must still remove the object, as it did before (it
// does: server-side apply drops what the prune leaves empty, and the old versions' appliers
// re-apply through the conversion's container rules).
func TestAttack13ContainerOwnershipAfterMove(t *testing.T) {
	env := cluster(t)
	ctx := t.Context()
	env.installPreviousRelease(ctx, t, 0)
	env.upgradeToCurrentRelease(ctx, t)
	alpha := env.upgrade.Tasks("v1alpha1", attackNamespace)
	beta := env.upgrade.Tasks("v1beta1", attackNamespace)
	v1 := env.upgrade.Tasks("v1", attackNamespace)

	obj := func(version, name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/" + version, "kind": taskv1.Kind,
			"metadata": map[string]any{"name": name, "namespace": attackNamespace}, "spec": spec,
		}}
	}
	mustApply(ctx, t, beta, "beta-applier", obj("v1beta1", "sched", map[string]any{
		"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}}, "schedule": "*/5 * * * *"}))
	mustApply(ctx, t, alpha, "alpha-applier", obj("v1alpha1", "switch", map[string]any{"type": "shell", "shell": "echo"}))

	type probe struct {
		name, manager, task string
		tasks               dynamicTasks
		obj                 *unstructured.Unstructured
	}
	probes := []probe{
		{"v1beta1 applier drops the schedule at v1", "beta-applier", "sched", v1,
			obj("v1", "sched", map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}}})},
		{"v1beta1 applier drops the schedule at v1beta1", "beta-applier", "sched", beta,
			obj("v1beta1", "sched", map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}}})},
		{"v1alpha1 applier switches to HTTP at v1", "alpha-applier", "switch", v1,
			obj("v1", "switch", map[string]any{"runner": map[string]any{"type": "HTTP", "http": map[string]any{"url": "https://x.example"}}})},
		{"v1alpha1 applier switches to HTTP at v1alpha1", "alpha-applier", "switch", alpha,
			obj("v1alpha1", "switch", map[string]any{"type": "http", "url": "https://x.example"})},
	}
	run := func(p probe) string {
		got, err := p.tasks.Apply(ctx, p.task, p.obj.DeepCopy(), metav1.ApplyOptions{FieldManager: p.manager, DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return "error: " + err.Error()
		}
		// What decides the shape: the runner's members and the schedule. Values the admission
		// webhook would default (not installed here) differ: before the move the prune went
		// through the conversion, which defaults the HTTP timeout; after it, nothing does.
		runner, _, _ := unstructured.NestedMap(got.Object, "spec", "runner")
		members := slices.Sorted(maps.Keys(runner))
		url, _, _ := unstructured.NestedString(got.Object, "spec", "runner", "http", "url")
		shell, hasShell, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "runner", "shell")
		if p.tasks != v1 {
			members = slices.Sorted(maps.Keys(got.Object["spec"].(map[string]any)))
			url, _, _ = unstructured.NestedString(got.Object, "spec", "url")
			shell, hasShell, _ = unstructured.NestedFieldNoCopy(got.Object, "spec", "shell")
		}
		_, hasSchedule, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "schedule")
		return fmt.Sprintf("spec/runner keys %v, url %q, shell %v (%v), schedule %v", members, url, shell, hasShell, hasSchedule)
	}
	before := map[string]string{}
	for _, p := range probes {
		before[p.name] = run(p)
	}
	if _, err := migrate.Run(ctx, env.cfg, migrate.Options{Namespace: attackNamespace, Force: true}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, name := range []string{"sched", "switch"} {
		for _, e := range managedFieldsOf(ctx, t, v1, name) {
			if e.APIVersion != v1Version {
				t.Errorf("%s: the entry of %s is at %s", name, e.Manager, e.APIVersion)
			}
		}
	}
	for _, p := range probes {
		if got := run(p); got != before[p.name] {
			t.Errorf("%s: after the migration\n %s\nbefore\n %s", p.name, got, before[p.name])
		} else {
			t.Logf("%s: %s (before and after)", p.name, got)
		}
	}
}
