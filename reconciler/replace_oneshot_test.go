package reconciler

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "example.com/task-operator/apis/v1"
)

// TestAOneShotRunReplacedByAnAddedScheduleIsNotReportedAsFailed: a one-shot Task's run is active
// when a schedule with concurrencyPolicy Replace is added. At the first schedule time the
// one-shot run's Job is annotated task.example.com/replaced-by and deleted, and the scheduled run
// starts. The guarantee: "Replace: the active Jobs are annotated task.example.com/replaced-by and
// deleted (that run is not reported as failed, across restarts too)". The reconciles after the
// replacement read the Job from the API server (observeJob): it must read as replaced, and the
// status must not report a failure.
func TestAOneShotRunReplacedByAnAddedScheduleIsNotReportedAsFailed(t *testing.T) {
	oneShot := runID{Attempt: 1}
	sched := runID{Scheduled: at(60), Attempt: 1}
	task := newTask(func(t *v1.Task) {
		t.Spec.Schedule = &v1.Schedule{Cron: "* * * * *", ConcurrencyPolicy: v1.ReplaceConcurrent}
		t.Status = v1.TaskStatus{
			ObservedGeneration: 1, Phase: v1.PhaseRunning, Attempts: 1,
			ActiveJobs:       []v1.JobReference{*ref(jobName("t", oneShot))},
			ObservedSchedule: &v1.ObservedSchedule{Cron: "* * * * *", Since: *mtime(10)},
			CurrentRun:       run(0, 1, v1.RunActive, 0),
		}
	})
	now := at(60)
	jobs := []observedJob{oneShotJob(1, jobActive, 0)}
	p := planRuns(task, analyze(task, jobs, now), jobs, now)
	if p.create == nil || !p.create.equal(sched) || len(p.replace) != 1 || p.replace[0].Name != jobName("t", oneShot) {
		t.Fatalf("at %s: plan starts %s replacing %v, want the run for %s replacing %s", now, created(p), p.replace, at(60), jobName("t", oneShot))
	}

	// The one-shot Job as the API server has it now: marked, deleted, held by its finalizer.
	deleted := metav1.NewTime(now)
	replacedJob := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: jobName("t", oneShot), Namespace: "ns", UID: "job-uid",
			CreationTimestamp: metav1.NewTime(at(100)), DeletionTimestamp: &deleted,
			Finalizers:  []string{v1.FinalizerRunOutcome},
			Labels:      map[string]string{v1.LabelTaskName: "t", v1.LabelRun: "1", v1.LabelAttempt: "1"},
			Annotations: map[string]string{v1.AnnotationTaskUID: "task-uid", v1.AnnotationReplacedBy: jobName("t", sched)},
		},
		Spec: batchv1.JobSpec{Completions: ptr.To[int32](1), Parallelism: ptr.To[int32](1)},
	}
	o := observeJob("t", replacedJob)
	if !o.Replaced {
		t.Errorf("the one-shot Job deleted by policy Replace (annotated %s) reads as not replaced", v1.AnnotationReplacedBy)
	}

	// The status written with the start, then the reconciles after the deletion is judged.
	newJob := observedJob{Name: jobName("t", sched), UID: "job-uid-2", Run: sched, Created: now, State: jobActive, Protected: true}
	jobs = []observedJob{o, newJob}
	task.Status = computeStatus(task, jobs, now)
	for _, s := range []int{61, 70} {
		task.Status = computeStatus(task, jobs, at(s))
	}
	st := task.Status
	if st.LastError != "" || meta.IsStatusConditionTrue(st.Conditions, v1.ConditionFailed) || !meta.IsStatusConditionTrue(st.Conditions, v1.ConditionReady) {
		c := meta.FindStatusCondition(st.Conditions, v1.ConditionFailed)
		t.Errorf("the replaced one-shot run is reported as failed: lastError %q, Failed=%s (%s), Ready=%t",
			st.LastError, c.Status, c.Message, meta.IsStatusConditionTrue(st.Conditions, v1.ConditionReady))
	}
}
