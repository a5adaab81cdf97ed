package reconciler

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	v1 "example.com/task-operator/apis/v1"
)

func TestPlanRuns(t *testing.T) {
	type want struct {
		create    *runID
		replace   []string
		suspend   []string
		prune     []string
		missed    int32
		scheduled time.Time
		reason    string // substring of missedReason
	}
	suspendedJob := func(j observedJob) observedJob { j.Suspended = true; return j }
	tests := []struct {
		name string
		task *v1.Task
		jobs []observedJob
		now  time.Time
		want want
	}{
		{name: "new Task starts attempt 1", task: newTask(), now: at(1), want: want{create: &runID{Attempt: 1}}},
		{name: "running: nothing to do", task: newTask(), jobs: []observedJob{oneShotJob(1, jobActive, 0)}, now: at(150)},
		{name: "retry not due yet", task: newTask(), jobs: []observedJob{oneShotJob(1, jobFailed, 150)}, now: at(150)},
		{name: "retry due", task: newTask(), jobs: []observedJob{oneShotJob(1, jobFailed, 150)}, now: at(151), want: want{create: &runID{Attempt: 2}}},
		{name: "third attempt after the second backoff", task: newTask(), jobs: []observedJob{oneShotJob(1, jobFailed, 150), oneShotJob(2, jobFailed, 250)}, now: at(252), want: want{create: &runID{Attempt: 3}}},
		{name: "exhausted: nothing", task: newTask(), jobs: []observedJob{oneShotJob(1, jobFailed, 150), oneShotJob(2, jobFailed, 250), oneShotJob(3, jobFailed, 350)}, now: at(999)},
		{name: "succeeded: nothing", task: newTask(), jobs: []observedJob{oneShotJob(1, jobSucceeded, 150)}, now: at(999)},
		{name: "suspended before start: nothing", task: newTask(suspended), now: at(1)},
		{name: "suspend a running Job", task: newTask(suspended), jobs: []observedJob{oneShotJob(1, jobActive, 0)}, now: at(150), want: want{suspend: []string{"t-1"}}},
		{name: "suspended retry stays pending", task: newTask(suspended), jobs: []observedJob{oneShotJob(1, jobFailed, 150)}, now: at(999)},
		{name: "resume a suspended Job", task: newTask(), jobs: []observedJob{suspendedJob(oneShotJob(1, jobActive, 0))}, now: at(150), want: want{suspend: []string{"t-1"}}},
		{name: "already suspended: nothing", task: newTask(suspended), jobs: []observedJob{suspendedJob(oneShotJob(1, jobActive, 0))}, now: at(150)},
		{
			name: "one-shot failed history limit",
			task: newTask(maxRetries(5), func(t *v1.Task) { t.Spec.FailedJobsHistoryLimit = ptr.To[int32](1) }),
			jobs: []observedJob{oneShotJob(1, jobFailed, 150), oneShotJob(2, jobFailed, 250), oneShotJob(3, jobActive, 0)},
			now:  at(300),
			want: want{prune: []string{"t-1"}},
		},
		{name: "one-shot keeps all Jobs by default", task: newTask(), jobs: []observedJob{oneShotJob(1, jobFailed, 150), oneShotJob(2, jobFailed, 250), oneShotJob(3, jobActive, 0)}, now: at(300)},
		{name: "schedule: nothing due", task: newTask(scheduled(v1.AllowConcurrent)), now: at(59)},
		{
			name: "schedule: first time due",
			task: newTask(scheduled(v1.AllowConcurrent)), now: at(61),
			want: want{create: &runID{Scheduled: at(60), Attempt: 1}, scheduled: at(60)},
		},
		{
			name: "schedule: operator was away, latest of three starts",
			task: newTask(scheduled(v1.AllowConcurrent)), now: at(185),
			want: want{create: &runID{Scheduled: at(180), Attempt: 1}, scheduled: at(180), missed: 2, reason: "2 schedule time(s)"},
		},
		{
			name: "schedule: Forbid skips while a run is active",
			task: newTask(scheduled(v1.ForbidConcurrent)),
			jobs: []observedJob{schedJob(60, 1, jobActive, 0)}, now: at(121),
			want: want{scheduled: at(120), missed: 1, reason: "Forbid"},
		},
		{
			name: "schedule: Forbid runs when nothing is active",
			task: newTask(scheduled(v1.ForbidConcurrent)),
			jobs: []observedJob{schedJob(60, 1, jobSucceeded, 70)}, now: at(121),
			want: want{create: &runID{Scheduled: at(120), Attempt: 1}, scheduled: at(120)},
		},
		{
			name: "schedule: Replace deletes the active run",
			task: newTask(scheduled(v1.ReplaceConcurrent)),
			jobs: []observedJob{schedJob(60, 1, jobActive, 0)}, now: at(121),
			want: want{create: &runID{Scheduled: at(120), Attempt: 1}, scheduled: at(120), replace: []string{"t-1767225660"}},
		},
		{
			name: "schedule: Allow runs beside the active run",
			task: newTask(scheduled(v1.AllowConcurrent)),
			jobs: []observedJob{schedJob(60, 1, jobActive, 0)}, now: at(121),
			want: want{create: &runID{Scheduled: at(120), Attempt: 1}, scheduled: at(120)},
		},
		{
			name: "schedule: too late for the starting deadline",
			task: newTask(scheduled(v1.AllowConcurrent), deadline(10)), now: at(71),
			want: want{scheduled: at(60), missed: 1, reason: "starting deadline"},
		},
		{
			name: "schedule: within the starting deadline",
			task: newTask(scheduled(v1.AllowConcurrent), deadline(10)), now: at(70),
			want: want{create: &runID{Scheduled: at(60), Attempt: 1}, scheduled: at(60)},
		},
		{
			name: "schedule: retry of the current run",
			task: newTask(scheduled(v1.AllowConcurrent)),
			jobs: []observedJob{schedJob(60, 1, jobFailed, 70)}, now: at(71),
			want: want{create: &runID{Scheduled: at(60), Attempt: 2}},
		},
		{
			name: "schedule: the next time supersedes a pending retry",
			task: newTask(scheduled(v1.AllowConcurrent), func(t *v1.Task) {
				t.Spec.Retry.Backoff.Initial = dur(2 * time.Minute)
				t.Spec.Retry.Backoff.Max = dur(time.Hour)
			}),
			jobs: []observedJob{schedJob(60, 1, jobFailed, 70)}, now: at(121),
			want: want{create: &runID{Scheduled: at(120), Attempt: 1}, scheduled: at(120)},
		},
		{
			name: "schedule: suspended, nothing starts",
			task: newTask(scheduled(v1.AllowConcurrent), suspended), now: at(500),
		},
		{
			name: "schedule: invalid, nothing starts",
			task: newTask(func(t *v1.Task) { t.Spec.Schedule = &v1.Schedule{Cron: "nope"} }), now: at(500),
		},
		{
			name: "schedule: history keeps 3 succeeded and 1 failed, newest first",
			task: newTask(scheduled(v1.AllowConcurrent)),
			jobs: []observedJob{
				schedJob(60, 1, jobSucceeded, 70), schedJob(120, 1, jobFailed, 130), schedJob(180, 1, jobSucceeded, 190),
				schedJob(240, 1, jobFailed, 250), schedJob(300, 1, jobSucceeded, 310), schedJob(360, 1, jobSucceeded, 370),
			},
			now:  at(400),
			want: want{prune: []string{"t-1767225720", "t-1767225660"}},
		},
		{
			name: "schedule: the newest Job is kept even with limit 0",
			task: newTask(scheduled(v1.AllowConcurrent), func(t *v1.Task) {
				t.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](0)
				t.Spec.FailedJobsHistoryLimit = ptr.To[int32](0)
			}),
			jobs: []observedJob{schedJob(60, 1, jobFailed, 70), schedJob(120, 1, jobSucceeded, 130)},
			now:  at(150),
			want: want{prune: []string{"t-1767225660"}},
		},
	}
	names := func(jobs []observedJob) []string {
		var out []string
		for _, j := range jobs {
			out = append(out, j.Name)
		}
		return out
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := analyze(tc.task, tc.jobs, tc.now)
			p := planRuns(tc.task, a, tc.jobs, tc.now)
			if diff := cmp.Diff(tc.want.create, p.create); diff != "" {
				t.Errorf("create (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want.replace, names(p.replace)); diff != "" {
				t.Errorf("replace (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want.suspend, names(p.suspend)); diff != "" {
				t.Errorf("suspend (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want.prune, names(p.prune)); diff != "" {
				t.Errorf("prune (-want +got):\n%s", diff)
			}
			if p.missed != tc.want.missed {
				t.Errorf("missed = %d, want %d", p.missed, tc.want.missed)
			}
			if !p.scheduled.Equal(tc.want.scheduled) {
				t.Errorf("scheduled = %v, want %v", p.scheduled, tc.want.scheduled)
			}
			if !strings.Contains(p.missedReason, tc.want.reason) || (tc.want.reason == "" && p.missedReason != "") {
				t.Errorf("missedReason = %q, want it to contain %q", p.missedReason, tc.want.reason)
			}
		})
	}
}

// TestPlanThenStatus walks a one-shot Task through fail, retry, succeed, executing each plan
// the way the reconciler does, and checks the status at each step.
func TestPlanThenStatus(t *testing.T) {
	task := newTask()
	var jobs []observedJob
	step := func(now time.Time) *runID {
		a := analyze(task, jobs, now)
		p := planRuns(task, a, jobs, now)
		if p.create != nil {
			jobs = append(jobs, observedJob{Name: jobName(task.Name, *p.create), Run: *p.create, Created: now, State: jobActive})
		}
		task.Status = roundTrip(t, computeStatus(task, jobs, now))
		return p.create
	}
	if run := step(at(1)); run == nil || run.Attempt != 1 {
		t.Fatalf("first step created %+v, want attempt 1", run)
	}
	if task.Status.Phase != v1.PhaseRunning || task.Status.Attempts != 1 {
		t.Fatalf("after start: %s attempts %d", task.Status.Phase, task.Status.Attempts)
	}
	jobs[0].State, jobs[0].Finished, jobs[0].Reason = jobFailed, at(5), "BackoffLimitExceeded"
	if run := step(at(5)); run != nil {
		t.Fatalf("retried before the backoff: %+v", run)
	}
	if task.Status.Phase != v1.PhaseRetrying || !task.Status.NextRunTime.Time.Equal(at(6)) {
		t.Fatalf("after failure: %s next %v", task.Status.Phase, task.Status.NextRunTime)
	}
	if run := step(at(6)); run == nil || run.Attempt != 2 {
		t.Fatalf("retry created %+v, want attempt 2", run)
	}
	if task.Status.Phase != v1.PhaseRunning || task.Status.Attempts != 2 || task.Status.LastError == "" {
		t.Fatalf("after retry: %s attempts %d lastError %q", task.Status.Phase, task.Status.Attempts, task.Status.LastError)
	}
	jobs[1].State, jobs[1].Finished = jobSucceeded, at(9)
	if run := step(at(9)); run != nil {
		t.Fatalf("created %+v after success", run)
	}
	if task.Status.Phase != v1.PhaseSucceeded || task.Status.LastError != "" || task.Status.NextRunTime != nil {
		t.Fatalf("after success: %+v", task.Status)
	}
	// The Jobs go (TTL); the Task stays succeeded and plans nothing.
	jobs = nil
	if run := step(at(100)); run != nil || task.Status.Phase != v1.PhaseSucceeded {
		t.Fatalf("after TTL: created %+v, phase %s", run, task.Status.Phase)
	}
}
