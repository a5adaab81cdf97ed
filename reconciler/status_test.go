package reconciler

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "example.com/task-operator/apis/v1"
)

// wantStatus lists the fields a case checks; conditions are "Status/Reason" by type.
type wantStatus struct {
	phase        v1.Phase
	attempts     int32
	active       []string
	lastJob      string
	nextRun      *metav1.Time
	completion   *metav1.Time
	lastSchedule *metav1.Time
	lastError    string // substring
	conditions   map[string]string
	missed       int32
	startTime    *metav1.Time
	// run, when set, is the record currentRun must hold.
	run *v1.RunRecord
	// since, when set, is when observedSchedule says the schedule applies from.
	since *metav1.Time
	// progress is a substring of the Progressing condition's message.
	progress string
}

func TestComputeStatus(t *testing.T) {
	j1 := jobName("t", runID{Attempt: 1})
	j2 := jobName("t", runID{Attempt: 2})
	j3 := jobName("t", runID{Attempt: 3})
	s60 := jobName("t", runID{Scheduled: at(60), Attempt: 1})
	s120 := jobName("t", runID{Scheduled: at(120), Attempt: 1})
	oneShotConds := func(phase string) map[string]string {
		return map[string]string{
			"Ready": "False/" + phase, "Succeeded": "False/" + phase, "Failed": "False/" + phase,
			"Reconciling": "True/" + phase, "Stalled": "False/" + phase,
		}
	}
	deleting := func(j observedJob, at time.Time) observedJob {
		j.Deleting = true
		if j.State == jobActive {
			j.Finished = at
		}
		return j
	}
	tests := []struct {
		name string
		task *v1.Task
		jobs []observedJob
		now  int // default 1000
		want wantStatus
	}{
		{
			name: "new task waits for its first run",
			task: newTask(),
			want: wantStatus{phase: v1.PhasePending, conditions: map[string]string{
				"Ready": "False/Pending", "Progressing": "True/Pending", "Succeeded": "False/Pending", "Failed": "False/Pending",
				"Reconciling": "True/Pending", "Stalled": "False/Pending",
			}},
		},
		{
			name: "first attempt running",
			task: newTask(),
			jobs: []observedJob{oneShotJob(1, jobActive, 0)},
			want: wantStatus{phase: v1.PhaseRunning, attempts: 1, active: []string{j1}, lastJob: j1, startTime: mtime(100), run: run(0, 1, v1.RunActive, 0),
				conditions: map[string]string{"Ready": "False/Running", "Progressing": "True/JobActive", "Succeeded": "False/Running", "Failed": "False/Running", "Reconciling": "True/Running"}},
		},
		{
			name: "first attempt succeeded",
			task: newTask(),
			jobs: []observedJob{oneShotJob(1, jobSucceeded, 150)},
			want: wantStatus{phase: v1.PhaseSucceeded, attempts: 1, lastJob: j1, completion: mtime(150), startTime: mtime(100), run: run(0, 1, v1.RunSucceeded, 150),
				conditions: map[string]string{"Ready": "True/Succeeded", "Progressing": "False/Succeeded", "Succeeded": "True/RunSucceeded", "Failed": "False/Succeeded",
					"Reconciling": "False/Succeeded", "Stalled": "False/Succeeded"}},
		},
		{
			name: "first attempt failed: retry after the initial backoff",
			task: newTask(),
			jobs: []observedJob{oneShotJob(1, jobFailed, 150)},
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 1, lastJob: j1, nextRun: mtime(151), lastError: "failed with exit code 1", run: retrying(0, 1, 150, 151),
				conditions: oneShotConds("Retrying")},
		},
		{
			name: "second attempt failed: backoff doubles",
			task: newTask(withStatus(v1.TaskStatus{Attempts: 1, CurrentRun: run(0, 1, v1.RunFailed, 150), LastError: "Job t-0-1 failed"})),
			jobs: []observedJob{oneShotJob(1, jobFailed, 150), oneShotJob(2, jobFailed, 250)},
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 2, lastJob: j2, nextRun: mtime(252), lastError: "Job t-0-2 failed", run: retrying(0, 2, 250, 252)},
		},
		{
			name: "retries exhausted",
			task: newTask(withStatus(v1.TaskStatus{Attempts: 2, CurrentRun: run(0, 2, v1.RunFailed, 250)})),
			jobs: []observedJob{oneShotJob(1, jobFailed, 150), oneShotJob(2, jobFailed, 250), oneShotJob(3, jobFailed, 350)},
			want: wantStatus{phase: v1.PhaseFailed, attempts: 3, lastJob: j3, completion: mtime(350), lastError: "Job t-0-3 failed: PodFailurePolicy: Container task for pod default/t-0-3-x7k2p failed with exit code 1", run: run(0, 3, v1.RunFailed, 350),
				conditions: map[string]string{"Ready": "False/RetriesExhausted", "Progressing": "False/RetriesExhausted", "Succeeded": "False/RetriesExhausted", "Failed": "True/RetriesExhausted",
					"Reconciling": "False/RetriesExhausted", "Stalled": "True/RetriesExhausted"}},
		},
		{
			name: "no retries at all",
			task: newTask(maxRetries(0)),
			jobs: []observedJob{oneShotJob(1, jobFailed, 150)},
			want: wantStatus{phase: v1.PhaseFailed, attempts: 1, lastJob: j1, completion: mtime(150), lastError: "failed"},
		},
		{
			name: "success after a failure clears the error",
			task: newTask(withStatus(v1.TaskStatus{Attempts: 1, CurrentRun: run(0, 1, v1.RunFailed, 150), LastError: "Job t-0-1 failed"})),
			jobs: []observedJob{oneShotJob(1, jobFailed, 150), oneShotJob(2, jobSucceeded, 250)},
			want: wantStatus{phase: v1.PhaseSucceeded, attempts: 2, lastJob: j2, completion: mtime(250), startTime: mtime(100)},
		},
		{
			name: "timeout is a failed run",
			task: newTask(),
			jobs: []observedJob{func() observedJob {
				j := oneShotJob(1, jobFailed, 150)
				j.Reason, j.Message = "DeadlineExceeded", "Job was active longer than specified deadline"
				return j
			}()},
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 1, lastJob: j1, nextRun: mtime(151), lastError: "DeadlineExceeded: Job was active longer"},
		},
		{
			// Issue #14 item 1: the operator was away while the Job succeeded and its TTL of 0
			// deleted it. The finalizer kept it readable; the run succeeded, whatever maxRetries.
			name: "succeeded Job deleted by its TTL while the status still says Running",
			task: newTask(maxRetries(0), withStatus(v1.TaskStatus{Phase: v1.PhaseRunning, Attempts: 1, LastJob: ref(j1),
				ActiveJobs: []v1.JobReference{*ref(j1)}, CurrentRun: run(0, 1, v1.RunActive, 0)})),
			jobs: []observedJob{deleting(oneShotJob(1, jobSucceeded, 150), at(151))},
			want: wantStatus{phase: v1.PhaseSucceeded, attempts: 1, lastJob: j1, completion: mtime(150), run: run(0, 1, v1.RunSucceeded, 150)},
		},
		{
			name: "succeeded Job removed by its TTL: the record remembers",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseSucceeded, Attempts: 1, LastJob: ref(j1), CompletionTime: mtime(150), StartTime: mtime(100),
				CurrentRun: run(0, 1, v1.RunSucceeded, 150)})),
			want: wantStatus{phase: v1.PhaseSucceeded, attempts: 1, lastJob: j1, completion: mtime(150), startTime: mtime(100)},
		},
		{
			name: "failed Job removed by its TTL while its retry is pending",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseRetrying, Attempts: 1, LastJob: ref(j1), NextRunTime: mtime(151), LastError: "Job t-0-1 failed",
				CurrentRun: retrying(0, 1, 150, 151)})),
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 1, lastJob: j1, nextRun: mtime(151), lastError: "Job t-0-1 failed"},
		},
		{
			name: "exhausted Task whose Jobs are gone stays failed",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseFailed, Attempts: 3, LastJob: ref(j3), CompletionTime: mtime(350), LastError: "Job t-0-3 failed",
				CurrentRun: run(0, 3, v1.RunFailed, 350)})),
			want: wantStatus{phase: v1.PhaseFailed, attempts: 3, lastJob: j3, completion: mtime(350), lastError: "Job t-0-3 failed"},
		},
		{
			name: "a failed Task stays failed when maxRetries is raised",
			task: newTask(maxRetries(5), withStatus(v1.TaskStatus{Phase: v1.PhaseFailed, Attempts: 1, LastJob: ref(j1), CompletionTime: mtime(150), LastError: "Job t-0-1 failed",
				CurrentRun: run(0, 1, v1.RunFailed, 150)})),
			want: wantStatus{phase: v1.PhaseFailed, attempts: 1, lastJob: j1, completion: mtime(150), lastError: "Job t-0-1 failed"},
		},
		{
			// Found by review: the retry decision is durable. A run that failed for good does not
			// come back when maxRetries is raised and a schedule is added.
			name: "a failed run stays failed when maxRetries is raised and a schedule added",
			task: newTask(maxRetries(5), scheduled(v1.AllowConcurrent), withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseScheduled, Attempts: 1,
				LastJob: ref(j1), LastError: "Job t-0-1 failed", CurrentRun: run(0, 1, v1.RunFailed, 150),
				ObservedSchedule: &v1.ObservedSchedule{Cron: "* * * * *", Since: *mtime(990)}})),
			want: wantStatus{phase: v1.PhaseScheduled, attempts: 1, lastJob: j1, nextRun: mtime(1020), since: mtime(990), lastError: "Job t-0-1 failed"},
		},
		{
			name: "an active Job confirmed gone from the API server is a failed attempt",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseRunning, Attempts: 1, LastJob: ref(j1), ActiveJobs: []v1.JobReference{*ref(j1)},
				CurrentRun: run(0, 1, v1.RunActive, 0)})),
			jobs: []observedJob{{Name: j1, UID: "job-uid", Run: runID{Attempt: 1}, Missing: true}},
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 1, lastJob: j1, nextRun: mtime(1001), lastError: "disappeared before its outcome was recorded"},
		},
		{
			// Issue #14 item 3: the user deleted the active Job. The attempt counts as failed; the
			// retry is the next attempt, after the backoff, never the same Job again.
			name: "an active Job being deleted is a failed attempt",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseRunning, Attempts: 1, LastJob: ref(j1), ActiveJobs: []v1.JobReference{*ref(j1)},
				CurrentRun: run(0, 1, v1.RunActive, 0)})),
			jobs: []observedJob{deleting(oneShotJob(1, jobActive, 0), at(140))},
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 1, lastJob: j1, nextRun: mtime(141), lastError: "deleted before it finished", run: retrying(0, 1, 140, 141)},
		},
		{
			// Found by TestChaos: a status write the Job controller had in flight may still count
			// the success of a Job just deleted. The attempt is judged once that can no longer
			// happen.
			name: "an active Job deleted a moment ago is not judged yet",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseRunning, Attempts: 1, LastJob: ref(j1), ActiveJobs: []v1.JobReference{*ref(j1)},
				CurrentRun: run(0, 1, v1.RunActive, 0)})),
			jobs: []observedJob{deleting(oneShotJob(1, jobActive, 0), at(998))},
			want: wantStatus{phase: v1.PhaseRunning, attempts: 1, lastJob: j1, active: []string{j1}, run: run(0, 1, v1.RunActive, 0)},
		},
		{
			name: "a Job whose success the Job controller counted before its deletion succeeded",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseRunning, Attempts: 1, LastJob: ref(j1), ActiveJobs: []v1.JobReference{*ref(j1)},
				CurrentRun: run(0, 1, v1.RunActive, 0)})),
			jobs: []observedJob{deleting(oneShotJob(1, jobSucceeded, 998), at(998))},
			want: wantStatus{phase: v1.PhaseSucceeded, attempts: 1, lastJob: j1, completion: mtime(998), run: run(0, 1, v1.RunSucceeded, 998)},
		},
		{
			name: "older Jobs kept, newest gone: the record knows the attempt",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseRetrying, Attempts: 2, LastJob: ref(j2), NextRunTime: mtime(252), LastError: "Job t-0-2 failed",
				CurrentRun: retrying(0, 2, 250, 252)})),
			jobs: []observedJob{oneShotJob(1, jobFailed, 150)},
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 2, lastJob: j2, nextRun: mtime(252), lastError: "Job t-0-2 failed"},
		},
		{
			name: "a Job created before the status could record it is adopted",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseRetrying, Attempts: 1, LastJob: ref(j1), CurrentRun: run(0, 1, v1.RunFailed, 150), LastError: "Job t-0-1 failed"})),
			jobs: []observedJob{oneShotJob(2, jobActive, 0)},
			want: wantStatus{phase: v1.PhaseRunning, attempts: 2, lastJob: j2, active: []string{j2}, lastError: "Job t-0-1 failed", run: run(0, 2, v1.RunActive, 0)},
		},
		{
			name: "a recorded outcome is final",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseRetrying, Attempts: 1, LastJob: ref(j1), NextRunTime: mtime(141), LastError: "Job t-0-1 was deleted before it finished",
				CurrentRun: retrying(0, 1, 140, 141)})),
			jobs: []observedJob{deleting(oneShotJob(1, jobSucceeded, 145), at(140))},
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 1, lastJob: j1, nextRun: mtime(141), lastError: "deleted before it finished", run: retrying(0, 1, 140, 141)},
		},
		{
			name: "status of an earlier release: succeeded, Job gone",
			task: newTask(withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseSucceeded, Attempts: 1, LastJob: ref("t-1"), CompletionTime: mtime(150)})),
			want: wantStatus{phase: v1.PhaseSucceeded, attempts: 1, lastJob: "t-1", completion: mtime(150)},
		},
		{
			name: "status of an earlier release: retry pending, Job gone",
			task: newTask(withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseRetrying, Attempts: 1, LastJob: ref("t-1"), NextRunTime: mtime(151), LastError: "Job t-1 failed"})),
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 1, lastJob: "t-1", nextRun: mtime(151), lastError: "Job t-1 failed"},
		},
		{
			name: "status of an earlier release: its running Job is adopted",
			task: newTask(withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseRunning, Attempts: 1, LastJob: ref("t-1"), ActiveJobs: []v1.JobReference{*ref("t-1")}})),
			jobs: []observedJob{{Name: "t-1", UID: "job-uid", Run: runID{Attempt: 1}, Created: at(100), State: jobActive}},
			want: wantStatus{phase: v1.PhaseRunning, attempts: 1, lastJob: "t-1", active: []string{"t-1"}},
		},
		{
			name: "suspended before the first run",
			task: newTask(suspended),
			want: wantStatus{phase: v1.PhaseSuspended, conditions: map[string]string{"Ready": "False/Suspended", "Progressing": "False/Suspended", "Reconciling": "False/Suspended", "Stalled": "False/Suspended"}},
		},
		{
			name: "suspended while running",
			task: newTask(suspended),
			jobs: []observedJob{oneShotJob(1, jobActive, 0)},
			want: wantStatus{phase: v1.PhaseSuspended, attempts: 1, active: []string{j1}, lastJob: j1},
		},
		{
			name: "suspended while a retry is pending: nothing is due",
			task: newTask(suspended),
			jobs: []observedJob{oneShotJob(1, jobFailed, 150)},
			want: wantStatus{phase: v1.PhaseSuspended, attempts: 1, lastJob: j1, lastError: "failed"},
		},
		{
			name: "a finished Task stays finished when suspended",
			task: newTask(suspended),
			jobs: []observedJob{oneShotJob(1, jobSucceeded, 150)},
			want: wantStatus{phase: v1.PhaseSucceeded, attempts: 1, lastJob: j1, completion: mtime(150)},
		},
		{
			name: "scheduled Task waits for its first time",
			task: newTask(scheduled(v1.AllowConcurrent)),
			now:  30,
			want: wantStatus{phase: v1.PhaseScheduled, nextRun: mtime(60), since: mtime(0), conditions: map[string]string{
				"Ready": "True/Healthy", "Progressing": "True/WaitingForSchedule", "Succeeded": "False/NoRunFinished", "Failed": "False/NoRunFinished",
				"Reconciling": "False/AsExpected", "Stalled": "False/AsExpected",
			}},
		},
		{
			name: "scheduled run active",
			task: newTask(scheduled(v1.AllowConcurrent)),
			jobs: []observedJob{schedJob(60, 1, jobActive, 0)},
			now:  90,
			want: wantStatus{phase: v1.PhaseRunning, attempts: 1, active: []string{s60}, lastJob: s60, lastSchedule: mtime(60), nextRun: mtime(120), since: mtime(0),
				run: run(60, 1, v1.RunActive, 0), conditions: map[string]string{"Ready": "True/Healthy", "Reconciling": "False/AsExpected"}},
		},
		{
			name: "Forbid: a due time held back is told in Progressing",
			task: newTask(scheduled(v1.ForbidConcurrent)),
			jobs: []observedJob{schedJob(60, 1, jobActive, 0)},
			now:  130,
			want: wantStatus{phase: v1.PhaseRunning, attempts: 1, active: []string{s60}, lastJob: s60, lastSchedule: mtime(60), nextRun: mtime(180), since: mtime(0),
				progress: "the run for 2026-01-01T00:02:00Z starts when they end"},
		},
		{
			name: "scheduled run succeeded",
			task: newTask(scheduled(v1.AllowConcurrent)),
			jobs: []observedJob{schedJob(60, 1, jobSucceeded, 70)},
			now:  90,
			want: wantStatus{phase: v1.PhaseScheduled, attempts: 1, lastJob: s60, lastSchedule: mtime(60), nextRun: mtime(120), since: mtime(0),
				conditions: map[string]string{"Ready": "True/Healthy", "Succeeded": "True/RunSucceeded", "Failed": "False/RunSucceeded"}},
		},
		{
			name: "scheduled run failed: retry before the next time",
			task: newTask(scheduled(v1.AllowConcurrent)),
			jobs: []observedJob{schedJob(60, 1, jobFailed, 70)},
			now:  70,
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 1, lastJob: s60, lastSchedule: mtime(60), nextRun: mtime(71), lastError: "failed with exit code 1", since: mtime(0),
				conditions: map[string]string{"Ready": "True/Healthy", "Reconciling": "False/AsExpected"}},
		},
		{
			// Issue #14 item 4: the failed Job's TTL is shorter than the backoff. The retry is in
			// the record, not in the Job.
			name: "scheduled retry pending after its failed Job was deleted",
			task: newTask(scheduled(v1.AllowConcurrent), withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseRetrying, Attempts: 1, LastJob: ref(s60),
				LastScheduleTime: mtime(60), LastError: "Job t-1767225660-1 failed", CurrentRun: retrying(60, 1, 70, 71),
				ObservedSchedule: &v1.ObservedSchedule{Cron: "* * * * *", Since: *mtime(0)}})),
			now:  71,
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 1, lastJob: s60, lastSchedule: mtime(60), nextRun: mtime(71), lastError: "failed", since: mtime(0)},
		},
		{
			name: "scheduled run failed for good",
			task: newTask(scheduled(v1.AllowConcurrent), maxRetries(0)),
			jobs: []observedJob{schedJob(60, 1, jobFailed, 70)},
			now:  90,
			want: wantStatus{phase: v1.PhaseScheduled, attempts: 1, lastJob: s60, lastSchedule: mtime(60), nextRun: mtime(120), lastError: "failed", since: mtime(0),
				conditions: map[string]string{"Ready": "False/LastRunFailed", "Succeeded": "False/RetriesExhausted", "Failed": "True/RetriesExhausted",
					"Reconciling": "False/AsExpected", "Stalled": "False/AsExpected"}},
		},
		{
			// Issue #14 item 6: removing the failed run's Job neither makes the Task Ready nor
			// clears lastError.
			name: "scheduled run failed for good, its Job removed",
			task: newTask(scheduled(v1.AllowConcurrent), maxRetries(0), withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseScheduled, Attempts: 1,
				LastJob: ref(s60), LastScheduleTime: mtime(60), LastError: "Job t-1767225660-1 failed", CurrentRun: run(60, 1, v1.RunFailed, 70),
				ObservedSchedule: &v1.ObservedSchedule{Cron: "* * * * *", Since: *mtime(0)},
				Conditions: []metav1.Condition{
					{Type: "Ready", Status: "False", Reason: "LastRunFailed", Message: "Job t-1767225660-1 failed"},
					{Type: "Failed", Status: "True", Reason: "RetriesExhausted", Message: "Job t-1767225660-1 failed"},
					{Type: "Succeeded", Status: "False", Reason: "RetriesExhausted", Message: "Job t-1767225660-1 failed"},
				}})),
			now: 90,
			want: wantStatus{phase: v1.PhaseScheduled, attempts: 1, lastJob: s60, lastSchedule: mtime(60), nextRun: mtime(120), lastError: "Job t-1767225660-1 failed", since: mtime(0),
				conditions: map[string]string{"Ready": "False/LastRunFailed", "Failed": "True/RetriesExhausted"}},
		},
		{
			name: "a later schedule time supersedes a pending retry",
			task: newTask(scheduled(v1.ForbidConcurrent), func(t *v1.Task) {
				t.Spec.Retry.Backoff.Initial = dur(2 * time.Minute)
				t.Spec.Retry.Backoff.Max = dur(time.Hour)
			}),
			jobs: []observedJob{schedJob(60, 1, jobFailed, 70)},
			now:  130,
			want: wantStatus{phase: v1.PhaseScheduled, attempts: 1, lastJob: s60, lastSchedule: mtime(60), nextRun: mtime(180), lastError: "failed", since: mtime(0),
				conditions: map[string]string{"Failed": "True/RunFailed", "Ready": "False/LastRunFailed"}},
		},
		{
			name: "next scheduled run active: the last outcome is kept",
			task: newTask(scheduled(v1.AllowConcurrent), withStatus(v1.TaskStatus{ObservedGeneration: 1, CurrentRun: run(60, 1, v1.RunSucceeded, 70), LastScheduleTime: mtime(60),
				ObservedSchedule: &v1.ObservedSchedule{Cron: "* * * * *", Since: *mtime(0)},
				Conditions: []metav1.Condition{
					{Type: "Succeeded", Status: "True", Reason: "RunSucceeded", Message: "Job t-1767225660-1 succeeded"},
					{Type: "Failed", Status: "False", Reason: "RunSucceeded", Message: "Job t-1767225660-1 succeeded"},
				}})),
			jobs: []observedJob{schedJob(120, 1, jobActive, 0)},
			now:  150,
			want: wantStatus{phase: v1.PhaseRunning, attempts: 1, active: []string{s120}, lastJob: s120, lastSchedule: mtime(120), nextRun: mtime(180), since: mtime(0),
				conditions: map[string]string{"Ready": "True/Healthy", "Succeeded": "True/RunSucceeded", "Failed": "False/RunSucceeded"}},
		},
		{
			// Found by TestScheduleHistoryLimit: the run ended and the next one started in the
			// same reconcile; the ended run's success must still reach the conditions.
			name: "a run that ended as the next started: its outcome is reported",
			task: newTask(scheduled(v1.AllowConcurrent), withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseRunning, Attempts: 1, LastJob: ref(s60),
				ActiveJobs: []v1.JobReference{*ref(s60)}, LastScheduleTime: mtime(60), CurrentRun: run(60, 1, v1.RunActive, 0),
				ObservedSchedule: &v1.ObservedSchedule{Cron: "* * * * *", Since: *mtime(0)}})),
			jobs: []observedJob{schedJob(60, 1, jobSucceeded, 119), schedJob(120, 1, jobActive, 0)},
			now:  120,
			want: wantStatus{phase: v1.PhaseRunning, attempts: 1, active: []string{s120}, lastJob: s120, lastSchedule: mtime(120), nextRun: mtime(180), since: mtime(0),
				run: run(120, 1, v1.RunActive, 0), conditions: map[string]string{"Succeeded": "True/RunSucceeded", "Failed": "False/RunSucceeded", "Ready": "True/Healthy"}},
		},
		{
			name: "a run that failed as the next started: its failure is reported",
			task: newTask(scheduled(v1.AllowConcurrent), maxRetries(0), withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseRunning, Attempts: 1, LastJob: ref(s60),
				ActiveJobs: []v1.JobReference{*ref(s60)}, LastScheduleTime: mtime(60), CurrentRun: run(60, 1, v1.RunActive, 0),
				ObservedSchedule: &v1.ObservedSchedule{Cron: "* * * * *", Since: *mtime(0)}})),
			jobs: []observedJob{schedJob(60, 1, jobFailed, 119), schedJob(120, 1, jobActive, 0)},
			now:  120,
			want: wantStatus{phase: v1.PhaseRunning, attempts: 1, active: []string{s120}, lastJob: s120, lastSchedule: mtime(120), nextRun: mtime(180), since: mtime(0),
				lastError: "Job t-1767225660-1 failed", run: run(120, 1, v1.RunActive, 0), conditions: map[string]string{"Failed": "True/RunFailed", "Ready": "False/LastRunFailed"}},
		},
		{
			// Found by review: a run deleted by policy Replace is not a failed run; Ready stays.
			name: "a run replaced by the next one is not reported as failed",
			task: newTask(scheduled(v1.ReplaceConcurrent), withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseRunning, Attempts: 1, LastJob: ref(s60),
				ActiveJobs: []v1.JobReference{*ref(s60)}, LastScheduleTime: mtime(60), CurrentRun: run(60, 1, v1.RunActive, 0),
				ObservedSchedule: &v1.ObservedSchedule{Cron: "* * * * *", Since: *mtime(0)}})),
			jobs: []observedJob{func() observedJob {
				j := schedJob(60, 1, jobActive, 0)
				j.Deleting, j.Replaced, j.Finished = true, true, at(120)
				return j
			}(), schedJob(120, 1, jobActive, 0)},
			now: 120,
			want: wantStatus{phase: v1.PhaseRunning, attempts: 1, active: []string{s120}, lastJob: s120, lastSchedule: mtime(120), nextRun: mtime(180), since: mtime(0),
				run: run(120, 1, v1.RunActive, 0), conditions: map[string]string{"Failed": "False/NoRunFinished", "Ready": "True/Healthy"}},
		},
		{
			// Issue #14 item 8: a schedule added to an old Task counts from when it was added.
			name: "schedule added to a one-shot Task that succeeded long ago",
			task: newTask(scheduled(v1.AllowConcurrent), withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseSucceeded, Attempts: 1, LastJob: ref(j1),
				CompletionTime: mtime(150), CurrentRun: run(0, 1, v1.RunSucceeded, 150)})),
			now: 30*24*3600 + 30,
			want: wantStatus{phase: v1.PhaseScheduled, attempts: 1, lastJob: j1, nextRun: mtime(30*24*3600 + 60), since: mtime(30*24*3600 + 30),
				conditions: map[string]string{"Ready": "True/Healthy", "Succeeded": "True/RunSucceeded"}},
		},
		{
			name: "a schedule edit counts from the edit",
			task: newTask(scheduled(v1.AllowConcurrent), withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseScheduled, Attempts: 1, LastJob: ref(s60),
				LastScheduleTime: mtime(60), CurrentRun: run(60, 1, v1.RunSucceeded, 70),
				ObservedSchedule: &v1.ObservedSchedule{Cron: "0 0 * * *", Since: *mtime(0)}})),
			now:  7200 + 30,
			want: wantStatus{phase: v1.PhaseScheduled, attempts: 1, lastJob: s60, lastSchedule: mtime(60), nextRun: mtime(7260), since: mtime(7230)},
		},
		{
			// Issue #14 item 5: without its schedule the Task is one-shot, and its latest run is
			// its only run: the active scheduled Job is that run, not a disappearance.
			name: "schedule removed while a scheduled run is active",
			task: newTask(withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseRunning, Attempts: 1, LastJob: ref(s60), LastScheduleTime: mtime(60),
				ActiveJobs: []v1.JobReference{*ref(s60)}, CurrentRun: run(60, 1, v1.RunActive, 0)})),
			jobs: []observedJob{schedJob(60, 1, jobActive, 0)},
			want: wantStatus{phase: v1.PhaseRunning, attempts: 1, active: []string{s60}, lastJob: s60, lastSchedule: mtime(60), run: run(60, 1, v1.RunActive, 0),
				conditions: oneShotConds("Running")},
		},
		{
			name: "schedule removed: the latest run's success is the Task's",
			task: newTask(withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseScheduled, Attempts: 1, LastJob: ref(s60), LastScheduleTime: mtime(60),
				CurrentRun: run(60, 1, v1.RunSucceeded, 70)})),
			want: wantStatus{phase: v1.PhaseSucceeded, attempts: 1, lastJob: s60, lastSchedule: mtime(60), completion: mtime(70)},
		},
		{
			name: "schedule removed: a pending retry of the latest run goes on",
			task: newTask(withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseRetrying, Attempts: 1, LastJob: ref(s60), LastScheduleTime: mtime(60),
				CurrentRun: retrying(60, 1, 70, 71), LastError: "Job t-1767225660-1 failed"})),
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 1, lastJob: s60, lastSchedule: mtime(60), nextRun: mtime(71), lastError: "failed"},
		},
		{
			// Chaos test of issue #14 (cron-089): Replace deleted the latest run's Job, the
			// operator stopped before the new run's Job was created, and the schedule was removed
			// before it came back. The run was not finished: its attempt was cancelled, and its
			// retries remain (not Failed after one attempt with retries left).
			name: "schedule removed after Replace deleted the latest run's Job, before the new run started",
			task: newTask(withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseRunning, Attempts: 1, LastJob: ref(s60), LastScheduleTime: mtime(60),
				ActiveJobs: []v1.JobReference{*ref(s60)}, CurrentRun: run(60, 1, v1.RunActive, 0)})),
			jobs: []observedJob{replacedJob(60, 1, 120)},
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 1, lastJob: s60, lastSchedule: mtime(60), nextRun: mtime(121), run: retrying(60, 1, 120, 121),
				conditions: oneShotConds("Retrying")},
		},
		{
			name: "schedule removed before it ever ran: the Task runs once",
			task: newTask(withStatus(v1.TaskStatus{ObservedGeneration: 1, Phase: v1.PhaseScheduled, NextRunTime: mtime(60)})),
			want: wantStatus{phase: v1.PhasePending, conditions: oneShotConds("Pending")},
		},
		{
			name: "suspended scheduled Task",
			task: newTask(scheduled(v1.AllowConcurrent), suspended),
			now:  30,
			want: wantStatus{phase: v1.PhaseSuspended, since: mtime(0), conditions: map[string]string{"Progressing": "False/Suspended", "Ready": "False/Suspended"}},
		},
		{
			name: "invalid schedule",
			task: newTask(func(t *v1.Task) { t.Spec.Schedule = &v1.Schedule{Cron: "every day"} }),
			want: wantStatus{phase: v1.PhasePending, conditions: map[string]string{
				"Ready": "False/InvalidSchedule", "Progressing": "False/InvalidSchedule", "Succeeded": "False/InvalidSchedule", "Failed": "False/InvalidSchedule",
				"Reconciling": "False/InvalidSchedule", "Stalled": "True/InvalidSchedule",
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := at(1000)
			if tc.now != 0 {
				now = at(tc.now)
			}
			got := computeStatus(tc.task, tc.jobs, now)
			checkStatus(t, got, tc.want, tc.task.Generation)

			// At rest: computing again on the stored result (as the API returns it) changes
			// nothing, so a Task at rest is never written.
			stored := roundTrip(t, got)
			again := tc.task.DeepCopy()
			again.Status = stored
			if diff := cmp.Diff(stored, roundTrip(t, computeStatus(again, tc.jobs, now))); diff != "" {
				t.Errorf("status is not stable (-first +second):\n%s", diff)
			}
		})
	}
}

// TestLastSuccessfulTime pins status.lastSuccessfulTime: the finish of the latest succeeded
// attempt, whichever Job or record tells it, kept through later failures and Jobs that are gone.
func TestLastSuccessfulTime(t *testing.T) {
	tests := []struct {
		name string
		task *v1.Task
		jobs []observedJob
		want *metav1.Time
	}{
		{name: "no run yet", task: newTask()},
		{name: "a failed attempt is no success", task: newTask(), jobs: []observedJob{oneShotJob(1, jobFailed, 150)}},
		{name: "a one-shot success", task: newTask(), jobs: []observedJob{oneShotJob(1, jobSucceeded, 150)}, want: mtime(150)},
		{
			name: "a retry's success after a failed attempt",
			task: newTask(withStatus(v1.TaskStatus{Attempts: 1, CurrentRun: retrying(0, 1, 150, 151)})),
			jobs: []observedJob{oneShotJob(1, jobFailed, 150), oneShotJob(2, jobSucceeded, 260)},
			want: mtime(260),
		},
		{
			name: "a later scheduled run's failure keeps the earlier success",
			task: newTask(scheduled(v1.AllowConcurrent)),
			jobs: []observedJob{schedJob(60, 1, jobSucceeded, 70), schedJob(120, 1, jobFailed, 130)},
			want: mtime(70),
		},
		{
			name: "the stored time outlives its Job",
			task: newTask(scheduled(v1.AllowConcurrent), withStatus(v1.TaskStatus{LastSuccessfulTime: mtime(70), CurrentRun: run(120, 1, v1.RunFailed, 130)})),
			want: mtime(70),
		},
		{
			name: "a newer success moves it forward",
			task: newTask(scheduled(v1.AllowConcurrent), withStatus(v1.TaskStatus{LastSuccessfulTime: mtime(70), CurrentRun: run(120, 1, v1.RunActive, 0)})),
			jobs: []observedJob{schedJob(120, 1, jobSucceeded, 190)},
			want: mtime(190),
		},
		{
			name: "a status of an earlier release: the succeeded record tells it",
			task: newTask(scheduled(v1.AllowConcurrent), withStatus(v1.TaskStatus{CurrentRun: run(120, 1, v1.RunSucceeded, 190)})),
			want: mtime(190),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := computeStatus(tc.task, tc.jobs, at(1000))
			checkTime(t, "lastSuccessfulTime", got.LastSuccessfulTime, tc.want)
			again := tc.task.DeepCopy()
			again.Status = roundTrip(t, got)
			checkTime(t, "lastSuccessfulTime computed again", computeStatus(again, tc.jobs, at(1000)).LastSuccessfulTime, tc.want)
		})
	}
}

func checkStatus(t *testing.T, got v1.TaskStatus, want wantStatus, generation int64) {
	t.Helper()
	if got.Phase != want.phase {
		t.Errorf("phase = %s, want %s", got.Phase, want.phase)
	}
	if got.ObservedGeneration != generation {
		t.Errorf("observedGeneration = %d, want %d", got.ObservedGeneration, generation)
	}
	if got.Attempts != want.attempts {
		t.Errorf("attempts = %d, want %d", got.Attempts, want.attempts)
	}
	var active []string
	for _, r := range got.ActiveJobs {
		active = append(active, r.Name)
	}
	if diff := cmp.Diff(want.active, active); diff != "" {
		t.Errorf("activeJobs (-want +got):\n%s", diff)
	}
	lastJob := ""
	if got.LastJob != nil {
		lastJob = got.LastJob.Name
	}
	if lastJob != want.lastJob {
		t.Errorf("lastJob = %q, want %q", lastJob, want.lastJob)
	}
	checkTime(t, "nextRunTime", got.NextRunTime, want.nextRun)
	checkTime(t, "completionTime", got.CompletionTime, want.completion)
	checkTime(t, "lastScheduleTime", got.LastScheduleTime, want.lastSchedule)
	if want.startTime != nil {
		checkTime(t, "startTime", got.StartTime, want.startTime)
	}
	if want.lastError == "" && got.LastError != "" {
		t.Errorf("lastError = %q, want empty", got.LastError)
	}
	if !strings.Contains(got.LastError, want.lastError) {
		t.Errorf("lastError = %q, want it to contain %q", got.LastError, want.lastError)
	}
	if got.MissedRuns != want.missed {
		t.Errorf("missedRuns = %d, want %d", got.MissedRuns, want.missed)
	}
	if got.LastPhaseTransitionTime == nil {
		t.Error("lastPhaseTransitionTime not set")
	}
	if want.run != nil {
		if diff := cmp.Diff(want.run, got.CurrentRun); diff != "" {
			t.Errorf("currentRun (-want +got):\n%s", diff)
		}
	}
	if got.CurrentRun != nil && got.Attempts != got.CurrentRun.Attempt {
		t.Errorf("attempts %d but currentRun.attempt %d", got.Attempts, got.CurrentRun.Attempt)
	}
	if c := meta.FindStatusCondition(got.Conditions, v1.ConditionProgressing); want.progress != "" && (c == nil || !strings.Contains(c.Message, want.progress)) {
		t.Errorf("Progressing = %+v, want its message to contain %q", c, want.progress)
	}
	if want.since != nil {
		if got.ObservedSchedule == nil {
			t.Errorf("observedSchedule missing, want since %v", want.since)
		} else {
			checkTime(t, "observedSchedule.since", &got.ObservedSchedule.Since, want.since)
		}
	}
	for _, typ := range []string{v1.ConditionReady, v1.ConditionProgressing, v1.ConditionSucceeded, v1.ConditionFailed, v1.ConditionReconciling, v1.ConditionStalled} {
		c := meta.FindStatusCondition(got.Conditions, typ)
		if c == nil {
			t.Errorf("condition %s missing", typ)
			continue
		}
		if c.ObservedGeneration != generation {
			t.Errorf("condition %s observedGeneration = %d, want %d", typ, c.ObservedGeneration, generation)
		}
		if w, ok := want.conditions[typ]; ok && string(c.Status)+"/"+c.Reason != w {
			t.Errorf("condition %s = %s/%s (%s), want %s", typ, c.Status, c.Reason, c.Message, w)
		}
	}
	// Phase and conditions agree on the outcome.
	succeeded := meta.IsStatusConditionTrue(got.Conditions, v1.ConditionSucceeded)
	failed := meta.IsStatusConditionTrue(got.Conditions, v1.ConditionFailed)
	if succeeded && failed {
		t.Error("Succeeded and Failed are both True")
	}
	if got.Phase == v1.PhaseSucceeded && !succeeded || got.Phase == v1.PhaseFailed && !failed {
		t.Errorf("phase %s but Succeeded=%v Failed=%v", got.Phase, succeeded, failed)
	}
	// Ready never claims a one-shot Task is done before it succeeded.
	if meta.IsStatusConditionTrue(got.Conditions, v1.ConditionReady) && got.Phase != v1.PhaseSucceeded &&
		(got.Phase == v1.PhasePending || got.Phase == v1.PhaseFailed) {
		t.Errorf("Ready is True in phase %s", got.Phase)
	}
}

func checkTime(t *testing.T, field string, got, want *metav1.Time) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Errorf("%s = %v, want %v", field, got, want)
	case !got.Equal(want):
		t.Errorf("%s = %s, want %s", field, got.UTC(), want.UTC())
	}
}

// roundTrip passes a status through JSON, as storing it in the API server does.
func roundTrip(t *testing.T, st v1.TaskStatus) v1.TaskStatus {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var out v1.TaskStatus
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestComputeStatusKeepsTransitionTimes(t *testing.T) {
	task := newTask()
	first := computeStatus(task, []observedJob{oneShotJob(1, jobActive, 0)}, at(100))
	task.Status = first
	second := computeStatus(task, []observedJob{oneShotJob(1, jobActive, 0)}, at(500))
	if !second.LastPhaseTransitionTime.Equal(first.LastPhaseTransitionTime) {
		t.Errorf("lastPhaseTransitionTime moved without a phase change: %v -> %v", first.LastPhaseTransitionTime, second.LastPhaseTransitionTime)
	}
	task.Status = second
	third := computeStatus(task, []observedJob{oneShotJob(1, jobSucceeded, 600)}, at(601))
	if !third.LastPhaseTransitionTime.Time.Equal(at(601)) {
		t.Errorf("lastPhaseTransitionTime = %v, want the time of the change", third.LastPhaseTransitionTime)
	}
	stalled := meta.FindStatusCondition(third.Conditions, v1.ConditionStalled)
	if !stalled.LastTransitionTime.Time.Equal(at(100)) {
		t.Errorf("Stalled stayed False but its transition time moved to %v", stalled.LastTransitionTime)
	}
	// Ready was False while the run was going (issue #14 item 10) and turns True with success.
	if ready := meta.FindStatusCondition(third.Conditions, v1.ConditionReady); ready.Status != metav1.ConditionTrue || !ready.LastTransitionTime.Time.Equal(at(601)) {
		t.Errorf("Ready = %s since %v, want True since %v", ready.Status, ready.LastTransitionTime, at(601))
	}
	succeeded := meta.FindStatusCondition(third.Conditions, v1.ConditionSucceeded)
	if !succeeded.LastTransitionTime.Time.Equal(at(601)) {
		t.Errorf("Succeeded became True at %v, want %v", succeeded.LastTransitionTime, at(601))
	}
}
