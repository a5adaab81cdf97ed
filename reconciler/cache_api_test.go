package reconciler_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/reconciler"
)

// TestWhatTheCacheLeavesOutOfATaskIsNeverWrittenBack: the cache keeps only the annotations the
// controller reads and shares one labels map between Tasks that carry the same labels. A Task
// applied with kubectl keeps its last-applied-configuration and every other annotation through
// the controller's writes (its finalizer, its status), and a reader of the cache that changes
// the labels of the Task it got changes no other Task's.
func TestWhatTheCacheLeavesOutOfATaskIsNeverWrittenBack(t *testing.T) {
	e := newEnv(t)
	annotations := map[string]string{
		"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"applied"}}`,
		"team.example.org/owner":                           "alice",
	}
	labels := map[string]string{"app": "nightly", "team": "a"}
	withMeta := func(task *v1.Task) {
		task.Annotations = maps.Clone(annotations)
		task.Labels = maps.Clone(labels)
	}
	e.create(e.task("applied", withMeta))
	e.create(e.task("twin", withMeta))
	for _, name := range []string{"applied", "twin"} {
		done := e.waitPhase(name, v1.PhaseSucceeded)
		if diff := cmp.Diff(annotations, done.Annotations); diff != "" {
			t.Errorf("Task %s's annotations after the controller's writes (-applied +stored):\n%s", name, diff)
		}
		if diff := cmp.Diff(labels, done.Labels); diff != "" {
			t.Errorf("Task %s's labels after the controller's writes (-applied +stored):\n%s", name, diff)
		}
	}

	opts := reconciler.CacheOptions()
	opts.Scheme, opts.DefaultNamespaces = scheme, map[string]cache.Config{e.ns: {}}
	c, err := reconciler.NewCache(e.cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	var applied, twin v1.Task
	if err := c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "applied"}, &applied); err != nil {
		t.Fatal(err)
	}
	if len(applied.Annotations) != 0 {
		t.Errorf("the cached Task holds annotations the controller never reads: %v", applied.Annotations)
	}
	applied.Labels["team"] = "b"
	if err := c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "twin"}, &twin); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(labels, twin.Labels); diff != "" {
		t.Errorf("changing one Task's labels as read from the cache changed another's (-want +got):\n%s", diff)
	}
	var list v1.TaskList
	if err := c.List(ctx, &list, client.InNamespace(e.ns), client.MatchingLabels{"team": "a"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Errorf("listed %d Tasks labelled team=a from the cache, want 2", len(list.Items))
	}
}
