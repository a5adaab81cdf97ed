package reconciler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "example.com/task-operator/apis/v1"
)

func TestObserveJob(t *testing.T) {
	created := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	done := created.Add(time.Minute)
	sched := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	job := func(mut func(j *batchv1.Job)) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
			Name: "t-1", UID: "u1", CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{v1.LabelRun: "1", v1.LabelAttempt: "1"},
		}}
		if mut != nil {
			mut(j)
		}
		return j
	}
	cond := func(typ batchv1.JobConditionType, status corev1.ConditionStatus, reason, msg string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(done)}
	}
	tests := []struct {
		name string
		job  *batchv1.Job
		want observedJob
	}{
		{
			name: "new job is active",
			job:  job(nil),
			want: observedJob{Name: "t-1", UID: "u1", Run: runID{Attempt: 1}, Created: created, State: jobActive},
		},
		{
			name: "complete",
			job: job(func(j *batchv1.Job) {
				j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, "", ""), cond(batchv1.JobComplete, corev1.ConditionTrue, "", "")}
				j.Status.CompletionTime = &metav1.Time{Time: done.Add(time.Second)}
			}),
			want: observedJob{Name: "t-1", UID: "u1", Run: runID{Attempt: 1}, Created: created, State: jobSucceeded, Finished: done.Add(time.Second)},
		},
		{
			name: "success criteria met, pods still terminating: still active",
			job: job(func(j *batchv1.Job) {
				j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, "", "")}
			}),
			want: observedJob{Name: "t-1", UID: "u1", Run: runID{Attempt: 1}, Created: created, State: jobActive},
		},
		{
			name: "deleted after the Job controller counted its success: succeeded",
			job: job(func(j *batchv1.Job) {
				j.Spec.Completions = ptr.To[int32](2)
				j.Status.Succeeded = 2
				j.DeletionTimestamp = &metav1.Time{Time: done}
			}),
			want: observedJob{Name: "t-1", UID: "u1", Run: runID{Attempt: 1}, Created: created, State: jobSucceeded, Deleting: true, Finished: done},
		},
		{
			name: "deleted with its success criteria met: succeeded",
			job: job(func(j *batchv1.Job) {
				j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, "", "")}
				j.DeletionTimestamp = &metav1.Time{Time: done}
			}),
			want: observedJob{Name: "t-1", UID: "u1", Run: runID{Attempt: 1}, Created: created, State: jobSucceeded, Deleting: true, Finished: done},
		},
		{
			name: "deleted with one of two completions: cancelled",
			job: job(func(j *batchv1.Job) {
				j.Spec.Completions = ptr.To[int32](2)
				j.Status.Succeeded = 1
				j.DeletionTimestamp = &metav1.Time{Time: done}
			}),
			want: observedJob{Name: "t-1", UID: "u1", Run: runID{Attempt: 1}, Created: created, State: jobActive, Deleting: true, Finished: done},
		},
		{
			name: "failure target alone is still active",
			job: job(func(j *batchv1.Job) {
				j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailureTarget, corev1.ConditionTrue, "DeadlineExceeded", "too slow")}
			}),
			want: observedJob{Name: "t-1", UID: "u1", Run: runID{Attempt: 1}, Created: created, State: jobActive},
		},
		{
			name: "failed with deadline",
			job: job(func(j *batchv1.Job) {
				j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionTrue, "DeadlineExceeded", "Job was active longer than specified deadline")}
			}),
			want: observedJob{Name: "t-1", UID: "u1", Run: runID{Attempt: 1}, Created: created, State: jobFailed, Finished: done,
				Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"},
		},
		{
			name: "false condition ignored",
			job: job(func(j *batchv1.Job) {
				j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionFalse, "x", "y")}
			}),
			want: observedJob{Name: "t-1", UID: "u1", Run: runID{Attempt: 1}, Created: created, State: jobActive},
		},
		{
			name: "suspended scheduled retry being deleted",
			job: job(func(j *batchv1.Job) {
				j.Labels[v1.LabelAttempt] = "2"
				j.Annotations = map[string]string{v1.AnnotationScheduledTime: "2026-01-01T09:00:00Z"}
				j.Spec.Suspend = ptr.To(true)
				j.DeletionTimestamp = &metav1.Time{Time: done}
			}),
			want: observedJob{Name: "t-1", UID: "u1", Run: runID{Scheduled: sched, Attempt: 2}, Created: created, State: jobActive, Suspended: true, Deleting: true, Finished: done},
		},
		{
			name: "unlabelled job named by an earlier release",
			job: job(func(j *batchv1.Job) {
				j.Labels = nil
			}),
			want: observedJob{Name: "t-1", UID: "u1", Created: created, State: jobActive},
		},
		{
			name: "labels stripped: the name tells the run",
			job: job(func(j *batchv1.Job) {
				j.Name, j.Labels = "t-1767258000-3", nil
				j.Finalizers = []string{v1.FinalizerRunOutcome}
			}),
			want: observedJob{Name: "t-1767258000-3", UID: "u1", Run: runID{Scheduled: sched, Attempt: 3}, Created: created, State: jobActive, Protected: true},
		},
		{
			name: "the name wins over edited labels",
			job: job(func(j *batchv1.Job) {
				j.Name = "t-0-2"
				j.Labels[v1.LabelAttempt] = "7"
			}),
			want: observedJob{Name: "t-0-2", UID: "u1", Run: runID{Attempt: 2}, Created: created, State: jobActive},
		},
		{
			name: "finished, deleted by its TTL, still held by the finalizer",
			job: job(func(j *batchv1.Job) {
				j.Name = "t-0-1"
				j.Finalizers = []string{"foregroundDeletion", v1.FinalizerRunOutcome}
				j.DeletionTimestamp = &metav1.Time{Time: done.Add(time.Minute)}
				j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobComplete, corev1.ConditionTrue, "", "")}
			}),
			want: observedJob{Name: "t-0-1", UID: "u1", Run: runID{Attempt: 1}, Created: created, State: jobSucceeded, Finished: done, Deleting: true, Protected: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, observeJob("t", tc.job)); diff != "" {
				t.Errorf("observeJob (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFailure(t *testing.T) {
	tests := []struct {
		j    observedJob
		want string
	}{
		{observedJob{Name: "a-1", Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}, "Job a-1 failed: BackoffLimitExceeded: Job has reached the specified backoff limit"},
		{observedJob{Name: "a-1", Reason: "PodFailurePolicy", Message: "Container task for pod ns/a-1-x7k2p failed with exit code 137 matching FailJob rule at index 1"},
			"Job a-1 failed: PodFailurePolicy: Container task for pod ns/a-1-x7k2p failed with exit code 137 matching FailJob rule at index 1"},
		{observedJob{Name: "a-1", Reason: "DeadlineExceeded"}, "Job a-1 failed: DeadlineExceeded"},
		{observedJob{Name: "a-1"}, "Job a-1 failed"},
		{observedJob{Name: "a-1", Deleting: true}, "Job a-1 was deleted before it finished"},
		{observedJob{Name: "a-1", Deleting: true, Replaced: true}, "Job a-1 was replaced by a newer run"},
		{observedJob{Name: "a-1", Missing: true}, "Job a-1 disappeared before its outcome was recorded"},
		{observedJob{Name: "a-1", Deleting: true, State: jobFailed, Reason: "DeadlineExceeded"}, "Job a-1 failed: DeadlineExceeded"},
	}
	for _, tc := range tests {
		if got := tc.j.failure(); got != tc.want {
			t.Errorf("failure() = %q, want %q", got, tc.want)
		}
	}
}
