package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

const (
	outcome = testenv.OutcomeLabel
	fail    = testenv.OutcomeFail
	hang    = testenv.OutcomeHang
)

func TestSuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("ok", withLabels("team", "blue")))
	got := e.waitPhase(task.Name, v1.PhaseSucceeded)

	st := got.Status
	if st.Attempts != 1 || st.LastJob == nil || st.LastJob.Name != "ok-0-1" || st.StartTime == nil || st.CompletionTime == nil ||
		st.LastError != "" || st.NextRunTime != nil || len(st.ActiveJobs) != 0 || st.ObservedGeneration != got.Generation {
		t.Errorf("status: %+v", st)
	}
	// The Job's completion time, to the second the API keeps.
	if jobs := e.jobs(task.Name); len(jobs) != 1 || jobs[0].Status.CompletionTime == nil || st.LastSuccessfulTime == nil ||
		!st.LastSuccessfulTime.Equal(jobs[0].Status.CompletionTime) {
		t.Errorf("lastSuccessfulTime = %v, want the completion time of its one Job", st.LastSuccessfulTime)
	}
	for _, typ := range []string{v1.ConditionSucceeded, v1.ConditionReady} {
		if c := meta.FindStatusCondition(st.Conditions, typ); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != got.Generation {
			t.Errorf("condition %s = %+v, want True at generation %d", typ, c, got.Generation)
		}
	}
	wantKstatus(t, got, kstatus.CurrentStatus)
	// Finished and recorded: neither the Task nor its Job holds a finalizer (issue #14 item 13).
	testenv.Eventually(e.t, waitTimeout, "the finalizers to go", func(context.Context) (bool, error) {
		task, jobs := e.get(task.Name), e.jobs(task.Name)
		return len(task.Finalizers) == 0 && len(jobs) == 1 && len(jobs[0].Finalizers) == 0,
			fmt.Errorf("task finalizers %v, %d jobs", task.Finalizers, len(jobs))
	})

	jobs := e.jobs(task.Name)
	if len(jobs) != 1 {
		t.Fatalf("%d Jobs, want 1", len(jobs))
	}
	job := jobs[0]
	if job.UID != st.LastJob.UID {
		t.Errorf("lastJob uid %s, Job uid %s", st.LastJob.UID, job.UID)
	}
	if owner := metav1.GetControllerOf(&job); owner == nil || owner.UID != got.UID {
		t.Errorf("Job controller = %+v", owner)
	}
	if *job.Spec.BackoffLimit != 0 || *job.Spec.Parallelism != 1 || *job.Spec.Completions != 1 ||
		job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("Job spec: backoffLimit %d parallelism %d completions %d restartPolicy %s",
			*job.Spec.BackoffLimit, *job.Spec.Parallelism, *job.Spec.Completions, job.Spec.Template.Spec.RestartPolicy)
	}
	for _, labels := range []map[string]string{job.Labels, job.Spec.Template.Labels} {
		if labels["team"] != "blue" || labels[v1.LabelTaskName] != "ok" || labels[v1.LabelRun] != "1" {
			t.Errorf("labels = %v", labels)
		}
	}
	testenv.Eventually(t, waitTimeout, "events", func(context.Context) (bool, error) {
		reasons := e.eventReasons(got)
		return slices.Contains(reasons, v1.EventJobCreated) && slices.Contains(reasons, v1.EventSucceeded), fmt.Errorf("reasons: %v", reasons)
	})
	checkMetrics(t)
}

// checkMetrics reads the controller's metrics from controller-runtime's registry.
func checkMetrics(t *testing.T) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	found := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			found[f.GetName()] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	for _, name := range []string{"taskoperator_runs_started_total", "taskoperator_runs_succeeded_total"} {
		if found[name] < 1 {
			t.Errorf("metric %s = %v, want at least 1", name, found[name])
		}
	}
	for _, name := range []string{"taskoperator_runs_failed_total", "taskoperator_retries_total", "taskoperator_job_creation_errors_total"} {
		if _, ok := found[name]; !ok {
			t.Errorf("metric %s is not registered", name)
		}
	}
}

func TestRetriesExhausted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("doomed", withLabels(outcome, fail), withRetries(2)))
	got := e.waitPhase(task.Name, v1.PhaseFailed)

	if got.Status.Attempts != 3 {
		t.Errorf("attempts = %d, want 3", got.Status.Attempts)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionFailed); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "RetriesExhausted" {
		t.Errorf("Failed condition = %+v", c)
	}
	wantKstatus(t, got, kstatus.FailedStatus)
	// The pod failure policy's FailJob rule names the container, pod and exit code.
	if want := "Job doomed-0-3 failed: PodFailurePolicy: Container task for pod " + e.ns + "/doomed-0-3-"; !strings.HasPrefix(got.Status.LastError, want) ||
		!strings.Contains(got.Status.LastError, " failed with exit code 1 ") || !strings.HasSuffix(got.Status.LastError, " (Error)") {
		t.Errorf("lastError = %q, want the exit code 1 of the pod of doomed-0-3 and why its container ended (Error)", got.Status.LastError)
	}
	t.Logf("lastError = %q", got.Status.LastError)
	var names []string
	for _, j := range e.jobs(task.Name) {
		names = append(names, j.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"doomed-0-1", "doomed-0-2", "doomed-0-3"}) {
		t.Errorf("Jobs = %v, want doomed-0-1..3", names)
	}
	testenv.Eventually(t, waitTimeout, "events", func(context.Context) (bool, error) {
		reasons := e.eventReasons(got)
		return slices.Contains(reasons, v1.EventRetryScheduled) && slices.Contains(reasons, v1.EventRetriesExhausted), fmt.Errorf("reasons: %v", reasons)
	})
}

// TestRetryThenSuccess fails the first attempt by label, then lifts the label: the retry, whose
// pods get the Task's labels anew, succeeds.
func TestRetryThenSuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("flaky", withLabels(outcome, fail), withRetries(3), func(t *v1.Task) {
		t.Spec.Retry.Backoff.Initial = &metav1.Duration{Duration: 3 * time.Second}
	}))
	wantKstatus(t, e.waitPhase(task.Name, v1.PhaseRetrying), kstatus.InProgressStatus)
	e.update(task.Name, func(t *v1.Task) { delete(t.Labels, outcome) })
	got := e.waitPhase(task.Name, v1.PhaseSucceeded)
	if got.Status.Attempts < 2 || got.Status.LastError != "" {
		t.Errorf("status after retry: %s", describe(got))
	}
	if n := len(e.jobs(task.Name)); n != int(got.Status.Attempts) {
		t.Errorf("%d Jobs for %d attempts", n, got.Status.Attempts)
	}
}

func TestParallelism(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("wide", withLabels(testenv.RunSecondsLabel, "2"), func(t *v1.Task) { t.Spec.Parallelism = 3 }))
	testenv.Eventually(t, waitTimeout, "3 pods", func(context.Context) (bool, error) {
		pods := e.pods(task.Name)
		return len(pods) == 3, fmt.Errorf("%d pods", len(pods))
	})
	e.waitPhase(task.Name, v1.PhaseSucceeded)
	jobs := e.jobs(task.Name)
	if len(jobs) != 1 || *jobs[0].Spec.Parallelism != 3 || *jobs[0].Spec.Completions != 3 || jobs[0].Status.Succeeded != 3 {
		t.Errorf("Job: %d jobs, %+v", len(jobs), jobs[0].Spec)
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("slow", withLabels(outcome, hang), func(t *v1.Task) {
		t.Spec.Timeout = &metav1.Duration{Duration: 2 * time.Second}
	}))
	got := e.waitPhase(task.Name, v1.PhaseFailed)
	if !strings.Contains(got.Status.LastError, "DeadlineExceeded") {
		t.Errorf("lastError = %q, want DeadlineExceeded", got.Status.LastError)
	}
	if jobs := e.jobs(task.Name); len(jobs) != 1 || ptr.Deref(jobs[0].Spec.ActiveDeadlineSeconds, 0) != 2 {
		t.Errorf("Jobs: %d, activeDeadlineSeconds %v", len(jobs), jobs[0].Spec.ActiveDeadlineSeconds)
	}
}

func TestTTL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("brief", func(t *v1.Task) { t.Spec.TTLSecondsAfterFinished = ptr.To[int32](1) }))
	e.waitPhase(task.Name, v1.PhaseSucceeded)
	testenv.Eventually(t, waitTimeout, "the Job to be deleted by its TTL", func(context.Context) (bool, error) {
		n := len(e.jobs(task.Name))
		return n == 0, fmt.Errorf("%d Jobs", n)
	})
	time.Sleep(2 * time.Second) // long enough for a wrong reaction to show
	got := e.get(task.Name)
	if got.Status.Phase != v1.PhaseSucceeded || got.Status.Attempts != 1 || len(e.jobs(task.Name)) != 0 {
		t.Errorf("after the TTL: %s, %d Jobs", describe(got), len(e.jobs(task.Name)))
	}
}

func TestSuspendResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	// Created suspended: no Job until resumed.
	idle := e.create(e.task("idle", func(t *v1.Task) { t.Spec.Suspend = true }))
	e.waitPhase(idle.Name, v1.PhaseSuspended)
	if n := len(e.jobs(idle.Name)); n != 0 {
		t.Fatalf("%d Jobs for a suspended Task", n)
	}
	e.update(idle.Name, func(t *v1.Task) { t.Spec.Suspend = false })
	e.waitPhase(idle.Name, v1.PhaseSucceeded)

	// Suspended mid-run: the Job is suspended too, and resumed with the Task.
	busy := e.create(e.task("busy", withLabels(outcome, hang)))
	e.waitPhase(busy.Name, v1.PhaseRunning)
	e.update(busy.Name, func(t *v1.Task) { t.Spec.Suspend = true })
	e.waitPhase(busy.Name, v1.PhaseSuspended)
	testenv.Eventually(t, waitTimeout, "the Job to be suspended", func(context.Context) (bool, error) {
		jobs := e.jobs(busy.Name)
		return len(jobs) == 1 && ptr.Deref(jobs[0].Spec.Suspend, false), fmt.Errorf("%d jobs", len(jobs))
	})
	e.update(busy.Name, func(t *v1.Task) { t.Spec.Suspend = false })
	e.waitPhase(busy.Name, v1.PhaseRunning)
	testenv.Eventually(t, waitTimeout, "the Job to be resumed", func(context.Context) (bool, error) {
		jobs := e.jobs(busy.Name)
		return len(jobs) == 1 && !ptr.Deref(jobs[0].Spec.Suspend, false), fmt.Errorf("%d jobs", len(jobs))
	})
	if got := e.get(busy.Name); got.Status.Attempts != 1 {
		t.Errorf("suspend and resume started another run: %s", describe(got))
	}
}

// TestScheduleForbid: while a run is active, due times are held back, not consumed (issue #14
// item 8); once it ends, the latest held-back time starts at once, and runs never overlap.
func TestScheduleForbid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.watchJobs()
	task := e.create(e.task("cron-forbid", withLabels(testenv.RunSecondsLabel, "7"), func(t *v1.Task) {
		t.Spec.Schedule = &v1.Schedule{Cron: "@every 3s", ConcurrencyPolicy: v1.ForbidConcurrent}
	}))
	testenv.Eventually(e.t, waitTimeout, "two finished runs", func(context.Context) (bool, error) {
		jobs := w.of(task.Name)
		return len(jobs) >= 2 && jobs[1].Outcome != "", fmt.Errorf("%v", jobs)
	})
	jobs := w.of(task.Name)
	first, second := jobs[0], jobs[1]
	held, err := time.Parse(time.RFC3339, second.Scheduled)
	if err != nil {
		t.Fatalf("second run's scheduled time %q: %v", second.Scheduled, err)
	}
	if held.After(first.Finished) {
		t.Errorf("the second run is for %v, after the first ended at %v: the time held back during the first was lost", held, first.Finished)
	}
	if second.Created.Before(first.Finished) {
		t.Errorf("Forbid: the second run started at %v, before the first ended at %v", second.Created, first.Finished)
	}
	got := e.get(task.Name)
	if got.Status.MissedRuns < 1 || got.Status.LastScheduleTime == nil || got.Status.LastScheduleTime.Time.Before(held) {
		t.Errorf("status: %s, lastScheduleTime %v", describe(got), got.Status.LastScheduleTime)
	}
	wantKstatus(t, got, kstatus.CurrentStatus)
	w.checkOnce(t)
}

func TestScheduleReplace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("cron-replace", withLabels(outcome, hang), func(t *v1.Task) {
		t.Spec.Schedule = &v1.Schedule{Cron: "@every 3s", ConcurrencyPolicy: v1.ReplaceConcurrent}
	}))
	var first string
	testenv.Eventually(t, waitTimeout, "a first run", func(context.Context) (bool, error) {
		got := e.get(task.Name)
		if got.Status.LastJob != nil {
			first = got.Status.LastJob.Name
		}
		return first != "", errors.New(describe(got))
	})
	testenv.Eventually(t, waitTimeout, "the first run replaced", func(context.Context) (bool, error) {
		got := e.get(task.Name)
		replaced := got.Status.LastJob != nil && got.Status.LastJob.Name != first
		err := e.c.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: first}, &batchv1.Job{})
		return replaced && apierrors.IsNotFound(err), errors.New(describe(got))
	})
	got := e.get(task.Name)
	if len(got.Status.ActiveJobs) != 1 || got.Status.MissedRuns != 0 {
		t.Errorf("Replace: %s", describe(got))
	}
}

func TestScheduleHistoryLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("cron-history", func(t *v1.Task) {
		t.Spec.Schedule = &v1.Schedule{Cron: "@every 2s", ConcurrencyPolicy: v1.ForbidConcurrent}
		t.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](1)
	}))
	seen := map[string]bool{}
	testenv.Eventually(t, waitTimeout, "three runs with one succeeded Job kept", func(context.Context) (bool, error) {
		succeeded := 0
		for _, j := range e.jobs(task.Name) {
			seen[j.Name] = true
			for _, c := range j.Status.Conditions {
				if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue && j.DeletionTimestamp == nil {
					succeeded++
				}
			}
		}
		return len(seen) >= 3 && succeeded == 1, fmt.Errorf("%d runs seen, %d succeeded Jobs", len(seen), succeeded)
	})
	if c := meta.FindStatusCondition(e.get(task.Name).Status.Conditions, v1.ConditionSucceeded); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Succeeded condition of a scheduled Task = %+v", c)
	}
}

func TestDeletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("gone", withLabels(outcome, hang), func(t *v1.Task) { t.Spec.Parallelism = 2 }))
	e.waitPhase(task.Name, v1.PhaseRunning)
	testenv.Eventually(t, waitTimeout, "pods running", func(context.Context) (bool, error) {
		n := len(e.pods(task.Name))
		return n == 2, fmt.Errorf("%d pods", n)
	})
	if err := e.c.Delete(t.Context(), task); err != nil {
		t.Fatalf("delete task: %v", err)
	}
	testenv.Eventually(t, waitTimeout, "the Task, its Jobs and pods to be gone", func(context.Context) (bool, error) {
		err := e.c.Get(t.Context(), client.ObjectKeyFromObject(task), &v1.Task{})
		jobs, pods := len(e.jobs(task.Name)), len(e.pods(task.Name))
		return apierrors.IsNotFound(err) && jobs == 0 && pods == 0, fmt.Errorf("task err %v, %d jobs, %d pods", err, jobs, pods)
	})
}

// TestRestart stops the operator while a run is active and starts a new one: it adopts the
// running Job and creates no other.
func TestRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("survivor", withLabels(testenv.RunSecondsLabel, "6")))
	wantKstatus(t, e.waitPhase(task.Name, v1.PhaseRunning), kstatus.InProgressStatus)
	e.op.stop(t)
	e.op = e.startOperator()
	got := e.waitPhase(task.Name, v1.PhaseSucceeded)
	if jobs := e.jobs(task.Name); len(jobs) != 1 || got.Status.Attempts != 1 {
		t.Errorf("after restart: %d Jobs, %s", len(jobs), describe(got))
	}

	// Stopped again right after a Task is created, before (or while) it starts its Job.
	quick := e.create(e.task("quick"))
	testenv.Eventually(t, waitTimeout, "a Job", func(context.Context) (bool, error) {
		n := len(e.jobs(quick.Name))
		return n > 0, fmt.Errorf("%d jobs", n)
	})
	e.op.stop(t)
	e.op = e.startOperator()
	got = e.waitPhase(quick.Name, v1.PhaseSucceeded)
	if jobs := e.jobs(quick.Name); len(jobs) != 1 || got.Status.Attempts != 1 {
		t.Errorf("after second restart: %d Jobs, %s", len(jobs), describe(got))
	}
}

// TestAPIWrites counts what the operator writes: to bring a Task to Running and to Succeeded,
// and nothing at all for a Task at rest, even when something makes it reconcile.
func TestAPIWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.op.writes.take()

	task := e.create(e.task("counted", withLabels(testenv.RunSecondsLabel, "3")))
	e.waitPhase(task.Name, v1.PhaseRunning)
	writes, events := e.op.writes.take()
	t.Logf("API writes to reach Running: %d (%s) plus %d Event(s)", len(writes), strings.Join(writes, ", "), len(events))
	e.waitPhase(task.Name, v1.PhaseSucceeded)
	time.Sleep(time.Second) // let trailing reconciles of the Job's last updates run
	more, moreEvents := e.op.writes.take()
	t.Logf("API writes from Running to Succeeded: %d (%s) plus %d Event(s); total %d writes, %d Events",
		len(more), strings.Join(more, ", "), len(moreEvents), len(writes)+len(more), len(events)+len(moreEvents))

	// At rest: poke the Task (an annotation makes it reconcile) and expect no write.
	for i := range 3 {
		e.update(task.Name, func(t *v1.Task) {
			if t.Annotations == nil {
				t.Annotations = map[string]string{}
			}
			t.Annotations["poke"] = fmt.Sprint(i)
		})
		time.Sleep(time.Second)
	}
	if writes, events := e.op.writes.take(); len(writes)+len(events) != 0 {
		t.Errorf("a finished Task at rest caused writes: %q, events %q", writes, events)
	}

	// A running Task at rest too.
	busy := e.create(e.task("busy", withLabels(outcome, hang)))
	e.waitPhase(busy.Name, v1.PhaseRunning)
	time.Sleep(2 * time.Second)
	e.op.writes.take()
	e.update(busy.Name, func(t *v1.Task) { t.Annotations = map[string]string{"poke": "1"} })
	time.Sleep(2 * time.Second)
	if writes, events := e.op.writes.take(); len(writes)+len(events) != 0 {
		t.Errorf("a running Task at rest caused writes: %q, events %q", writes, events)
	}

	// And a suspended one.
	paused := e.create(e.task("paused", func(t *v1.Task) { t.Spec.Suspend = true }))
	e.waitPhase(paused.Name, v1.PhaseSuspended)
	time.Sleep(time.Second)
	e.op.writes.take()
	e.update(paused.Name, func(t *v1.Task) { t.Annotations = map[string]string{"poke": "1"} })
	time.Sleep(2 * time.Second)
	if writes, events := e.op.writes.take(); len(writes)+len(events) != 0 {
		t.Errorf("a suspended Task at rest caused writes: %q, events %q", writes, events)
	}
}
