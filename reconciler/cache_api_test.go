package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
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

// TestOtherToolsMetadataOnAJobSurvivesTheOperatorsWrites: the Job cache keeps no annotation
// outside task.example.com/. Annotations and labels other tools put on a running Job must
// survive the operator's writes computed from the cached copy: taking the Job back (merge patch
// of ownerReferences), flipping spec.suspend (merge patch).
func TestOtherToolsMetadataOnAJobSurvivesTheOperatorsWrites(t *testing.T) {
	e := newEnv(t)
	task := e.create(e.task("foreign", withLabels(testenv.RunSecondsLabel, "60")))
	e.waitPhase(task.Name, v1.PhaseRunning)
	job := &e.jobs(task.Name)[0]
	foreign := map[string]string{"kueue.x-k8s.io/workload": "w", "team.example.org/owner": "alice", "task.example.com": "not ours"}
	patch := []byte(`{"metadata":{"annotations":{"kueue.x-k8s.io/workload":"w","team.example.org/owner":"alice","task.example.com":"not ours"},"labels":{"team":"a"}}}`)
	if err := e.c.Patch(t.Context(), job, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Patch(t.Context(), job, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/ownerReferences"}]`))); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, waitTimeout, "the Task to take its Job back", func(ctx context.Context) (bool, error) {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		return metav1.GetControllerOf(job) != nil, errors.New("no controller yet")
	})
	e.update(task.Name, func(t *v1.Task) { t.Spec.Suspend = true })
	testenv.Eventually(t, waitTimeout, "the Job to be suspended", func(ctx context.Context) (bool, error) {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		return job.Spec.Suspend != nil && *job.Spec.Suspend, errors.New("not suspended")
	})
	e.update(task.Name, func(t *v1.Task) { t.Spec.Suspend = false })
	testenv.Eventually(t, waitTimeout, "the Job to be resumed", func(ctx context.Context) (bool, error) {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		return job.Spec.Suspend != nil && !*job.Spec.Suspend, fmt.Errorf("suspend %v", job.Spec.Suspend)
	})
	for k, v := range foreign {
		if job.Annotations[k] != v {
			t.Errorf("annotation %s = %q after the operator's writes, want %q (all: %v)", k, job.Annotations[k], v, job.Annotations)
		}
	}
	if job.Labels["team"] != "a" {
		t.Errorf("label team = %q, want a (all: %v)", job.Labels["team"], job.Labels)
	}
	if job.Annotations[v1.AnnotationTaskUID] != string(e.get(task.Name).UID) {
		t.Errorf("task-uid annotation %q lost", job.Annotations[v1.AnnotationTaskUID])
	}
}
