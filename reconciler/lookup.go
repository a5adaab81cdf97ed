package reconciler

import (
	"context"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "example.com/task-operator/apis/v1"
)

// Reading Jobs past the cache: what the cache does not show is never assumed gone.

// unseen are the Jobs the cache does not show but that must be accounted for: creations past
// the expectation timeout, and every Job the stored status says may still run.
func unseen(task *v1.Task, cached map[string]bool, overdue []string) []string {
	var out []string
	add := func(name string) {
		if name != "" && !cached[name] && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	for _, name := range overdue {
		add(name)
	}
	for _, ref := range task.Status.ActiveJobs {
		add(ref.Name)
	}
	// The current attempt's Job, while it may run or, once it ended, may still hold its
	// finalizer (the Task's own finalizer says so): a Job whose labels were stripped is found
	// only this way.
	if rec := storedRecord(task); rec != nil && (rec.outcome == v1.RunActive || controllerutil.ContainsFinalizer(task, v1.FinalizerJobs)) {
		add(rec.job.Name)
	}
	return out
}

// lookUp reads a Job the cache does not show from the API server. A Job of that name that is
// not this Task's (or another incarnation of it, by UID) counts as missing; nil means there is
// nothing to account for (a creation that never happened).
func (r *Reconciler) lookUp(ctx context.Context, task *v1.Task, name string) (*observedJob, error) {
	job := &batchv1.Job{}
	err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: task.Namespace, Name: name}, job)
	if err == nil && lostOwner(task, job) && uidMatches(task, job) {
		if err := r.adopt(ctx, task, job); err != nil {
			return nil, err
		}
	}
	switch {
	case err == nil && metav1.IsControlledBy(job, task) && uidMatches(task, job):
		o := observeJob(task.Name, job)
		o.Uncached = true
		return &o, nil
	case err == nil || apierrors.IsNotFound(err):
		return missingJob(task, name), nil
	default:
		return nil, fmt.Errorf("get job %s past the cache: %w", name, err)
	}
}

// uidMatches says job is the incarnation the stored status recorded under its name, if any.
func uidMatches(task *v1.Task, job *batchv1.Job) bool {
	for _, ref := range task.Status.ActiveJobs {
		if ref.Name == job.Name && ref.UID != "" && ref.UID != job.UID {
			return false
		}
	}
	if rec := task.Status.CurrentRun; rec != nil && rec.Job.Name == job.Name && rec.Job.UID != "" && rec.Job.UID != job.UID {
		return false
	}
	return true
}

// missingJob stands for a Job the stored status named and the API server no longer has.
func missingJob(task *v1.Task, name string) *observedJob {
	o := &observedJob{Name: name, Missing: true}
	if rec := storedRecord(task); rec != nil && rec.job.Name == name {
		o.Run, o.UID = rec.run, rec.job.UID
	} else if run, ok := runFromAnyName(task.Name, name); ok {
		o.Run = run
	} else if run, ok := legacyRunFromName(task.Name, name); ok {
		o.Run = run
	}
	return o
}

// liveJobs lists the Task's Jobs from the API server: by label, plus those the status names.
// Those that lost their owner reference (orphaned) count: they still hold FinalizerRunOutcome.
func (r *Reconciler) liveJobs(ctx context.Context, task *v1.Task) (owned, orphaned []batchv1.Job, err error) {
	var list batchv1.JobList
	if err := r.apiReader.List(ctx, &list, client.InNamespace(task.Namespace),
		client.MatchingLabels{v1.LabelTaskName: labelValue(task.Name)}); err != nil {
		return nil, nil, fmt.Errorf("list jobs of task %s: %w", task.Name, err)
	}
	names := map[string]bool{}
	for _, job := range list.Items {
		switch {
		case metav1.IsControlledBy(&job, task):
			owned = append(owned, job)
		case lostOwner(task, &job):
			orphaned = append(orphaned, job)
		default:
			continue
		}
		names[job.Name] = true
	}
	for _, name := range unseen(task, names, nil) {
		job := &batchv1.Job{}
		err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: task.Namespace, Name: name}, job)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, nil, fmt.Errorf("get job %s: %w", name, err)
		case metav1.IsControlledBy(job, task):
			owned = append(owned, *job)
		case lostOwner(task, job):
			orphaned = append(orphaned, *job)
		}
	}
	return owned, orphaned, nil
}
