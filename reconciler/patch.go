package reconciler

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "example.com/task-operator/apis/v1"
)

// patchHelper writes a Task back the way cluster-api's util/patch does: it snapshots the Task
// when created, and Patch sends only what changed since — a merge patch of the finalizers and a
// merge patch of the status subresource, both guarded by the resourceVersion — and nothing at
// all when nothing changed. The guard matters: the status is the durable record of every run,
// and one computed from a Task that changed since it was read (a second writer, a replica that
// lost its lease) must not overwrite a newer record; it fails with a conflict and is redone.
type patchHelper struct {
	client client.Client
	before *v1.Task
	// onWrite is told the Task's new resourceVersion after each write.
	onWrite func(*v1.Task)
}

func newPatchHelper(c client.Client, task *v1.Task, onWrite func(*v1.Task)) *patchHelper {
	return &patchHelper{client: c, before: task.DeepCopy(), onWrite: onWrite}
}

// Patch writes task's changed finalizers, then its changed status, and takes task as the new
// snapshot. task's resourceVersion follows the writes; its spec and status stay as they are.
func (h *patchHelper) Patch(ctx context.Context, task *v1.Task) error {
	if err := h.patchFinalizers(ctx, task); err != nil {
		return err
	}
	if err := h.patchStatus(ctx, task); err != nil {
		return err
	}
	h.before = task.DeepCopy()
	return nil
}

func (h *patchHelper) patchFinalizers(ctx context.Context, task *v1.Task) error {
	if slices.Equal(h.before.Finalizers, task.Finalizers) {
		return nil
	}
	obj := h.before.DeepCopy()
	obj.Finalizers = slices.Clone(task.Finalizers)
	err := h.client.Patch(ctx, obj, client.MergeFromWithOptions(h.before, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsNotFound(err) && task.DeletionTimestamp != nil:
		return nil // an earlier reconcile already let it go
	case err != nil:
		return fmt.Errorf("patch finalizers of task %s: %w", task.Name, err)
	}
	h.written(task, obj.ResourceVersion)
	h.before.Finalizers, h.before.ResourceVersion = slices.Clone(task.Finalizers), obj.ResourceVersion
	return nil
}

func (h *patchHelper) patchStatus(ctx context.Context, task *v1.Task) error {
	obj := h.before.DeepCopy()
	obj.Status = *task.Status.DeepCopy()
	if equality.Semantic.DeepEqual(h.before.Status, obj.Status) {
		return nil
	}
	data, err := client.MergeFromWithOptions(h.before, client.MergeFromWithOptimisticLock{}).Data(obj)
	if err != nil {
		return fmt.Errorf("diff status of task %s: %w", task.Name, err)
	}
	err = h.client.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, data))
	switch {
	case apierrors.IsNotFound(err) && task.DeletionTimestamp != nil:
		return nil // deleted while being reconciled
	case err != nil:
		return fmt.Errorf("patch status of task %s: %w", task.Name, err)
	}
	h.written(task, obj.ResourceVersion)
	return nil
}

func (h *patchHelper) written(task *v1.Task, rv string) {
	task.ResourceVersion = rv
	if h.onWrite != nil {
		h.onWrite(task)
	}
}
