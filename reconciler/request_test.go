package reconciler

import (
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "example.com/task-operator/apis/v1"
)

// sim runs the pure decisions the way the reconciler wires them: analyze, plan, carry the plan
// out on the simulated Jobs (a cancel marks and deletes, a create adds a Job that carries its
// request), and store the status computed from the result.
type sim struct {
	t    *testing.T
	task *v1.Task
	jobs []observedJob
	// lose drops the next status write (the operator died before it).
	lose bool
}

func (s *sim) step(now time.Time) plan {
	s.t.Helper()
	a := analyze(s.task, s.jobs, now)
	p := planRuns(s.task, a, s.jobs, now)
	for _, c := range p.cancel {
		j := findJob(s.jobs, c.Name)
		if !j.Deleting {
			j.Deleting, j.Finished = true, now
		}
		j.Cancelled = p.cancelAt
	}
	if p.create != nil {
		j := observedJob{Name: jobName(s.task.Name, *p.create), Run: *p.create, Created: now, State: jobActive, Protected: true}
		if p.requested {
			j.Requested = p.create.Scheduled
		}
		if findJob(s.jobs, j.Name) != nil {
			s.t.Fatalf("at %s: planned %s again, whose Job exists", now, j.Name)
		}
		s.jobs = append(s.jobs, j)
		sortJobs(s.jobs)
	}
	st := roundTrip(s.t, computeStatus(s.task, s.jobs, now))
	if s.lose {
		s.lose = false
	} else {
		s.task.Status = st
	}
	return p
}

func (s *sim) finish(name string, state jobState, now time.Time) {
	j := findJob(s.jobs, name)
	if j == nil {
		s.t.Fatalf("no Job %s", name)
	}
	j.State, j.Finished = state, now
	if state == jobFailed {
		j.Reason = "BackoffLimitExceeded"
	}
}

func request(key string, when time.Time) func(*v1.Task) {
	return func(t *v1.Task) {
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[key] = when.UTC().Format(time.RFC3339)
	}
}

func created(p plan) string {
	if p.create == nil {
		return "nothing"
	}
	return p.create.String()
}

func TestRunRequestRerunsAFinishedOneShotTaskOnce(t *testing.T) {
	s := &sim{t: t, task: newTask()}
	s.step(at(1))
	s.finish(jobName("t", runID{Attempt: 1}), jobSucceeded, at(5))
	s.step(at(5))
	if s.task.Status.Phase != v1.PhaseSucceeded {
		t.Fatalf("phase %s, want Succeeded", s.task.Status.Phase)
	}

	request(v1.AnnotationRunRequested, at(100))(s.task)
	want := runID{Scheduled: at(100), Attempt: 1}
	// The status write after the creation is lost: the next reconcile finds the Job, creates
	// nothing (sim fails on a repeated creation) and records the request.
	s.lose = true
	if p := s.step(at(101)); p.create == nil || !p.create.equal(want) || !p.requested {
		t.Fatalf("the request started %s, want %s", created(p), want)
	}
	if p := s.step(at(102)); p.create != nil {
		t.Fatalf("after a lost status write the request started %s again", created(p))
	}
	st := s.task.Status
	if st.Phase != v1.PhaseRunning || !timeOf(st.RunRequest).Equal(at(100)) || st.LastScheduleTime != nil ||
		st.CurrentRun == nil || st.CurrentRun.Job.Name != "t-"+strconv.FormatInt(at(100).Unix(), 10)+"-1" {
		t.Fatalf("status after the rerun started: phase %s runRequest %v lastScheduleTime %v currentRun %+v", st.Phase, st.RunRequest, st.LastScheduleTime, st.CurrentRun)
	}
	s.finish(jobName("t", want), jobSucceeded, at(110))
	s.step(at(110))
	if p := s.step(at(200)); p.create != nil || s.task.Status.Phase != v1.PhaseSucceeded {
		t.Fatalf("after the rerun succeeded: started %s, phase %s", created(p), s.task.Status.Phase)
	}
}

func TestRerunRetriesAsUsual(t *testing.T) {
	s := &sim{t: t, task: newTask(maxRetries(1), withStatus(v1.TaskStatus{Phase: v1.PhaseSucceeded, Attempts: 1, CurrentRun: run(0, 1, v1.RunSucceeded, 50)}), request(v1.AnnotationRunRequested, at(100)))}
	s.step(at(100))
	first := jobName("t", runID{Scheduled: at(100), Attempt: 1})
	s.finish(first, jobFailed, at(105))
	s.step(at(105))
	if s.task.Status.Phase != v1.PhaseRetrying {
		t.Fatalf("phase %s after the rerun's first attempt failed, want Retrying", s.task.Status.Phase)
	}
	p := s.step(at(106))
	if want := (runID{Scheduled: at(100), Attempt: 2}); p.create == nil || !p.create.equal(want) || !p.requested {
		t.Fatalf("retry started %s (requested %t), want %s", created(p), p.requested, want)
	}
	s.finish(jobName("t", *p.create), jobFailed, at(110))
	s.step(at(110))
	if s.task.Status.Phase != v1.PhaseFailed {
		t.Fatalf("phase %s once maxRetries is spent, want Failed", s.task.Status.Phase)
	}
}

func TestRunRequestWaitsWhileARunIsActive(t *testing.T) {
	s := &sim{t: t, task: newTask()}
	s.step(at(1))
	request(v1.AnnotationRunRequested, at(10))(s.task)
	if p := s.step(at(10)); p.create != nil {
		t.Fatalf("started %s while attempt 1 runs", created(p))
	}
	if s.task.Status.RunRequest != nil {
		t.Fatalf("runRequest %v recorded before its run started", s.task.Status.RunRequest)
	}
	s.finish(jobName("t", runID{Attempt: 1}), jobSucceeded, at(20))
	if p := s.step(at(20)); p.create == nil || !p.create.Scheduled.Equal(at(10)) {
		t.Fatalf("once nothing runs the request started %s, want the run for %s", created(p), at(10))
	}
}

func TestTwoRequestsBeforeTheOperatorSeesThemAreOneRun(t *testing.T) {
	done := withStatus(v1.TaskStatus{Phase: v1.PhaseSucceeded, Attempts: 1, CurrentRun: run(0, 1, v1.RunSucceeded, 50)})
	s := &sim{t: t, task: newTask(done, request(v1.AnnotationRunRequested, at(100)))}
	request(v1.AnnotationRunRequested, at(101))(s.task) // the second overwrites the first
	if p := s.step(at(102)); p.create == nil || !p.create.Scheduled.Equal(at(101)) {
		t.Fatalf("started %s, want the run for the later request", created(p))
	}
	s.finish(jobName("t", runID{Scheduled: at(101), Attempt: 1}), jobSucceeded, at(103))
	s.step(at(103))
	if p := s.step(at(104)); p.create != nil {
		t.Fatalf("started %s: the earlier request is not pending any more", created(p))
	}
	request(v1.AnnotationRunRequested, at(105))(s.task) // seen after the first: a second run
	if p := s.step(at(105)); p.create == nil || !p.create.Scheduled.Equal(at(105)) {
		t.Fatalf("a request after the first run started %s, want the run for %s", created(p), at(105))
	}
}

func TestRunRequestOfAScheduledTaskLeavesTheScheduleAlone(t *testing.T) {
	for _, cron := range []string{"* * * * *", "@every 1m"} {
		t.Run(cron, func(t *testing.T) {
			task := newTask(scheduled(v1.ForbidConcurrent))
			task.Spec.Schedule.Cron = cron
			s := &sim{t: t, task: task}
			if p := s.step(at(60)); p.create == nil || !p.create.Scheduled.Equal(at(60)) {
				t.Fatalf("the schedule started %s, want the run for %s", created(p), at(60))
			}
			s.finish(jobName("t", runID{Scheduled: at(60), Attempt: 1}), jobSucceeded, at(65))
			s.step(at(65))
			request(v1.AnnotationRunRequested, at(90))(s.task)
			p := s.step(at(90))
			if want := (runID{Scheduled: at(90), Attempt: 1}); p.create == nil || !p.create.equal(want) || !p.requested || p.missed != 0 {
				t.Fatalf("the request started %s (requested %t, missed %d), want %s", created(p), p.requested, p.missed, want)
			}
			st := s.task.Status
			if !timeOf(st.LastScheduleTime).Equal(at(60)) || !timeOf(st.RunRequest).Equal(at(90)) || !timeOf(st.NextRunTime).Equal(at(120)) {
				t.Fatalf("lastScheduleTime %v runRequest %v nextRunTime %v, want %s, %s, %s", st.LastScheduleTime, st.RunRequest, st.NextRunTime, at(60), at(90), at(120))
			}
			s.finish(jobName("t", runID{Scheduled: at(90), Attempt: 1}), jobSucceeded, at(95))
			s.step(at(95))
			p = s.step(at(120))
			if p.create == nil || !p.create.Scheduled.Equal(at(120)) || p.requested || p.missed != 0 {
				t.Fatalf("the next schedule time started %s (requested %t, missed %d), want the run for %s, none missed", created(p), p.requested, p.missed, at(120))
			}
			if st := s.task.Status; !timeOf(st.LastScheduleTime).Equal(at(120)) || st.MissedRuns != 0 {
				t.Fatalf("lastScheduleTime %v missedRuns %d after the schedule's run", st.LastScheduleTime, st.MissedRuns)
			}
		})
	}
}

func TestAScheduleTimeAfterAPendingRequestSatisfiesIt(t *testing.T) {
	task := newTask(scheduled(v1.AllowConcurrent), withStatus(v1.TaskStatus{
		ObservedGeneration: 1, LastScheduleTime: mtime(60), CurrentRun: run(60, 1, v1.RunSucceeded, 65),
		ObservedSchedule: &v1.ObservedSchedule{Cron: "* * * * *", Since: *mtime(0)},
	}), request(v1.AnnotationRunRequested, at(100)))
	s := &sim{t: t, task: task}
	if p := s.step(at(121)); p.create == nil || !p.create.Scheduled.Equal(at(120)) || p.requested {
		t.Fatalf("started %s, want the schedule's run for %s", created(p), at(120))
	}
	if st := s.task.Status; !timeOf(st.RunRequest).Equal(at(100)) || !timeOf(st.LastScheduleTime).Equal(at(120)) {
		t.Fatalf("runRequest %v lastScheduleTime %v: the run for %s answers the request at %s", st.RunRequest, st.LastScheduleTime, at(120), at(100))
	}
}

func TestCancelStopsTheActiveRunWithoutARetry(t *testing.T) {
	s := &sim{t: t, task: newTask()}
	s.step(at(1))
	request(v1.AnnotationCancelRequested, at(10))(s.task)
	p := s.step(at(10))
	j1 := jobName("t", runID{Attempt: 1})
	if len(p.cancel) != 1 || p.cancel[0].Name != j1 || p.create != nil {
		t.Fatalf("cancel deletes %v and starts %s, want %s deleted and nothing started", jobNames(p.cancel), created(p), j1)
	}
	if st := s.task.Status; !timeOf(st.CancelRequest).Equal(at(10)) || st.Phase != v1.PhaseRunning {
		t.Fatalf("cancelRequest %v phase %s: the request is recorded, the Job not judged before deletionSettleTime", st.CancelRequest, st.Phase)
	}
	if p := s.step(at(11)); len(p.cancel) != 0 {
		t.Fatalf("a recorded cancel deletes %v again", jobNames(p.cancel))
	}
	s.step(at(10).Add(deletionSettleTime))
	st := s.task.Status
	if st.Phase != v1.PhaseFailed || st.NextRunTime != nil || st.LastError != "cancelled at "+at(10).Format(time.RFC3339)+" by request" ||
		st.CurrentRun == nil || st.CurrentRun.RetryTime != nil {
		t.Fatalf("after the cancel: phase %s nextRunTime %v lastError %q currentRun %+v; want Failed, no retry", st.Phase, st.NextRunTime, st.LastError, st.CurrentRun)
	}
	if p := s.step(at(100)); p.create != nil {
		t.Fatalf("a cancelled run started %s", created(p))
	}
	// A later rerun runs again.
	request(v1.AnnotationRunRequested, at(200))(s.task)
	if p := s.step(at(200)); p.create == nil || !p.create.Scheduled.Equal(at(200)) {
		t.Fatalf("a rerun after the cancel started %s", created(p))
	}
}

func TestCancelOfAPendingRetryEndsTheRun(t *testing.T) {
	s := &sim{t: t, task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseRetrying, Attempts: 1, CurrentRun: retrying(0, 1, 50, 60)}),
		request(v1.AnnotationCancelRequested, at(55)))}
	p := s.step(at(61))
	st := s.task.Status
	if p.create != nil || st.Phase != v1.PhaseFailed || st.CurrentRun.RetryTime != nil || !timeOf(st.CancelRequest).Equal(at(55)) {
		t.Fatalf("started %s; phase %s retry %v cancelRequest %v: want nothing started, Failed, no retry", created(p), st.Phase, st.CurrentRun.RetryTime, st.CancelRequest)
	}
	if e, ok := cancelledRetryEvent(v1.TaskStatus{CurrentRun: retrying(0, 1, 50, 60)}, st); !ok || e.Reason != v1.EventRunCancelled {
		t.Fatalf("no RunCancelled Event for the cancelled retry: %+v", e)
	}
	if p := s.step(at(100)); p.create != nil || s.task.Status.Phase != v1.PhaseFailed {
		t.Fatalf("after the cancel is recorded: started %s, phase %s", created(p), s.task.Status.Phase)
	}
}

func TestCancelWithNothingActiveIsRecordedAndDoesNothing(t *testing.T) {
	s := &sim{t: t, task: newTask(withStatus(v1.TaskStatus{Phase: v1.PhaseSucceeded, Attempts: 1, CurrentRun: run(0, 1, v1.RunSucceeded, 50)}),
		request(v1.AnnotationCancelRequested, at(60)))}
	p := s.step(at(61))
	if st := s.task.Status; p.create != nil || len(p.cancel) != 0 || st.Phase != v1.PhaseSucceeded || !timeOf(st.CancelRequest).Equal(at(60)) {
		t.Fatalf("started %s, deleted %v, phase %s, cancelRequest %v", created(p), jobNames(p.cancel), st.Phase, st.CancelRequest)
	}
}

func TestACancelAtOrAfterAPendingRequestDropsIt(t *testing.T) {
	done := withStatus(v1.TaskStatus{Phase: v1.PhaseSucceeded, Attempts: 1, CurrentRun: run(0, 1, v1.RunSucceeded, 50)})
	s := &sim{t: t, task: newTask(done, request(v1.AnnotationRunRequested, at(60)), request(v1.AnnotationCancelRequested, at(61)))}
	p := s.step(at(62))
	if st := s.task.Status; p.create != nil || !timeOf(st.RunRequest).Equal(at(60)) || !timeOf(st.CancelRequest).Equal(at(61)) {
		t.Fatalf("started %s; runRequest %v cancelRequest %v: want nothing started, both recorded", created(p), st.RunRequest, st.CancelRequest)
	}
	if p := s.step(at(63)); p.create != nil {
		t.Fatalf("the dropped request started %s later", created(p))
	}
}

// TestACancelAheadOfTheClockStopsTheRunTheUserSaw: a cancel stamped a little ahead of the
// operator's clock (the client's clock runs ahead) stops the current run at once, not whichever
// run is current when its time comes. One set by hand further ahead than v1.RequestClockSkew
// waits, and the operator looks again when it becomes pending: a hanging run sends no event
// that would bring the Task back.
func TestACancelAheadOfTheClockStopsTheRunTheUserSaw(t *testing.T) {
	s := &sim{t: t, task: newTask()}
	s.step(at(1))
	request(v1.AnnotationCancelRequested, at(20))(s.task)
	if p := s.step(at(5)); len(p.cancel) != 1 || !p.requestAt.IsZero() || !timeOf(s.task.Status.CancelRequest).Equal(at(20)) {
		t.Fatalf("at 5s a cancel for 20s deletes %v, looks again at %v, records %v; want the run's Job deleted at once", jobNames(p.cancel), p.requestAt, s.task.Status.CancelRequest)
	}

	s = &sim{t: t, task: newTask()}
	s.step(at(1))
	later := at(5).Add(v1.RequestClockSkew + time.Hour)
	request(v1.AnnotationCancelRequested, later)(s.task)
	p := s.step(at(5))
	if len(p.cancel) != 0 || !p.requestAt.Equal(later.Add(-v1.RequestClockSkew)) {
		t.Fatalf("a cancel an hour ahead deletes %v and looks again at %v; want nothing yet and a look at %v", jobNames(p.cancel), p.requestAt, later.Add(-v1.RequestClockSkew))
	}
	if p := s.step(p.requestAt); len(p.cancel) != 1 {
		t.Fatalf("when it becomes pending the cancel deletes %v; want the run's Job", jobNames(p.cancel))
	}
}

// TestACancelJustAheadDropsAnEarlierRunRequestAtOnce: `kubectl task rerun` then `cancel` in the
// same second send the cancel one second after the run request, ahead of the operator's clock.
// The run the cancel drops never starts; a cancel set by hand further ahead than
// v1.RequestClockSkew means "then" and leaves a run request made now alone.
func TestACancelJustAheadDropsAnEarlierRunRequestAtOnce(t *testing.T) {
	done := withStatus(v1.TaskStatus{Phase: v1.PhaseSucceeded, Attempts: 1, CurrentRun: run(0, 1, v1.RunSucceeded, 50)})
	for _, tc := range []struct {
		name    string
		cancel  time.Time
		dropped bool
	}{
		{"one second after the request", at(61), true},
		{"a minute ahead", at(60).Add(v1.RequestClockSkew), true},
		{"further ahead than a minute", at(61).Add(v1.RequestClockSkew), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &sim{t: t, task: newTask(done, request(v1.AnnotationRunRequested, at(60)), request(v1.AnnotationCancelRequested, tc.cancel))}
			p := s.step(at(60))
			if started := p.create != nil; started == tc.dropped {
				t.Fatalf("at 60s the run request started %s; want it dropped: %v", created(p), tc.dropped)
			}
			if wait := !p.requestAt.IsZero(); wait == tc.dropped {
				t.Errorf("looks again at %v; want to wait for the cancel: %v", p.requestAt, !tc.dropped)
			}
			if tc.dropped && !timeOf(s.task.Status.RunRequest).Equal(at(60)) {
				t.Errorf("runRequest %v: the dropped request is recorded as honoured", s.task.Status.RunRequest)
			}
			if p := s.step(tc.cancel); p.create != nil || !timeOf(s.task.Status.CancelRequest).Equal(tc.cancel) {
				t.Errorf("at the cancel's time: started %s, cancelRequest %v", created(p), s.task.Status.CancelRequest)
			}
		})
	}
}

func TestRequestAnnotations(t *testing.T) {
	done := withStatus(v1.TaskStatus{Phase: v1.PhaseSucceeded, Attempts: 1, CurrentRun: run(0, 1, v1.RunSucceeded, 50), RunRequest: mtime(40)})
	tests := []struct {
		name    string
		value   string
		now     time.Time
		run     time.Time
		runAt   time.Time
		invalid string
	}{
		{name: "none", now: at(100)},
		{name: "pending", value: at(60).Format(time.RFC3339), now: at(100), run: at(60)},
		{name: "with an offset", value: at(60).In(time.FixedZone("x", 3600)).Format(time.RFC3339), now: at(100), run: at(60)},
		{name: "honoured already", value: at(40).Format(time.RFC3339), now: at(100)},
		{name: "older than the one honoured", value: at(30).Format(time.RFC3339), now: at(100)},
		{name: "later than the clock: waits", value: at(200).Format(time.RFC3339), now: at(100), runAt: at(200)},
		{name: "not a time", value: "now", now: at(100), invalid: `annotation task.example.com/run-requested of Task t is "now", not an RFC 3339 time`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			task := newTask(done)
			if tc.value != "" {
				task.Annotations = map[string]string{v1.AnnotationRunRequested: tc.value}
			}
			q := readRequests(task, storedRecord(task), tc.now)
			if !q.run.Equal(tc.run) || !q.runAt.Equal(tc.runAt) {
				t.Errorf("pending %v, waiting for %v; want %v, %v", q.run, q.runAt, tc.run, tc.runAt)
			}
			switch {
			case tc.invalid == "" && len(q.invalid) > 0:
				t.Errorf("unexpected error %v", q.invalid)
			case tc.invalid != "" && (len(q.invalid) != 1 || !strings.Contains(q.invalid[0].Error(), tc.invalid)):
				t.Errorf("errors %v, want one saying %q", q.invalid, tc.invalid)
			}
		})
	}
}

// TestARunRequestBeforeAnHonouredCancelDoesNotStart: `rerun` then `cancel` in one second from a
// client whose clock runs ahead send a run request and a cancel a second after it, both ahead of
// the operator's clock. The cancel is honoured at once; when the run request's time comes it is
// still before that cancel, which drops it: no run starts.
func TestARunRequestBeforeAnHonouredCancelDoesNotStart(t *testing.T) {
	done := withStatus(v1.TaskStatus{Phase: v1.PhaseSucceeded, Attempts: 1, CurrentRun: run(0, 1, v1.RunSucceeded, 50)})
	s := &sim{t: t, task: newTask(done, request(v1.AnnotationRunRequested, at(62)), request(v1.AnnotationCancelRequested, at(63)))}
	if p := s.step(at(60)); p.create != nil || !timeOf(s.task.Status.CancelRequest).Equal(at(63)) {
		t.Fatalf("at 60s: started %s, cancelRequest %v; want nothing started and the cancel honoured", created(p), s.task.Status.CancelRequest)
	}
	for _, now := range []time.Time{at(62), at(63), at(100)} {
		if p := s.step(now); p.create != nil {
			t.Fatalf("at %s the run request the cancel dropped started %s", now, created(p))
		}
	}
	if st := s.task.Status; !timeOf(st.RunRequest).Equal(at(62)) {
		t.Errorf("runRequest %v: the dropped request is recorded as honoured", st.RunRequest)
	}
}

// TestARunRequestMadeAfterACancelWasCarriedOutStarts: a cancel drops only a run request made
// before it and known while it is pending. A run request made once the cancel was carried out
// starts, even when it is stamped before that cancel: by a client whose clock is behind, or
// before a cancel set by hand for later and carried out a minute early, or while a cancel
// honoured ahead of the clock still names a later time.
func TestARunRequestMadeAfterACancelWasCarriedOutStarts(t *testing.T) {
	done := withStatus(v1.TaskStatus{Phase: v1.PhaseSucceeded, Attempts: 1, CurrentRun: run(0, 1, v1.RunSucceeded, 50)})
	for _, tc := range []struct {
		name            string
		cancel, carried time.Time // the cancel's time, and when the operator carries it out
		request, madeAt time.Time // the run request's time, and when it is made
	}{
		{"a rerun from a clock behind", at(60), at(60), at(58), at(61)},
		{"a cancel set by hand for later", at(3600), at(3600).Add(-v1.RequestClockSkew), at(3570), at(3570)},
		{"a cancel honoured ahead of the clock", at(100), at(75), at(80), at(80)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &sim{t: t, task: newTask(done, request(v1.AnnotationCancelRequested, tc.cancel))}
			s.step(tc.carried)
			if !timeOf(s.task.Status.CancelRequest).Equal(tc.cancel) {
				t.Fatalf("the cancel was not carried out at %s: cancelRequest %v", tc.carried, s.task.Status.CancelRequest)
			}
			request(v1.AnnotationRunRequested, tc.request)(s.task)
			if p := s.step(tc.madeAt); p.create == nil || !p.create.Scheduled.Equal(tc.request) {
				t.Errorf("the run request for %s made at %s started %s; want its run", tc.request, tc.madeAt, created(p))
			}
		})
	}
}
