package reconciler

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "example.com/task-operator/apis/v1"
)

func TestPlanRuns(t *testing.T) {
	type want struct {
		create    *runID
		replace   []string
		suspend   []string
		prune     []string
		release   []string
		protect   []string
		missed    int32
		scheduled time.Time
	}
	j1 := jobName("t", runID{Attempt: 1})
	s60 := jobName("t", runID{Scheduled: at(60), Attempt: 1})
	suspendedJob := func(j observedJob) observedJob { j.Suspended = true; return j }
	released := func(j observedJob) observedJob { j.Protected = false; return j }
	legacy := func(j observedJob) observedJob { j.Protected, j.Name = false, "t-1"; return j }
	deleting := func(j observedJob) observedJob { j.Deleting = true; return j }
	slowBackoff := func(t *v1.Task) {
		t.Spec.Retry.Backoff.Initial = dur(2 * time.Minute)
		t.Spec.Retry.Backoff.Max = dur(time.Hour)
	}
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
		{
			name: "third attempt after the second backoff",
			task: newTask(withStatus(v1.TaskStatus{Attempts: 1, CurrentRun: run(0, 1, v1.RunFailed, 150)})),
			jobs: []observedJob{oneShotJob(1, jobFailed, 150), oneShotJob(2, jobFailed, 250)}, now: at(252),
			want: want{create: &runID{Attempt: 3}, release: []string{j1}},
		},
		{
			name: "retry due although every Job is gone",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseRetrying, Attempts: 2, CurrentRun: retrying(0, 2, 250, 252)})),
			now:  at(252), want: want{create: &runID{Attempt: 3}},
		},
		{name: "exhausted: nothing", task: newTask(maxRetries(0)), jobs: []observedJob{oneShotJob(1, jobFailed, 150)}, now: at(999)},
		{name: "succeeded: nothing", task: newTask(), jobs: []observedJob{oneShotJob(1, jobSucceeded, 150)}, now: at(999)},
		{
			// Issue #14 item 1: TTL 0 deleted the succeeded Job while the operator was away.
			name: "succeeded and deleted by its TTL before the status knew: nothing runs again",
			task: newTask(maxRetries(0), withStatus(v1.TaskStatus{Phase: v1.PhaseRunning, Attempts: 1, ActiveJobs: []v1.JobReference{*ref(j1)}, CurrentRun: run(0, 1, v1.RunActive, 0)})),
			jobs: []observedJob{deleting(oneShotJob(1, jobSucceeded, 150))}, now: at(999),
		},
		{
			name: "recorded success: the Job's finalizer goes",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseSucceeded, Attempts: 1, CurrentRun: run(0, 1, v1.RunSucceeded, 150)})),
			jobs: []observedJob{deleting(oneShotJob(1, jobSucceeded, 150))}, now: at(999),
			want: want{release: []string{j1}},
		},
		{
			name: "success not recorded yet: the finalizer stays",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseRunning, Attempts: 1, ActiveJobs: []v1.JobReference{*ref(j1)}, CurrentRun: run(0, 1, v1.RunActive, 0)})),
			jobs: []observedJob{oneShotJob(1, jobSucceeded, 150)}, now: at(999),
		},
		{
			name: "a Job the status still lists as active keeps its finalizer",
			task: newTask(withStatus(v1.TaskStatus{Attempts: 2, ActiveJobs: []v1.JobReference{*ref(j1)}, CurrentRun: run(0, 2, v1.RunActive, 0)})),
			jobs: []observedJob{oneShotJob(1, jobFailed, 150), oneShotJob(2, jobActive, 0)}, now: at(999),
		},
		{
			name: "a Job newer than the record keeps its finalizer",
			task: newTask(withStatus(v1.TaskStatus{Attempts: 1, CurrentRun: run(0, 1, v1.RunFailed, 150)})),
			jobs: []observedJob{oneShotJob(2, jobFailed, 250)}, now: at(251),
		},
		{
			name: "a deleted active Job is released once its failure is recorded",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseRetrying, Attempts: 1, CurrentRun: run(0, 1, v1.RunFailed, 140)})),
			jobs: []observedJob{deleting(oneShotJob(1, jobActive, 0))}, now: at(140),
			want: want{release: []string{j1}},
		},
		{
			name: "a running Job of an earlier release gets the finalizer",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseRunning, Attempts: 1, LastJob: ref("t-1"), ActiveJobs: []v1.JobReference{*ref("t-1")}})),
			jobs: []observedJob{legacy(oneShotJob(1, jobActive, 0))}, now: at(150),
			want: want{protect: []string{"t-1"}},
		},
		{name: "suspended before start: nothing", task: newTask(suspended), now: at(1)},
		{name: "suspend a running Job", task: newTask(suspended), jobs: []observedJob{oneShotJob(1, jobActive, 0)}, now: at(150), want: want{suspend: []string{j1}}},
		{name: "suspended retry stays pending", task: newTask(suspended), jobs: []observedJob{oneShotJob(1, jobFailed, 150)}, now: at(999)},
		{name: "resume a suspended Job", task: newTask(), jobs: []observedJob{suspendedJob(oneShotJob(1, jobActive, 0))}, now: at(150), want: want{suspend: []string{j1}}},
		{name: "already suspended: nothing", task: newTask(suspended), jobs: []observedJob{suspendedJob(oneShotJob(1, jobActive, 0))}, now: at(150)},
		{
			name: "one-shot failed history limit",
			task: newTask(maxRetries(5), func(t *v1.Task) { t.Spec.FailedJobsHistoryLimit = ptr.To[int32](1) }),
			jobs: []observedJob{released(oneShotJob(1, jobFailed, 150)), released(oneShotJob(2, jobFailed, 250)), oneShotJob(3, jobActive, 0)},
			now:  at(300),
			want: want{prune: []string{j1}},
		},
		{
			name: "a Job whose outcome is not recorded is not pruned",
			task: newTask(maxRetries(5), func(t *v1.Task) { t.Spec.FailedJobsHistoryLimit = ptr.To[int32](0) }),
			jobs: []observedJob{oneShotJob(1, jobFailed, 150), oneShotJob(2, jobActive, 0)},
			now:  at(300),
		},
		{name: "one-shot keeps all Jobs by default", task: newTask(), jobs: []observedJob{released(oneShotJob(1, jobFailed, 150)), released(oneShotJob(2, jobFailed, 250)), oneShotJob(3, jobActive, 0)}, now: at(300)},
		{name: "schedule: nothing due", task: newTask(scheduled(v1.AllowConcurrent)), now: at(59)},
		{
			name: "schedule: first time due",
			task: newTask(scheduled(v1.AllowConcurrent)), now: at(61),
			want: want{create: &runID{Scheduled: at(60), Attempt: 1}, scheduled: at(60)},
		},
		{
			name: "schedule: operator was away, latest of three starts",
			task: newTask(scheduled(v1.AllowConcurrent)), now: at(185),
			want: want{create: &runID{Scheduled: at(180), Attempt: 1}, scheduled: at(180), missed: 2},
		},
		{
			name: "schedule: a month away is one start, with the missed times counted in one pass",
			task: newTask(scheduled(v1.AllowConcurrent)), now: at(30*24*3600 + 5),
			want: want{create: &runID{Scheduled: at(30 * 24 * 3600), Attempt: 1}, scheduled: at(30 * 24 * 3600), missed: 30*24*60 - 1},
		},
		{
			name: "schedule: Forbid holds a due time back while a run is active",
			task: newTask(scheduled(v1.ForbidConcurrent)),
			jobs: []observedJob{schedJob(60, 1, jobActive, 0)}, now: at(121),
		},
		{
			// Issue #14 item 8: Forbid does not consume the time; the run starts when the active
			// one ends.
			name: "schedule: Forbid starts the held-back time once the active run ended",
			task: newTask(scheduled(v1.ForbidConcurrent), withStatus(v1.TaskStatus{ObservedGeneration: 1, LastScheduleTime: mtime(60),
				CurrentRun: run(60, 1, v1.RunSucceeded, 150), ObservedSchedule: &v1.ObservedSchedule{Cron: "* * * * *", Since: *mtime(0)}})),
			jobs: []observedJob{released(schedJob(60, 1, jobSucceeded, 150))}, now: at(150),
			want: want{create: &runID{Scheduled: at(120), Attempt: 1}, scheduled: at(120)},
		},
		{
			name: "schedule: Forbid, held back past the starting deadline: lost",
			task: newTask(scheduled(v1.ForbidConcurrent), deadline(20)),
			jobs: []observedJob{released(schedJob(60, 1, jobSucceeded, 150))}, now: at(150),
		},
		{
			name: "schedule: Forbid runs when nothing is active",
			task: newTask(scheduled(v1.ForbidConcurrent)),
			jobs: []observedJob{released(schedJob(60, 1, jobSucceeded, 70))}, now: at(121),
			want: want{create: &runID{Scheduled: at(120), Attempt: 1}, scheduled: at(120)},
		},
		{
			name: "schedule: Replace deletes the active run",
			task: newTask(scheduled(v1.ReplaceConcurrent)),
			jobs: []observedJob{schedJob(60, 1, jobActive, 0)}, now: at(121),
			want: want{create: &runID{Scheduled: at(120), Attempt: 1}, scheduled: at(120), replace: []string{s60}},
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
		},
		{
			name: "schedule: the time after a lost one starts, and counts it missed",
			task: newTask(scheduled(v1.AllowConcurrent), deadline(10)), now: at(125),
			want: want{create: &runID{Scheduled: at(120), Attempt: 1}, scheduled: at(120), missed: 1},
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
			task: newTask(scheduled(v1.AllowConcurrent), slowBackoff),
			jobs: []observedJob{schedJob(60, 1, jobFailed, 70)}, now: at(121),
			want: want{create: &runID{Scheduled: at(120), Attempt: 1}, scheduled: at(120)},
		},
		{
			name: "schedule added to an old Task: nothing runs before the next time",
			task: newTask(scheduled(v1.AllowConcurrent), withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseSucceeded, Attempts: 1, CurrentRun: run(0, 1, v1.RunSucceeded, 150)})),
			now:  at(30*24*3600 + 30),
		},
		{
			name: "schedule added to an old Task: the first time after it starts, nothing missed",
			task: newTask(scheduled(v1.AllowConcurrent), withStatus(v1.TaskStatus{ObservedGeneration: 2, Phase: v1.PhaseScheduled, Attempts: 1, CurrentRun: run(0, 1, v1.RunSucceeded, 150),
				ObservedSchedule: &v1.ObservedSchedule{Cron: "* * * * *", Since: *mtime(30*24*3600 + 30)}})),
			now:  at(30*24*3600 + 61),
			want: want{create: &runID{Scheduled: at(30*24*3600 + 60), Attempt: 1}, scheduled: at(30*24*3600 + 60)},
		},
		{
			name: "schedule removed before it ever ran: runs once",
			task: newTask(withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseScheduled})),
			now:  at(500),
			want: want{create: &runID{Attempt: 1}},
		},
		{
			name: "schedule removed while its run is active: no new run",
			task: newTask(withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseRunning, Attempts: 1, ActiveJobs: []v1.JobReference{*ref(s60)},
				CurrentRun: run(60, 1, v1.RunActive, 0), LastScheduleTime: mtime(60)})),
			jobs: []observedJob{schedJob(60, 1, jobActive, 0)}, now: at(500),
		},
		{
			name: "schedule removed with a retry due: the retry of that run",
			task: newTask(withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseRetrying, Attempts: 1, CurrentRun: retrying(60, 1, 70, 71), LastScheduleTime: mtime(60)})),
			now:  at(500),
			want: want{create: &runID{Scheduled: at(60), Attempt: 2}},
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
				released(schedJob(60, 1, jobSucceeded, 70)), released(schedJob(120, 1, jobFailed, 130)), released(schedJob(180, 1, jobSucceeded, 190)),
				released(schedJob(240, 1, jobFailed, 250)), released(schedJob(300, 1, jobSucceeded, 310)), released(schedJob(360, 1, jobSucceeded, 370)),
			},
			now:  at(400),
			want: want{prune: []string{jobName("t", runID{Scheduled: at(120), Attempt: 1}), s60}},
		},
		{
			name: "schedule: the current Job is kept even with limit 0",
			task: newTask(scheduled(v1.AllowConcurrent), func(t *v1.Task) {
				t.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](0)
				t.Spec.FailedJobsHistoryLimit = ptr.To[int32](0)
			}),
			jobs: []observedJob{released(schedJob(60, 1, jobFailed, 70)), released(schedJob(120, 1, jobSucceeded, 130))},
			now:  at(150),
			want: want{prune: []string{s60}},
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
			for _, c := range []struct {
				what      string
				want, got []string
			}{
				{"replace", tc.want.replace, names(p.replace)},
				{"suspend", tc.want.suspend, names(p.suspend)},
				{"prune", tc.want.prune, names(p.prune)},
				{"release", tc.want.release, names(p.release)},
				{"protect", tc.want.protect, names(p.protect)},
			} {
				if diff := cmp.Diff(c.want, c.got); diff != "" {
					t.Errorf("%s (-want +got):\n%s", c.what, diff)
				}
			}
			if p.missed != tc.want.missed {
				t.Errorf("missed = %d, want %d", p.missed, tc.want.missed)
			}
			if !p.scheduled.Equal(tc.want.scheduled) {
				t.Errorf("scheduled = %v, want %v", p.scheduled, tc.want.scheduled)
			}
		})
	}
}

func TestMissedEvent(t *testing.T) {
	for _, tc := range []struct {
		missed int32
		want   string
	}{{0, ""}, {1, v1.EventMissedRun}, {100, v1.EventMissedRun}, {101, v1.EventTooManyMissedTimes}, {719, v1.EventTooManyMissedTimes}} {
		ev, ok := plan{missed: tc.missed, scheduled: at(60), base: at(0)}.missedEvent()
		if ok != (tc.want != "") || ev.Reason != tc.want {
			t.Errorf("missed %d: event %q (%v), want %q", tc.missed, ev.Reason, ok, tc.want)
		}
		if ok && ev.Type != "Warning" {
			t.Errorf("missed %d: a %s event, want a Warning", tc.missed, ev.Type)
		}
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

// TestRetryCancelledByMaxRetriesStaysCancelled: a one-shot Task's attempt 1 failed and a retry
// is pending; maxRetries lowered to 0 fails the Task for good, and raising it again later runs
// nothing: a recorded outcome is final.
func TestRetryCancelledByMaxRetriesStaysCancelled(t *testing.T) {
	task := newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseRetrying, Attempts: 1, CurrentRun: retrying(0, 1, 150, 151)}))
	jobs := []observedJob{oneShotJob(1, jobFailed, 150)}
	step := func(now time.Time) *runID {
		p := planRuns(task, analyze(task, jobs, now), jobs, now)
		task.Status = roundTrip(t, computeStatus(task, jobs, now))
		return p.create
	}
	task.Spec.Retry.MaxRetries = 0
	if run := step(at(151)); run != nil || task.Status.Phase != v1.PhaseFailed {
		t.Fatalf("maxRetries 0: created %+v, phase %s; want nothing, Failed", run, task.Status.Phase)
	}
	if rt := task.Status.CurrentRun.RetryTime; rt != nil {
		t.Errorf("a cancelled retry is still recorded as due at %v", rt)
	}
	task.Spec.Retry.MaxRetries = 2
	for _, now := range []time.Time{at(152), at(1000)} {
		if run := step(now); run != nil || task.Status.Phase != v1.PhaseFailed {
			t.Fatalf("maxRetries raised to 2 at %v: created %+v, phase %s; want nothing, Failed", now, run, task.Status.Phase)
		}
	}
}

// TestReplacedRunWithoutSuccessor is the chaos test's cron-089 (issue #14): policy Replace
// deleted the active Job of the run for 60s, and the Job of the run for 120s was never created
// (the operator was killed in between, or the create failed). With the schedule in force the
// next reconcile starts the run for 120s, which supersedes the replaced run; once the schedule is
// removed first, the replaced run is the Task's only run and was cut short, not finished: it
// goes on with its retries, as an attempt deleted before it finished does, rather than ending
// Failed after one attempt with retries left.
func TestReplacedRunWithoutSuccessor(t *testing.T) {
	for _, storedBetween := range []bool{false, true} {
		for _, removed := range []bool{false, true} {
			t.Run(fmt.Sprintf("status stored after the Replace %v, schedule removed %v", storedBetween, removed), func(t *testing.T) {
				task := newTask(scheduled(v1.ReplaceConcurrent))
				var jobs []observedJob
				step := func(now time.Time) *runID {
					a := analyze(task, jobs, now)
					p := planRuns(task, a, jobs, now)
					if p.create != nil {
						jobs = append(jobs, observedJob{Name: jobName(task.Name, *p.create), Run: *p.create, Created: now, State: jobActive, Protected: true})
					}
					task.Status = roundTrip(t, computeStatus(task, jobs, now))
					return p.create
				}
				if run := step(at(60)); run == nil || !run.Scheduled.Equal(at(60)) {
					t.Fatalf("at 60 created %+v, want the run for 60s", run)
				}
				// At 120 Replace deletes the run for 60s; its successor's Job is never created.
				p := planRuns(task, analyze(task, jobs, at(120)), jobs, at(120))
				if p.create == nil || !p.create.Scheduled.Equal(at(120)) || len(p.replace) != 1 {
					t.Fatalf("at 120 planned create %+v, replace %v; want the run for 120s replacing the one for 60s", p.create, p.replace)
				}
				jobs[0].Deleting, jobs[0].Replaced, jobs[0].Finished = true, true, at(120)
				if storedBetween { // the create failed with an error: the status is still written
					task.Status = roundTrip(t, computeStatus(task, jobs, at(120)))
				}
				if removed {
					task.Spec.Schedule = nil
				}
				run := step(at(121))
				if !removed {
					if run == nil || !run.Scheduled.Equal(at(120)) || run.Attempt != 1 {
						t.Fatalf("with the schedule in force, created %+v; want the run for 120s", run)
					}
					return
				}
				if run == nil || !run.Scheduled.Equal(at(60)) || run.Attempt != 2 {
					t.Fatalf("schedule removed: created %+v, status %s attempts %d (%s); want attempt 2 of the run for 60s",
						run, task.Status.Phase, task.Status.Attempts, task.Status.LastError)
				}
				jobs[1].State, jobs[1].Finished = jobSucceeded, at(125)
				if run := step(at(125)); run != nil || task.Status.Phase != v1.PhaseSucceeded || task.Status.Attempts != 2 {
					t.Fatalf("after the retry succeeded: created %+v, %s attempts %d", run, task.Status.Phase, task.Status.Attempts)
				}
			})
		}
	}
}

// TestSupersededRunFailureIsReported: with policy Allow the run for 60s is still active when the
// run for 120s starts and becomes the current record; when the earlier run then fails, its
// failure reaches lastError and the Failed condition, and its Job keeps its finalizer until the
// stored status tells it.
func TestSupersededRunFailureIsReported(t *testing.T) {
	task := newTask(scheduled(v1.AllowConcurrent))
	early, late := schedJob(60, 1, jobActive, 0), schedJob(120, 1, jobActive, 0)
	jobs := []observedJob{early, late}
	task.Status = roundTrip(t, computeStatus(task, jobs, at(125)))
	if task.Status.CurrentRun == nil || !task.Status.CurrentRun.ScheduledTime.Equal(mtime(120)) {
		t.Fatalf("current run %+v, want the run for 120s", task.Status.CurrentRun)
	}

	jobs[0].State, jobs[0].Finished, jobs[0].Reason = jobFailed, at(130), "BackoffLimitExceeded"
	p := planRuns(task, analyze(task, jobs, at(130)), jobs, at(130))
	if names := jobNames(p.release); len(names) != 0 {
		t.Errorf("released %v before the status told the failure", names)
	}
	st := computeStatus(task, jobs, at(130))
	if want := jobs[0].failure(); st.LastError != want {
		t.Errorf("lastError = %q, want %q", st.LastError, want)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionFailed); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Failed condition = %+v, want True", c)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Ready condition = %+v, want False", c)
	}

	task.Status = roundTrip(t, st)
	if names := jobNames(releasable(task, jobs, at(131))); !slices.Equal(names, []string{early.Name}) {
		t.Errorf("once stored, releasable = %v, want %s", names, early.Name)
	}
	jobs[0].Protected = false
	st = computeStatus(task, jobs, at(131))
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionFailed); st.LastError == "" || c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("after release: lastError %q, Failed %+v; want both kept", st.LastError, c)
	}

	jobs[1].State, jobs[1].Finished = jobSucceeded, at(140)
	st = computeStatus(task, jobs, at(140))
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionFailed); st.LastError != "" || c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("after the later run succeeded: lastError %q, Failed %+v; want cleared", st.LastError, c)
	}
}

// TestSupersededFailureAfterTheLatestSuccessStaysReported: with policy Allow the run for 120s
// succeeds at 130s while the run for 60s still runs; that run fails at 140s. Its failure is the
// newest outcome: lastError and the Failed condition tell it once stored, after its Job is
// released (nothing but the stored status tells it then), and while the next run is active;
// the next run's success clears them.
func TestSupersededFailureAfterTheLatestSuccessStaysReported(t *testing.T) {
	task := newTask(scheduled(v1.AllowConcurrent), maxRetries(0))
	jobs := []observedJob{schedJob(60, 1, jobActive, 0), schedJob(120, 1, jobSucceeded, 130)}
	task.Status = roundTrip(t, computeStatus(task, jobs, at(130)))
	if task.Status.CurrentRun == nil || task.Status.CurrentRun.Outcome != v1.RunSucceeded {
		t.Fatalf("current run %+v, want the run for 120s succeeded", task.Status.CurrentRun)
	}
	jobs[0].State, jobs[0].Finished, jobs[0].Reason = jobFailed, at(140), "BackoffLimitExceeded"
	failure := jobs[0].failure()
	reported := func(when string, st v1.TaskStatus, wantError string, want metav1.ConditionStatus) {
		t.Helper()
		c := meta.FindStatusCondition(st.Conditions, v1.ConditionFailed)
		if st.LastError != wantError || c == nil || c.Status != want {
			t.Errorf("%s: lastError %q, Failed %+v; want %q and %s", when, st.LastError, c, wantError, want)
		}
	}
	task.Status = roundTrip(t, computeStatus(task, jobs, at(141)))
	reported("told while its Job is held", task.Status, failure, metav1.ConditionTrue)

	jobs[0].Protected = false // released once stored
	task.Status = roundTrip(t, computeStatus(task, jobs, at(142)))
	reported("after its Job's release", task.Status, failure, metav1.ConditionTrue)
	if c := meta.FindStatusCondition(task.Status.Conditions, v1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("after its Job's release: Ready %+v, want False", c)
	}
	jobs = jobs[1:] // and deleted by the history limits
	task.Status = roundTrip(t, computeStatus(task, jobs, at(150)))
	reported("after its Job is gone", task.Status, failure, metav1.ConditionTrue)

	jobs = append(jobs, schedJob(180, 1, jobActive, 0))
	task.Status = roundTrip(t, computeStatus(task, jobs, at(181)))
	reported("while the next run is active", task.Status, failure, metav1.ConditionTrue)

	jobs[1].State, jobs[1].Finished = jobSucceeded, at(190)
	task.Status = roundTrip(t, computeStatus(task, jobs, at(191)))
	reported("after the next run succeeded", task.Status, "", metav1.ConditionFalse)
}

func jobNames(jobs []observedJob) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.Name)
	}
	return out
}

// TestSupersededFailureOlderThanTheLatestOutcomeIsNotReported: with policy Allow the run for
// 60s fails at 130s while the run for 120s (the current record) is still active; the operator
// is away and, when it comes back, the run for 120s has also ended (succeeded at 140s, or failed
// at 140s with its retry running) and a newer Job is active. The latest finished attempt is the
// one of 140s: lastError and the Failed condition must tell it, not the older failure of 130s
// that no one saw yet.
func TestSupersededFailureOlderThanTheLatestOutcomeIsNotReported(t *testing.T) {
	early := schedJob(60, 1, jobFailed, 130)
	lateFailed := schedJob(120, 1, jobFailed, 140)
	lateFailed.Reason, lateFailed.Message = "DeadlineExceeded", "Job was active longer than specified deadline"
	for _, tc := range []struct {
		name          string
		jobs          []observedJob
		wantLastError string
		wantFailed    metav1.ConditionStatus
	}{{
		name:       "the later run succeeded and the next one runs",
		jobs:       []observedJob{early, schedJob(120, 1, jobSucceeded, 140), schedJob(180, 1, jobActive, 0)},
		wantFailed: metav1.ConditionFalse,
	}, {
		name:          "the later run failed and its retry runs",
		jobs:          []observedJob{early, lateFailed, schedJob(120, 2, jobActive, 0)},
		wantLastError: lateFailed.failure(),
		wantFailed:    metav1.ConditionTrue,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			task := newTask(scheduled(v1.AllowConcurrent), withStatus(v1.TaskStatus{
				Phase: v1.PhaseRunning, Attempts: 1, LastScheduleTime: mtime(120),
				CurrentRun: run(120, 1, v1.RunActive, 0),
				ActiveJobs: []v1.JobReference{*ref(early.Name), *ref(jobName("t", runID{Scheduled: at(120), Attempt: 1}))},
			}))
			now := at(185)
			st := computeStatus(task, tc.jobs, now)
			if st.LastError != tc.wantLastError {
				t.Errorf("lastError = %q, want %q (the latest finished attempt's)", st.LastError, tc.wantLastError)
			}
			if c := meta.FindStatusCondition(st.Conditions, v1.ConditionFailed); c == nil || c.Status != tc.wantFailed {
				t.Errorf("Failed condition = %+v, want %s", c, tc.wantFailed)
			}
		})
	}
}

// TestOnlyJobsWaitingForAdmissionMoveToTheTasksQueue: a Job waiting in a LocalQueue the Task no
// longer names moves to the one it names; an admitted Job, one already there, one of a Task
// that names no queue now (its Jobs stay Kueue's), and a Job not waiting stay where they are.
func TestOnlyJobsWaitingForAdmissionMoveToTheTasksQueue(t *testing.T) {
	waiting := observedJob{Name: "t-0-1", Queue: "old", Suspended: true, State: jobActive}
	admitted := waiting
	admitted.Admitted = at(10)
	running := waiting
	running.Suspended = false
	for _, tc := range []struct {
		name  string
		queue string
		job   observedJob
		moved bool
	}{
		{"waiting in another queue", "new", waiting, true},
		{"waiting in the Task's queue", "old", waiting, false},
		{"admitted in another queue", "new", admitted, false},
		{"running", "new", running, false},
		{"the Task names no queue now", "", waiting, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := newTask(func(t *v1.Task) { t.Spec.QueueName = tc.queue })
			if moved := len(queueMoves(task, []observedJob{tc.job})) == 1; moved != tc.moved {
				t.Errorf("moved %v, want %v", moved, tc.moved)
			}
		})
	}
}

// failureToldAfterSuccess is a scheduled Task (policy Allow) whose run for 120s succeeded at
// 130s and whose run for 60s then failed at 140s, that failure told, its Job released and
// pruned: only the stored status tells the failure now.
func failureToldAfterSuccess(t *testing.T) (*v1.Task, []observedJob) {
	t.Helper()
	task := newTask(scheduled(v1.AllowConcurrent), maxRetries(0))
	jobs := []observedJob{schedJob(60, 1, jobActive, 0), schedJob(120, 1, jobSucceeded, 130)}
	task.Status = roundTrip(t, computeStatus(task, jobs, at(130)))
	jobs[0].State, jobs[0].Finished, jobs[0].Reason = jobFailed, at(140), "BackoffLimitExceeded"
	task.Status = roundTrip(t, computeStatus(task, jobs, at(141)))
	jobs[0].Protected = false
	task.Status = roundTrip(t, computeStatus(task, jobs, at(142)))
	jobs = jobs[1:]
	task.Status = roundTrip(t, computeStatus(task, jobs, at(150)))
	if task.Status.LastError == "" || !conditionTrue(task.Status.Conditions, v1.ConditionFailed) {
		t.Fatalf("the failure is not told: lastError %q, conditions %+v", task.Status.LastError, task.Status.Conditions)
	}
	return task, jobs
}

// TestAFailureToldAfterTheLatestSuccessOutlivesAnInvalidSchedule: a spell with a schedule that
// does not parse rewrites the conditions; once it parses again they tell the failure the
// stored lastError still holds (Failed, not Ready), not the success before it.
func TestAFailureToldAfterTheLatestSuccessOutlivesAnInvalidSchedule(t *testing.T) {
	task, jobs := failureToldAfterSuccess(t)
	told := task.Status.LastError
	task.Spec.Schedule.Cron = "not a cron"
	task.Generation++
	task.Status = roundTrip(t, computeStatus(task, jobs, at(151)))
	task.Spec.Schedule.Cron = "* * * * *"
	task.Generation++
	task.Status = roundTrip(t, computeStatus(task, jobs, at(152)))
	st := task.Status
	if st.LastError != told || !conditionTrue(st.Conditions, v1.ConditionFailed) || conditionTrue(st.Conditions, v1.ConditionReady) {
		t.Errorf("after the schedule parses again: lastError %q, conditions %+v; want %q, Failed and not Ready", st.LastError, st.Conditions, told)
	}
}

// TestAnEarlierRunsFailureGoesWhenTheScheduleIsRemoved: without a schedule the current record
// is the Task's only run, and it succeeded: an earlier run's failure is no longer its outcome,
// and lastError does not contradict the conditions.
func TestAnEarlierRunsFailureGoesWhenTheScheduleIsRemoved(t *testing.T) {
	task, jobs := failureToldAfterSuccess(t)
	task.Spec.Schedule = nil
	task.Generation++
	for _, s := range []int{160, 3600} {
		task.Status = roundTrip(t, computeStatus(task, jobs, at(s)))
	}
	if st := task.Status; st.Phase != v1.PhaseSucceeded || st.LastError != "" || conditionTrue(st.Conditions, v1.ConditionFailed) {
		t.Errorf("without the schedule: phase %s lastError %q conditions %+v; want Succeeded, no lastError, not Failed", st.Phase, st.LastError, st.Conditions)
	}
}

// TestALastErrorNamingNoEarlierRunIsClearedOnASucceededTask: a lastError written by hand (with
// tasks/status rights) on a Task whose run succeeded tells no later failure, nor does one naming
// an earlier attempt of that same run (it failed before the success): the next status clears
// it, for a one-shot and a scheduled Task alike.
func TestALastErrorNamingNoEarlierRunIsClearedOnASucceededTask(t *testing.T) {
	for _, tc := range []struct {
		name string
		task *v1.Task
		job  observedJob
	}{
		{"one-shot", newTask(), oneShotJob(2, jobActive, 0)},
		{"scheduled", newTask(scheduled(v1.ForbidConcurrent)), schedJob(60, 2, jobActive, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task, jobs := tc.task, []observedJob{tc.job}
			task.Status = roundTrip(t, computeStatus(task, jobs, at(60)))
			jobs[0].State, jobs[0].Finished = jobSucceeded, at(70)
			task.Status = roundTrip(t, computeStatus(task, jobs, at(71)))
			earlier := jobs[0]
			earlier.Run.Attempt--
			earlier.Name = jobName("t", earlier.Run)
			for _, hand := range []string{"written by hand", "Job someone-else-0-1 failed: X", "Job " + jobs[0].Name + " failed: X", "Job " + earlier.Name + " failed: X"} {
				task.Status.LastError = hand
				task.Status = roundTrip(t, computeStatus(task, jobs, at(72)))
				if st := task.Status; st.LastError != "" || conditionTrue(st.Conditions, v1.ConditionFailed) {
					t.Errorf("after lastError %q by hand: lastError %q, Failed %v; want it cleared", hand, st.LastError, conditionTrue(st.Conditions, v1.ConditionFailed))
				}
			}
		})
	}
}
