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
}

func TestComputeStatus(t *testing.T) {
	now := at(1000)
	j1 := jobName("t", runID{Attempt: 1})
	j2 := jobName("t", runID{Attempt: 2})
	j3 := jobName("t", runID{Attempt: 3})
	tests := []struct {
		name string
		task *v1.Task
		jobs []observedJob
		want wantStatus
	}{
		{
			name: "new task waits for its first run",
			task: newTask(),
			want: wantStatus{phase: v1.PhasePending, conditions: map[string]string{
				"Ready": "True/Pending", "Progressing": "True/Pending", "Succeeded": "False/Pending", "Failed": "False/Pending",
			}},
		},
		{
			name: "first attempt running",
			task: newTask(),
			jobs: []observedJob{oneShotJob(1, jobActive, 0)},
			want: wantStatus{phase: v1.PhaseRunning, attempts: 1, active: []string{j1}, lastJob: j1, startTime: mtime(100),
				conditions: map[string]string{"Ready": "True/Running", "Progressing": "True/JobActive", "Succeeded": "False/Running", "Failed": "False/Running"}},
		},
		{
			name: "first attempt succeeded",
			task: newTask(),
			jobs: []observedJob{oneShotJob(1, jobSucceeded, 150)},
			want: wantStatus{phase: v1.PhaseSucceeded, attempts: 1, lastJob: j1, completion: mtime(150), startTime: mtime(100),
				conditions: map[string]string{"Ready": "True/Succeeded", "Progressing": "False/Succeeded", "Succeeded": "True/RunSucceeded", "Failed": "False/Succeeded"}},
		},
		{
			name: "first attempt failed: retry after the initial backoff",
			task: newTask(),
			jobs: []observedJob{oneShotJob(1, jobFailed, 150)},
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 1, lastJob: j1, nextRun: mtime(151), lastError: "BackoffLimitExceeded",
				conditions: map[string]string{"Ready": "True/Retrying", "Progressing": "True/RetryPending", "Succeeded": "False/Retrying", "Failed": "False/Retrying"}},
		},
		{
			name: "second attempt failed: backoff doubles",
			task: newTask(),
			jobs: []observedJob{oneShotJob(1, jobFailed, 150), oneShotJob(2, jobFailed, 250)},
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 2, lastJob: j2, nextRun: mtime(252), lastError: "Job t-2 failed"},
		},
		{
			name: "retries exhausted",
			task: newTask(),
			jobs: []observedJob{oneShotJob(1, jobFailed, 150), oneShotJob(2, jobFailed, 250), oneShotJob(3, jobFailed, 350)},
			want: wantStatus{phase: v1.PhaseFailed, attempts: 3, lastJob: j3, completion: mtime(350), lastError: "Job t-3 failed: BackoffLimitExceeded",
				conditions: map[string]string{"Ready": "False/RetriesExhausted", "Progressing": "False/RetriesExhausted", "Succeeded": "False/RetriesExhausted", "Failed": "True/RetriesExhausted"}},
		},
		{
			name: "no retries at all",
			task: newTask(maxRetries(0)),
			jobs: []observedJob{oneShotJob(1, jobFailed, 150)},
			want: wantStatus{phase: v1.PhaseFailed, attempts: 1, lastJob: j1, completion: mtime(150), lastError: "failed"},
		},
		{
			name: "success after a failure clears the error",
			task: newTask(),
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
			name: "succeeded Job removed by its TTL: the status remembers",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseSucceeded, Attempts: 1, LastJob: ref(j1), CompletionTime: mtime(150), StartTime: mtime(100)})),
			want: wantStatus{phase: v1.PhaseSucceeded, attempts: 1, lastJob: j1, completion: mtime(150), startTime: mtime(100)},
		},
		{
			name: "failed Job removed by its TTL while its retry is pending",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseRetrying, Attempts: 1, LastJob: ref(j1), NextRunTime: mtime(151), LastError: "Job t-1 failed"})),
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 1, lastJob: j1, nextRun: mtime(151), lastError: "Job t-1 failed"},
		},
		{
			name: "exhausted Task whose Jobs are gone stays failed",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseFailed, Attempts: 3, LastJob: ref(j3), CompletionTime: mtime(350), LastError: "Job t-3 failed"})),
			want: wantStatus{phase: v1.PhaseFailed, attempts: 3, lastJob: j3, completion: mtime(350), lastError: "Job t-3 failed"},
		},
		{
			name: "an active Job that vanished is a failed run",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseRunning, Attempts: 1, LastJob: ref(j1), ActiveJobs: []v1.JobReference{*ref(j1)}})),
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 1, lastJob: j1, nextRun: &metav1.Time{Time: now.Add(time.Second)}, lastError: "disappeared before it finished"},
		},
		{
			name: "an active Job being deleted is a failed run",
			task: newTask(),
			jobs: []observedJob{func() observedJob {
				j := oneShotJob(1, jobActive, 0)
				j.Gone, j.Finished = true, at(140)
				return j
			}()},
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 1, lastJob: j1, nextRun: mtime(141), lastError: "deleted before it finished"},
		},
		{
			name: "older Jobs kept, newest gone: attempts and last Job from the status",
			task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseRetrying, Attempts: 2, LastJob: ref(j2), NextRunTime: mtime(252), LastError: "Job t-2 failed"})),
			jobs: []observedJob{oneShotJob(1, jobFailed, 150)},
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 2, lastJob: j2, nextRun: mtime(252), lastError: "Job t-2 failed"},
		},
		{
			name: "suspended before the first run",
			task: newTask(suspended),
			want: wantStatus{phase: v1.PhaseSuspended, conditions: map[string]string{"Ready": "True/Suspended", "Progressing": "False/Suspended"}},
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
			want: wantStatus{phase: v1.PhaseScheduled, nextRun: mtime(60), conditions: map[string]string{
				"Ready": "True/Healthy", "Progressing": "True/WaitingForSchedule", "Succeeded": "False/NoRunFinished", "Failed": "False/NoRunFinished",
			}},
		},
		{
			name: "scheduled run active",
			task: newTask(scheduled(v1.AllowConcurrent)),
			jobs: []observedJob{schedJob(60, 1, jobActive, 0)},
			want: wantStatus{phase: v1.PhaseRunning, attempts: 1, active: []string{"t-1767225660"}, lastJob: "t-1767225660", lastSchedule: mtime(60), nextRun: mtime(120)},
		},
		{
			name: "scheduled run succeeded",
			task: newTask(scheduled(v1.AllowConcurrent)),
			jobs: []observedJob{schedJob(60, 1, jobSucceeded, 70)},
			want: wantStatus{phase: v1.PhaseScheduled, attempts: 1, lastJob: "t-1767225660", lastSchedule: mtime(60), nextRun: mtime(120),
				conditions: map[string]string{"Ready": "True/Healthy", "Succeeded": "True/RunSucceeded", "Failed": "False/RunSucceeded"}},
		},
		{
			name: "scheduled run failed: retry before the next time",
			task: newTask(scheduled(v1.AllowConcurrent)),
			jobs: []observedJob{schedJob(60, 1, jobFailed, 70)},
			want: wantStatus{phase: v1.PhaseRetrying, attempts: 1, lastJob: "t-1767225660", lastSchedule: mtime(60), nextRun: mtime(71), lastError: "BackoffLimitExceeded"},
		},
		{
			name: "scheduled run failed for good",
			task: newTask(scheduled(v1.AllowConcurrent), maxRetries(0)),
			jobs: []observedJob{schedJob(60, 1, jobFailed, 70)},
			want: wantStatus{phase: v1.PhaseScheduled, attempts: 1, lastJob: "t-1767225660", lastSchedule: mtime(60), nextRun: mtime(120), lastError: "failed",
				conditions: map[string]string{"Ready": "False/LastRunFailed", "Succeeded": "False/RetriesExhausted", "Failed": "True/RetriesExhausted"}},
		},
		{
			name: "scheduled run failed after a later time was skipped: no retry",
			task: newTask(scheduled(v1.ForbidConcurrent), withStatus(v1.TaskStatus{LastScheduleTime: mtime(120), MissedRuns: 1})),
			jobs: []observedJob{schedJob(60, 1, jobFailed, 130)},
			want: wantStatus{phase: v1.PhaseScheduled, attempts: 1, lastJob: "t-1767225660", lastSchedule: mtime(120), nextRun: mtime(180), missed: 1, lastError: "failed",
				conditions: map[string]string{"Failed": "True/RunFailed"}},
		},
		{
			name: "next scheduled run active: the last outcome is kept",
			task: newTask(scheduled(v1.AllowConcurrent), withStatus(v1.TaskStatus{Conditions: []metav1.Condition{
				{Type: "Succeeded", Status: "True", Reason: "RunSucceeded", Message: "Job t-1767225660 succeeded"},
				{Type: "Failed", Status: "False", Reason: "RunSucceeded", Message: "Job t-1767225660 succeeded"},
			}})),
			jobs: []observedJob{schedJob(60, 1, jobSucceeded, 70), schedJob(120, 1, jobActive, 0)},
			want: wantStatus{phase: v1.PhaseRunning, attempts: 1, active: []string{"t-1767225720"}, lastJob: "t-1767225720", lastSchedule: mtime(120), nextRun: mtime(180),
				conditions: map[string]string{"Ready": "True/Healthy", "Succeeded": "True/RunSucceeded", "Failed": "False/RunSucceeded"}},
		},
		{
			name: "suspended scheduled Task",
			task: newTask(scheduled(v1.AllowConcurrent), suspended),
			want: wantStatus{phase: v1.PhaseSuspended, conditions: map[string]string{"Progressing": "False/Suspended"}},
		},
		{
			name: "invalid schedule",
			task: newTask(func(t *v1.Task) { t.Spec.Schedule = &v1.Schedule{Cron: "every day"} }),
			want: wantStatus{phase: v1.PhasePending, conditions: map[string]string{
				"Ready": "False/InvalidSchedule", "Progressing": "False/InvalidSchedule", "Succeeded": "False/InvalidSchedule", "Failed": "False/InvalidSchedule",
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := computeStatus(tc.task, tc.jobs, now)
			checkStatus(t, got, tc.want, tc.task.Generation)

			// At rest: computing again on the stored result (as the API returns it) changes
			// nothing, so a Task at rest is never written.
			stored := roundTrip(t, got)
			again := tc.task.DeepCopy()
			again.Status = stored
			if diff := cmp.Diff(stored, roundTrip(t, computeStatus(again, tc.jobs, now.Add(time.Second)))); diff != "" {
				t.Errorf("status is not stable (-first +second):\n%s", diff)
			}
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
	for _, typ := range []string{v1.ConditionReady, v1.ConditionProgressing, v1.ConditionSucceeded, v1.ConditionFailed} {
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
	ready := meta.FindStatusCondition(third.Conditions, v1.ConditionReady)
	if !ready.LastTransitionTime.Time.Equal(at(100)) {
		t.Errorf("Ready stayed True but its transition time moved to %v", ready.LastTransitionTime)
	}
	succeeded := meta.FindStatusCondition(third.Conditions, v1.ConditionSucceeded)
	if !succeeded.LastTransitionTime.Time.Equal(at(601)) {
		t.Errorf("Succeeded became True at %v, want %v", succeeded.LastTransitionTime, at(601))
	}
}
