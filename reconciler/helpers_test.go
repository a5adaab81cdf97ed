package reconciler

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "example.com/task-operator/apis/v1"
)

// t0 is the tests' epoch: the Tasks are created then.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(seconds int) time.Time { return t0.Add(time.Duration(seconds) * time.Second) }

func mtime(seconds int) *metav1.Time { return &metav1.Time{Time: at(seconds)} }

// newTask is a one-shot Shell Task named "t" with fast retries: 2 retries, 1s doubling to 8s.
func newTask(mut ...func(*v1.Task)) *v1.Task {
	task := &v1.Task{
		ObjectMeta: metav1.ObjectMeta{
			Name: "t", Namespace: "ns", UID: "task-uid", Generation: 1,
			CreationTimestamp: metav1.NewTime(t0),
		},
		Spec: v1.TaskSpec{
			Runner:      v1.Runner{Type: v1.RunnerShell, Shell: &v1.ShellRunner{Script: "true"}},
			Parallelism: 1,
			Retry: &v1.RetryPolicy{MaxRetries: 2, Backoff: &v1.Backoff{
				Initial: dur(time.Second), Factor: 2, Max: dur(8 * time.Second),
			}},
		},
	}
	for _, m := range mut {
		m(task)
	}
	return task
}

// scheduled makes the Task run every minute, on the minute.
func scheduled(policy v1.ConcurrencyPolicy) func(*v1.Task) {
	return func(t *v1.Task) {
		t.Spec.Schedule = &v1.Schedule{Cron: "* * * * *", ConcurrencyPolicy: policy}
	}
}

func withStatus(st v1.TaskStatus) func(*v1.Task) {
	return func(t *v1.Task) { t.Status = st }
}

func suspended(t *v1.Task) { t.Spec.Suspend = true }

func maxRetries(n int32) func(*v1.Task) {
	return func(t *v1.Task) { t.Spec.Retry.MaxRetries = n }
}

func deadline(s int64) func(*v1.Task) {
	return func(t *v1.Task) { t.Spec.Schedule.StartingDeadlineSeconds = ptr.To(s) }
}

// oneShotJob is attempt n of a one-shot Task, created at second n*100, still holding its
// finalizer.
func oneShotJob(n int32, state jobState, finishedAt int) observedJob {
	j := observedJob{
		Name: jobName("t", runID{Attempt: n}), UID: "job-uid",
		Run: runID{Attempt: n}, Created: at(int(n) * 100), State: state, Protected: true,
	}
	if state != jobActive {
		j.Finished = at(finishedAt)
	}
	if state == jobFailed {
		j.Reason, j.Message = exitCodeFailure(j.Name)
	}
	return j
}

// exitCodeFailure is the Failed condition the Job controller gives a Job whose pod's container
// exited 1: the FailJob rule of the pod failure policy matched (see ignoreDisruptions).
func exitCodeFailure(job string) (reason, message string) {
	return batchv1.JobReasonPodFailurePolicy, "Container task for pod default/" + job + "-x7k2p failed with exit code 1 matching FailJob rule at index 1"
}

// schedJob is attempt n of the run scheduled at second s.
func schedJob(s int, n int32, state jobState, finishedAt int) observedJob {
	run := runID{Scheduled: at(s), Attempt: n}
	j := observedJob{Name: jobName("t", run), UID: "job-uid", Run: run, Created: at(s), State: state, Protected: true}
	if state != jobActive {
		j.Finished = at(finishedAt)
	}
	if state == jobFailed {
		j.Reason, j.Message = exitCodeFailure(j.Name)
	}
	return j
}

// replacedJob is attempt n of the run scheduled at second s, deleted by policy Replace at second
// deletedAt before it finished.
func replacedJob(s int, n int32, deletedAt int) observedJob {
	j := schedJob(s, n, jobActive, 0)
	j.Deleting, j.Replaced, j.Finished = true, true, at(deletedAt)
	return j
}

func ref(name string) *v1.JobReference { return &v1.JobReference{Name: name, UID: "job-uid"} }

// run is the stored record of attempt n of the run scheduled at second s (0: one-shot).
func run(s int, n int32, outcome v1.RunOutcome, finishedAt int) *v1.RunRecord {
	id := runID{Attempt: n}
	if s > 0 {
		id.Scheduled = at(s)
	}
	r := &v1.RunRecord{ScheduledTime: timePtr(id.Scheduled), Attempt: n, Job: *ref(jobName("t", id)), Outcome: outcome}
	if outcome != v1.RunActive {
		r.FinishTime = mtime(finishedAt)
	}
	return r
}

// retrying is the stored record of a failed attempt whose retry is due at second retryAt.
func retrying(s int, n int32, finishedAt, retryAt int) *v1.RunRecord {
	r := run(s, n, v1.RunFailed, finishedAt)
	r.RetryTime = mtime(retryAt)
	return r
}
