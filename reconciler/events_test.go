package reconciler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	v1 "example.com/task-operator/apis/v1"
)

func TestTransitionEvents(t *testing.T) {
	j1, j3 := jobName("t", runID{Attempt: 1}), jobName("t", runID{Attempt: 3})
	running := func(name string, attempts int32) v1.TaskStatus {
		return v1.TaskStatus{Phase: v1.PhaseRunning, Attempts: attempts, ActiveJobs: []v1.JobReference{{Name: name}}}
	}
	current := func(st v1.TaskStatus, name string) v1.TaskStatus {
		st.CurrentRun = &v1.RunRecord{Attempt: st.Attempts, Job: v1.JobReference{Name: name}, Outcome: v1.RunFailed}
		return st
	}
	replaced := schedJob(60, 1, jobActive, 0)
	replaced.Deleting, replaced.Replaced = true, true
	deleted := oneShotJob(1, jobActive, 0)
	deleted.Deleting = true
	tests := []struct {
		name        string
		task        *v1.Task
		prior, next v1.TaskStatus
		jobs        []observedJob
		want        []string // reasons
	}{
		{
			name:  "nothing changed",
			task:  newTask(),
			prior: running(j1, 1), next: running(j1, 1),
			jobs: []observedJob{oneShotJob(1, jobActive, 0)},
		},
		{
			name:  "succeeded",
			task:  newTask(),
			prior: running(j1, 1), next: v1.TaskStatus{Phase: v1.PhaseSucceeded, Attempts: 1},
			jobs: []observedJob{oneShotJob(1, jobSucceeded, 10)},
			want: []string{v1.EventSucceeded},
		},
		{
			name:  "failed, retry scheduled",
			task:  newTask(),
			prior: running(j1, 1), next: current(v1.TaskStatus{Phase: v1.PhaseRetrying, Attempts: 1, NextRunTime: mtime(11)}, j1),
			jobs: []observedJob{oneShotJob(1, jobFailed, 10)},
			want: []string{v1.EventRunFailed, v1.EventRetryScheduled},
		},
		{
			name:  "failed for good",
			task:  newTask(),
			prior: running(j3, 3), next: current(v1.TaskStatus{Phase: v1.PhaseFailed, Attempts: 3}, j3),
			jobs: []observedJob{oneShotJob(3, jobFailed, 10)},
			want: []string{v1.EventRunFailed, v1.EventRetriesExhausted},
		},
		{
			name:  "deleted while active",
			task:  newTask(),
			prior: running(j1, 1), next: current(v1.TaskStatus{Phase: v1.PhaseRetrying, Attempts: 1, NextRunTime: mtime(11)}, j1),
			jobs: []observedJob{deleted},
			want: []string{v1.EventRunFailed, v1.EventRetryScheduled},
		},
		{
			name:  "vanished while active",
			task:  newTask(),
			prior: running(j1, 1), next: current(v1.TaskStatus{Phase: v1.PhaseRetrying, Attempts: 1, NextRunTime: mtime(11)}, j1),
			jobs: []observedJob{{Name: j1, Run: runID{Attempt: 1}, Missing: true}},
			want: []string{v1.EventRunFailed, v1.EventRetryScheduled},
		},
		{
			name:  "replaced Jobs were told about already",
			task:  newTask(scheduled(v1.ReplaceConcurrent)),
			prior: running(replaced.Name, 1), next: running(jobName("t", runID{Scheduled: at(120), Attempt: 1}), 1),
			jobs: []observedJob{replaced, schedJob(120, 1, jobActive, 0)},
		},
		{
			name:  "retry pending survives a resume without a second event",
			task:  newTask(),
			prior: v1.TaskStatus{Phase: v1.PhaseRetrying, Attempts: 1, NextRunTime: mtime(11)},
			next:  v1.TaskStatus{Phase: v1.PhaseRetrying, Attempts: 1, NextRunTime: mtime(11)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range transitionEvents(tc.task, tc.prior, tc.next, tc.jobs) {
				got = append(got, e.Reason)
				if e.Action == "" || e.Note == "" || e.Type == "" {
					t.Errorf("incomplete event %+v", e)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEventTypesAreNormalOrWarning: every Event the controller makes is Normal or Warning, and the ones
// that report a failure are Warnings (never budgeted away).
func TestEventTypesAreNormalOrWarning(t *testing.T) {
	for _, e := range []eventSpec{normal(v1.EventJobCreated, "", ""), normal(v1.EventSucceeded, "", ""),
		normal(v1.EventRetryScheduled, "", ""), normal(v1.EventJobReplaced, "", "")} {
		if e.Type != corev1.EventTypeNormal {
			t.Errorf("%s: %s", e.Reason, e.Type)
		}
	}
	for _, e := range []eventSpec{warning(v1.EventRunFailed, "", ""), warning(v1.EventRetriesExhausted, "", ""),
		warning(v1.EventJobCreateFailed, "", ""), warning(v1.EventMissedRun, "", ""), warning(v1.EventTooManyMissedTimes, "", "")} {
		if e.Type != corev1.EventTypeWarning {
			t.Errorf("%s: %s", e.Reason, e.Type)
		}
	}
}
