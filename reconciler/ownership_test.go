package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

// Which Jobs are a Task's, on the real control plane: the Job controller's own pod labels on
// a Task, a Job of the run's name that is someone else's, Jobs that lost their owner reference.

// TestTaskWithJobControllerLabelsRuns: a Task stored with the Job controller's own pod labels
// (admission refuses adding them; this one bypasses it) still runs: the operator does not copy
// them to the pod template, which the API server would refuse.
func TestTaskWithJobControllerLabelsRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("labelled", withLabels("job-name", "mine", "controller-uid", "x", "batch.kubernetes.io/job-name", "mine", "team", "a")))
	e.waitPhase(task.Name, v1.PhaseSucceeded)
	for _, pod := range e.pods(task.Name) {
		if pod.Labels["team"] != "a" {
			t.Errorf("pod %s lost the Task's own label: %v", pod.Name, pod.Labels)
		}
		if got := pod.Labels["job-name"]; got != pod.Labels["batch.kubernetes.io/job-name"] || got == "mine" {
			t.Errorf("pod %s: job-name %q is not the Job controller's", pod.Name, got)
		}
	}
}

// TestJobNameTakenIsReportedUntilDeleted: a Job of the run's name that is not the Task's is left
// alone, and the Task says so (Stalled, reason JobNameTaken naming the Job, a Warning Event);
// once that Job is deleted the run starts without waiting out a backoff.
func TestJobNameTakenIsReportedUntilDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	squatter := foreignJob(e.ns, "squatted-0-1", nil, nil)
	squatter.Spec.Suspend = ptr.To(true)
	if err := e.c.Create(t.Context(), squatter); err != nil {
		t.Fatalf("create the squatter: %v", err)
	}
	task := e.create(e.task("squatted"))
	testenv.Eventually(t, waitTimeout, "the Task to report the taken name", func(context.Context) (bool, error) {
		got := e.get(task.Name)
		c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1.ReasonJobNameTaken {
			return false, fmt.Errorf("Stalled = %+v", c)
		}
		if !strings.Contains(c.Message, squatter.Name) {
			return false, fmt.Errorf("Stalled message %q does not name %s", c.Message, squatter.Name)
		}
		return slices.Contains(e.eventReasons(got), v1.EventJobNameTaken), fmt.Errorf("events: %v", e.eventReasons(got))
	})
	if err := e.c.Get(t.Context(), client.ObjectKeyFromObject(squatter), squatter); err != nil || len(squatter.OwnerReferences) > 0 {
		t.Fatalf("squatter after the report: %v, owners %v", err, squatter.OwnerReferences)
	}
	if err := e.c.Delete(t.Context(), squatter, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatalf("delete the squatter: %v", err)
	}
	got := e.waitPhase(task.Name, v1.PhaseSucceeded)
	if c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionStalled); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Stalled after the run = %+v, want False", c)
	}
}

// TestOrphanDeleteWithOperatorAwayReleasesJobs: `kubectl delete task --cascade=orphan` while
// the operator is away. The garbage collector takes the Jobs' owner reference off; when the
// operator returns it releases their run-outcome finalizer before letting the Task go, so the
// kept Jobs can be deleted later.
func TestOrphanDeleteWithOperatorAwayReleasesJobs(t *testing.T) {
	t.Parallel()
	e := newEnvWithoutOperator(t)
	op := e.startOperator()
	task := e.create(e.task("orphaned", withLabels(outcome, hang)))
	e.waitPhase(task.Name, v1.PhaseRunning)
	op.stop(t)

	if err := e.c.Delete(t.Context(), task, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatalf("delete with orphan: %v", err)
	}
	testenv.Eventually(t, waitTimeout, "the garbage collector to orphan the Job", func(context.Context) (bool, error) {
		jobs := e.jobs(task.Name)
		return len(jobs) == 1 && len(jobs[0].OwnerReferences) == 0, fmt.Errorf("jobs: %v", ownersOf(jobs))
	})
	e.startOperator()
	testenv.Eventually(t, waitTimeout, "the Task to go", func(ctx context.Context) (bool, error) {
		err := e.c.Get(ctx, client.ObjectKeyFromObject(task), &v1.Task{})
		return apierrors.IsNotFound(err), fmt.Errorf("get task: %v", err)
	})
	jobs := e.jobs(task.Name)
	if len(jobs) != 1 || jobs[0].DeletionTimestamp != nil || controllerutil.ContainsFinalizer(&jobs[0], v1.FinalizerRunOutcome) {
		t.Fatalf("kept Jobs: %v, want one, not deleted, without %s", finalizersOf(jobs), v1.FinalizerRunOutcome)
	}
	if err := e.c.Delete(t.Context(), &jobs[0], client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatalf("delete the kept Job: %v", err)
	}
	testenv.Eventually(t, waitTimeout, "the kept Job to go", func(context.Context) (bool, error) {
		return len(e.jobs(task.Name)) == 0, fmt.Errorf("jobs: %v", finalizersOf(e.jobs(task.Name)))
	})
}

// TestJobsThatLostTheirOwnerAreReleasedOnceTheTaskIsGoneWhateverItsNameLength: with the
// operator away, Tasks deleted with --cascade=orphan and their finalizers patched away (the
// README's remedy), so that the Tasks are gone before the operator is back. Their Jobs' events
// must still reach a reconcile of the gone Task, which releases the run-outcome finalizer: a
// Task name over 63 characters is labelled by a cut and hash of it, which names no Task.
func TestJobsThatLostTheirOwnerAreReleasedOnceTheTaskIsGoneWhateverItsNameLength(t *testing.T) {
	t.Parallel()
	e := newEnvWithoutOperator(t)
	op := e.startOperator()
	names := []string{"short", "long-" + strings.Repeat("x", 70)}
	for _, n := range names {
		e.create(e.task(n, withLabels(outcome, hang)))
	}
	jobOf := map[string]string{}
	for _, n := range names {
		jobOf[n] = e.waitPhase(n, v1.PhaseRunning).Status.LastJob.Name
	}
	op.stop(t)
	for _, n := range names {
		if err := e.c.Delete(t.Context(), e.get(n), client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
			t.Fatalf("delete %s with orphan: %v", n, err)
		}
	}
	job := func(ctx context.Context, n string) (*batchv1.Job, error) {
		j := &batchv1.Job{}
		return j, e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: jobOf[n]}, j)
	}
	testenv.Eventually(t, waitTimeout, "the garbage collector to orphan the Jobs", func(ctx context.Context) (bool, error) {
		for _, n := range names {
			if j, err := job(ctx, n); err != nil || len(j.OwnerReferences) > 0 {
				return false, fmt.Errorf("job of %s: %v, owners %v", n, err, j.OwnerReferences)
			}
		}
		return true, nil
	})
	for _, n := range names {
		task := &v1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: n}}
		if err := e.c.Patch(t.Context(), task, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
			t.Fatalf("patch the finalizers of %s away: %v", n, err)
		}
	}
	testenv.Eventually(t, waitTimeout, "the Tasks to go", func(ctx context.Context) (bool, error) {
		for _, n := range names {
			if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: n}, &v1.Task{}); !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("task %s: %v", n, err)
			}
		}
		return true, nil
	})
	e.startOperator()
	for _, n := range names {
		testenv.Eventually(t, waitTimeout, fmt.Sprintf("the Job of the gone Task %s (%d characters) released", n, len(n)), func(ctx context.Context) (bool, error) {
			j, err := job(ctx, n)
			if err != nil {
				return false, err
			}
			return !controllerutil.ContainsFinalizer(j, v1.FinalizerRunOutcome), fmt.Errorf("finalizers %v, label %s", j.Finalizers, j.Labels[v1.LabelTaskName])
		})
	}
}

// TestJobThatLostItsOwnerIsTakenBack: the owner reference of an active Job removed by hand. The
// Task takes the Job back (its run-uid annotation says whose it is) instead of reading its
// attempt as missing: no second attempt starts while it runs, and its outcome is recorded.
func TestJobThatLostItsOwnerIsTakenBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("disowned", withRetries(2), withLabels(testenv.RunSecondsLabel, "6")))
	e.waitPhase(task.Name, v1.PhaseRunning)
	job := &e.jobs(task.Name)[0]
	patch := []byte(`[{"op":"remove","path":"/metadata/ownerReferences"}]`)
	if err := e.c.Patch(t.Context(), job, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		t.Fatalf("remove the owner reference: %v", err)
	}
	testenv.Eventually(t, waitTimeout, "the Task to take its Job back", func(ctx context.Context) (bool, error) {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		return metav1.GetControllerOf(job) != nil, errors.New("no controller yet")
	})
	if ref := metav1.GetControllerOf(job); ref.UID != e.get(task.Name).UID {
		t.Fatalf("the Job's controller is %+v, want the Task", ref)
	}
	got := e.waitPhase(task.Name, v1.PhaseSucceeded)
	if got.Status.Attempts != 1 {
		t.Errorf("attempts = %d, want 1: %s", got.Status.Attempts, describe(got))
	}
	testenv.Eventually(t, waitTimeout, "the Job's finalizer to be released", func(context.Context) (bool, error) {
		jobs := e.jobs(task.Name)
		return len(jobs) == 1 && !controllerutil.ContainsFinalizer(&jobs[0], v1.FinalizerRunOutcome), fmt.Errorf("jobs: %v", finalizersOf(jobs))
	})
}

// TestClearedCurrentRunIsRebuiltFromItsJob: status.currentRun cleared by a client with
// tasks/status rights while the run's Job still exists: the operator reads the record back from
// the Job (the evidence) and runs nothing again.
func TestClearedCurrentRunIsRebuiltFromItsJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("cleared"))
	e.waitPhase(task.Name, v1.PhaseSucceeded)
	patch := []byte(`{"status":{"currentRun":null,"attempts":0,"lastJob":null}}`)
	if err := e.c.Status().Patch(t.Context(), e.get(task.Name), client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("clear currentRun: %v", err)
	}
	testenv.Eventually(t, waitTimeout, "the record to come back", func(context.Context) (bool, error) {
		got := e.get(task.Name)
		return got.Status.CurrentRun != nil && got.Status.Phase == v1.PhaseSucceeded, errors.New(describe(got))
	})
	if jobs := e.jobs(task.Name); len(jobs) != 1 {
		t.Errorf("%d Jobs after the record was cleared, want 1: %v", len(jobs), finalizersOf(jobs))
	}
}

// foreignJob is a Job the operator did not make: a person's, with the labels and annotations
// given; its pods end as labels says (testenv.OutcomeLabel).
func foreignJob(namespace, name string, labels, annotations map[string]string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels, Annotations: annotations},
		Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{testenv.OutcomeLabel: testenv.OutcomeHang}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
				},
			},
		},
	}
}

func ownersOf(jobs []batchv1.Job) map[string][]metav1.OwnerReference {
	out := map[string][]metav1.OwnerReference{}
	for _, j := range jobs {
		out[j.Name] = j.OwnerReferences
	}
	return out
}

func finalizersOf(jobs []batchv1.Job) map[string][]string {
	out := map[string][]string{}
	for _, j := range jobs {
		out[j.Name] = j.Finalizers
	}
	return out
}

// TestJobOfThePreviousReleaseThatLostItsOwnerIsTakenBack: the previous release set no
// task.example.com/task-uid annotation. An active Job it made (here: the annotation removed, as
// it would be absent) whose owner reference is then removed by hand is still the attempt the
// stored status records (by name and UID): the Task must not read it as missing and start a
// second attempt while it runs, nor release its run-outcome finalizer before its outcome is
// recorded.
func TestJobOfThePreviousReleaseThatLostItsOwnerIsTakenBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("upgraded-disowned", withRetries(2), withLabels(testenv.RunSecondsLabel, "8")))
	e.waitPhase(task.Name, v1.PhaseRunning)
	job := &e.jobs(task.Name)[0]
	patch := []byte(`[{"op":"remove","path":"/metadata/annotations/task.example.com~1task-uid"},{"op":"remove","path":"/metadata/ownerReferences"}]`)
	if err := e.c.Patch(t.Context(), job, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		t.Fatalf("remove the annotation and the owner reference: %v", err)
	}
	testenv.Eventually(t, waitTimeout, "the Task's run to end", func(context.Context) (bool, error) {
		got := e.get(task.Name)
		return got.Status.Phase == v1.PhaseSucceeded || got.Status.Phase == v1.PhaseFailed || got.Status.Attempts > 1, errors.New(describe(got))
	})
	got := e.get(task.Name)
	if got.Status.Attempts != 1 || got.Status.LastError != "" {
		t.Errorf("attempts = %d, lastError %q, want 1 and none: the first Job still ran (jobs %v)", got.Status.Attempts, got.Status.LastError, finalizersOf(e.jobs(task.Name)))
	}
}

// TestJobTheTaskNeverMadeIsNotTakenBack: a Job that carries the Task's name label and its
// task.example.com/task-uid annotation but was never created by the operator (a copy of one of
// its Jobs saved without its owner reference, or one forged by anyone who may create Jobs in
// the namespace) under a name none of the Task's runs has. It is not a Job that lost its owner:
// the Task must leave it alone (not own it, not count it, not delete it with the Task).
func TestJobTheTaskNeverMadeIsNotTakenBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("copied", func(t *v1.Task) { t.Spec.Suspend = true }))
	copied := foreignJob(e.ns, "copied-rerun",
		map[string]string{v1.LabelTaskName: task.Name, v1.LabelAttempt: "1"},
		map[string]string{v1.AnnotationTaskUID: string(task.UID)})
	if err := e.c.Create(t.Context(), copied); err != nil {
		t.Fatalf("create the copy: %v", err)
	}
	// The Task's own Job is created after the copy, so the cache that shows it shows the copy.
	e.update(task.Name, func(t *v1.Task) { t.Spec.Suspend = false })
	var got *v1.Task
	testenv.Eventually(t, waitTimeout, "the Task's run to succeed (or the copy to be its run)", func(context.Context) (bool, error) {
		got = e.get(task.Name)
		return got.Status.Phase == v1.PhaseSucceeded || (got.Status.LastJob != nil && got.Status.LastJob.Name == copied.Name), errors.New(describe(got))
	})
	if err := e.c.Get(t.Context(), client.ObjectKeyFromObject(copied), copied); err != nil {
		t.Fatalf("get the copy: %v", err)
	}
	if len(copied.OwnerReferences) > 0 || got.Status.Phase != v1.PhaseSucceeded {
		t.Errorf("the Task took a Job it never made: the copy's owners %v; the Task: %s", copied.OwnerReferences, describe(got))
	}
}

// TestJobOfAnotherGroupsTaskIsNotDeleted: a Job of the run's name controlled by a kind named
// Task of another API group (another project's CRD; its name is the Task's) is someone else's:
// the Task reports the taken name and leaves the Job alone, as for any other squatter, instead
// of deleting it as the Job of an earlier incarnation of itself.
func TestJobOfAnotherGroupsTaskIsNotDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	squatter := foreignJob(e.ns, "namesake-0-1", nil, nil)
	squatter.Spec.Suspend = ptr.To(true)
	squatter.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "other.example.org/v1", Kind: v1.Kind, Name: "namesake",
		UID: "0b7c3e0e-0000-4000-8000-000000000001", Controller: ptr.To(true),
	}}
	if err := e.c.Create(t.Context(), squatter); err != nil {
		t.Fatalf("create the other group's Job: %v", err)
	}
	task := e.create(e.task("namesake"))
	testenv.Eventually(t, waitTimeout, "the Task to report the taken name or to remove the Job", func(ctx context.Context) (bool, error) {
		job := &batchv1.Job{}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(squatter), job); apierrors.IsNotFound(err) || (err == nil && (job.DeletionTimestamp != nil || job.UID != squatter.UID)) {
			return true, nil
		}
		c := meta.FindStatusCondition(e.get(task.Name).Status.Conditions, v1.ConditionStalled)
		return c != nil && c.Reason == v1.ReasonJobNameTaken, fmt.Errorf("Stalled = %+v", c)
	})
	job := &batchv1.Job{}
	if err := e.c.Get(t.Context(), client.ObjectKeyFromObject(squatter), job); err != nil || job.DeletionTimestamp != nil || job.UID != squatter.UID {
		t.Errorf("the other group's Job (uid %s) was deleted by the Task: now %q uid %s (get: %v); the Task: %s", squatter.UID, job.Name, job.UID, err, describe(e.get(task.Name)))
	}
}
