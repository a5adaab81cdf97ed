package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

// The tests of issue #14, "exactly-once runs that survive restarts, TTL, cache lag and schedule
// edits", that need the API server, the TTL controller or a restart. Each watches every Job of
// its namespace and fails if any attempt of any run had two Jobs.

// TestTTLZeroWhileOperatorAway is item 1: the operator is stopped while the run's Job finishes
// and its TTL of 0 deletes it. The Job's finalizer keeps it readable until the restarted operator
// has recorded the success: no retry, Succeeded, even with maxRetries 0.
func TestTTLZeroWhileOperatorAway(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.watchJobs()
	task := e.create(e.task("brief", withLabels(testenv.RunSecondsLabel, "3"), func(t *v1.Task) {
		t.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
	}))
	testenv.Eventually(e.t, waitTimeout, "the run to be recorded as started", func(context.Context) (bool, error) {
		got := e.get(task.Name)
		return len(got.Status.ActiveJobs) == 1, errors.New(describe(got))
	})
	e.op.stop(t)
	testenv.Eventually(e.t, waitTimeout, "the TTL controller to delete the finished Job", func(context.Context) (bool, error) {
		jobs := e.jobs(task.Name)
		return len(jobs) == 1 && jobs[0].DeletionTimestamp != nil && isComplete(&jobs[0]), fmt.Errorf("%v", w.of(task.Name))
	})
	e.op = e.startOperator()
	got := e.waitPhase(task.Name, v1.PhaseSucceeded)
	if got.Status.Attempts != 1 || got.Status.CurrentRun == nil || got.Status.CurrentRun.Outcome != v1.RunSucceeded {
		t.Errorf("after the restart: %s, run %+v", describe(got), got.Status.CurrentRun)
	}
	wantKstatus(t, got, kstatus.CurrentStatus)
	testenv.Eventually(e.t, waitTimeout, "the Job to go and the Task to be released", func(context.Context) (bool, error) {
		got := e.get(task.Name)
		n := len(e.jobs(task.Name))
		return n == 0 && len(got.Finalizers) == 0, fmt.Errorf("%d Jobs, finalizers %v", n, got.Finalizers)
	})
	if names := w.names(task.Name); len(names) != 1 {
		t.Errorf("Jobs %v, want exactly one run", names)
	}
	w.checkOnce(t)
}

// TestCacheLag is item 2: the operator's cache never shows the Job it created (a lagging cache,
// or a policy that stripped its labels). Past the expectation timeout the operator reads the Job
// from the API server, follows it there, and never starts a second attempt beside it, also not
// after a restart.
func TestCacheLag(t *testing.T) {
	t.Parallel()
	e := newEnvWithoutOperator(t)
	w := e.watchJobs()
	hidden := func(name string) bool { return strings.HasPrefix(name, "lag-") }
	e.op = e.startOperatorWith(operatorOptions{hide: hidden, expectationTimeout: 2 * time.Second})
	task := e.create(e.task("lag", withLabels(testenv.RunSecondsLabel, "8")))
	testenv.Eventually(e.t, waitTimeout, "the Job, read past the cache, to be recorded", func(context.Context) (bool, error) {
		got := e.get(task.Name)
		return got.Status.Phase == v1.PhaseRunning && len(got.Status.ActiveJobs) == 1, errors.New(describe(got))
	})
	e.op.stop(t)
	e.op = e.startOperatorWith(operatorOptions{hide: hidden, expectationTimeout: 2 * time.Second})
	got := e.waitPhase(task.Name, v1.PhaseSucceeded)
	if got.Status.Attempts != 1 {
		t.Errorf("after the run: %s", describe(got))
	}
	if names := w.names(task.Name); !slices.Equal(names, []string{"lag-0-1"}) {
		t.Errorf("Jobs %v, want only lag-0-1", names)
	}
	w.checkOnce(t)
}

// TestDeleteActiveRetryJob is item 3: deleting a scheduled Task's active retry Job cancels that
// attempt. It is recorded as failed; it is never re-created under its name.
func TestDeleteActiveRetryJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.watchJobs()
	task := e.create(e.task("cancel", withLabels(outcome, fail), withRetries(1), func(t *v1.Task) {
		t.Spec.Schedule = &v1.Schedule{Cron: "@every 30s", ConcurrencyPolicy: v1.ForbidConcurrent}
	}))
	testenv.Eventually(e.t, waitTimeout, "the first attempt", func(context.Context) (bool, error) {
		names := w.names(task.Name)
		return len(names) == 1, fmt.Errorf("%v", names)
	})
	e.update(task.Name, func(t *v1.Task) { t.Labels[outcome] = hang }) // the retry hangs
	var retry string
	testenv.Eventually(e.t, waitTimeout, "the retry to run", func(context.Context) (bool, error) {
		got := e.get(task.Name)
		if got.Status.Attempts == 2 && len(got.Status.ActiveJobs) == 1 {
			retry = got.Status.ActiveJobs[0].Name
		}
		return retry != "", errors.New(describe(got))
	})
	if err := e.c.Delete(t.Context(), &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: retry}},
		client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatalf("delete the retry's Job: %v", err)
	}
	testenv.Eventually(e.t, waitTimeout, "the deleted attempt to be recorded as failed and its Job to go", func(context.Context) (bool, error) {
		got := e.get(task.Name)
		err := e.c.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: retry}, &batchv1.Job{})
		recorded := got.Status.CurrentRun != nil && got.Status.CurrentRun.Attempt == 2 && got.Status.CurrentRun.Outcome == v1.RunFailed
		return recorded && apierrors.IsNotFound(err), fmt.Errorf("%s; job: %v", describe(got), err)
	})
	got := e.get(task.Name)
	if !strings.Contains(got.Status.LastError, "deleted before it finished") || !meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionFailed) {
		t.Errorf("after the deletion: %s, conditions %+v", describe(got), got.Status.Conditions)
	}
	seen := 0
	for _, j := range w.of(task.Name) {
		if j.Name == retry {
			seen++
		}
		if j.Attempt == "3" {
			t.Errorf("a third attempt %s ran although maxRetries is 1", j.Name)
		}
	}
	if seen != 1 {
		t.Errorf("Job %s was created %d times", retry, seen)
	}
	w.checkOnce(t)
}

// TestDeleteActiveOneShotJob: deleting the active Job of a one-shot Task with retries left fails
// that attempt; the next attempt is a new Job after the backoff.
func TestDeleteActiveOneShotJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.watchJobs()
	task := e.create(e.task("stop", withLabels(outcome, hang), withRetries(1)))
	testenv.Eventually(e.t, waitTimeout, "the first attempt to run", func(context.Context) (bool, error) {
		got := e.get(task.Name)
		return got.Status.Phase == v1.PhaseRunning, errors.New(describe(got))
	})
	e.update(task.Name, func(t *v1.Task) { delete(t.Labels, outcome) })
	if err := e.c.Delete(t.Context(), &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "stop-0-1"}},
		client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatalf("delete the Job: %v", err)
	}
	requireDeletedAttemptRetriedOnce(t, e, w, task.Name)
}

// requireDeletedAttemptRetriedOnce waits for the one-shot Task name to succeed and requires it
// took its first attempt's Job, deleted, and exactly one retry, each Job created once.
func requireDeletedAttemptRetriedOnce(t *testing.T, e *env, w *jobWatch, name string) {
	t.Helper()
	got := e.waitPhase(name, v1.PhaseSucceeded)
	if got.Status.Attempts != 2 {
		t.Errorf("after the deletion: %s; want the deleted attempt failed and one retry", describe(got))
	}
	if names, want := w.names(name), []string{name + "-0-1", name + "-0-2"}; !slices.Equal(names, want) {
		t.Errorf("Jobs %v, want %v", names, want)
	}
	w.checkOnce(t)
}

// TestAPodEndingAfterItsJobsDeletionIsNotCountedAndTheAttemptIsRetriedOnce: the Job
// controller stops tracking the pods of a Job once it sees the Job deleted (it takes their
// batch.kubernetes.io/job-tracking finalizer off, running or not, and counts only pods that had
// already ended), so a pod that exits 0 two seconds after the deletion, within the settle time,
// is never counted: the attempt is the deleted one, failed, and exactly one retry runs.
func TestAPodEndingAfterItsJobsDeletionIsNotCountedAndTheAttemptIsRetriedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.watchJobs()
	task := e.create(e.task("late", withLabels(testenv.RunSecondsLabel, "120"), withRetries(1)))
	var pod corev1.Pod
	testenv.Eventually(t, waitTimeout, "the pod of late-0-1 to run", func(context.Context) (bool, error) {
		pods := e.pods(task.Name)
		if len(pods) != 1 || pods[0].Status.Phase != corev1.PodRunning {
			return false, fmt.Errorf("%d pods", len(pods))
		}
		pod = pods[0]
		return true, nil
	})
	e.update(task.Name, func(t *v1.Task) { delete(t.Labels, testenv.RunSecondsLabel) }) // the retry ends at once
	if err := e.c.Delete(t.Context(), &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "late-0-1"}},
		client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatalf("delete the Job: %v", err)
	}
	// The stand-in kubelet counts a pod's run time from its latest change: it exits 0 in 2 s.
	if err := e.c.Patch(t.Context(), &pod, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+testenv.RunSecondsLabel+`":"2"}}}`))); err != nil {
		t.Fatalf("end the pod in 2 s: %v", err)
	}
	testenv.Eventually(t, 20*time.Second, "the deleted Job's pod to succeed", func(ctx context.Context) (bool, error) {
		p := &corev1.Pod{}
		err := e.c.Get(ctx, client.ObjectKeyFromObject(&pod), p)
		return err == nil && p.Status.Phase == corev1.PodSucceeded, fmt.Errorf("pod %s %v", p.Status.Phase, err)
	})
	requireDeletedAttemptRetriedOnce(t, e, w, task.Name)
}

// TestScheduledRetryAfterTTL is item 4: a scheduled run's failed Job is deleted by a TTL of 0
// long before its retry is due. The retry happens anyway: it is in the status, not in the Job.
func TestScheduledRetryAfterTTL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.watchJobs()
	task := e.create(e.task("ttl-retry", withLabels(outcome, fail), withRetries(2), func(t *v1.Task) {
		t.Spec.Schedule = &v1.Schedule{Cron: "@every 25s", ConcurrencyPolicy: v1.ForbidConcurrent}
		t.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
		t.Spec.Retry.Backoff.Initial = &metav1.Duration{Duration: 6 * time.Second}
		t.Spec.Retry.Backoff.Max = &metav1.Duration{Duration: 6 * time.Second}
	}))
	testenv.Eventually(e.t, waitTimeout, "the first attempt", func(context.Context) (bool, error) {
		names := w.names(task.Name)
		return len(names) == 1, fmt.Errorf("%v", names)
	})
	e.update(task.Name, func(t *v1.Task) { delete(t.Labels, outcome) }) // the retry succeeds
	testenv.Eventually(e.t, waitTimeout, "the retry of the same run to succeed", func(context.Context) (bool, error) {
		got := e.get(task.Name)
		r := got.Status.CurrentRun
		return r != nil && r.Attempt == 2 && r.Outcome == v1.RunSucceeded, errors.New(describe(got))
	})
	jobs := w.of(task.Name)
	if len(jobs) < 2 || jobs[0].Scheduled != jobs[1].Scheduled || jobs[0].Outcome != "Failed" || !jobs[0].Deleted {
		t.Errorf("Jobs %v: want a failed first attempt deleted by its TTL, then a retry of the same run", jobs)
	}
	w.checkOnce(t)
}

// TestScheduleRemoved is item 5: without its schedule a Task is one-shot, and its latest run is
// its only run. An active scheduled run finishes and decides the outcome (it is not a Job that
// "disappeared"); a Task whose schedule never fired runs once.
func TestScheduleRemoved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.watchJobs()
	busy := e.create(e.task("was-scheduled", withLabels(testenv.RunSecondsLabel, "6"), func(t *v1.Task) {
		t.Spec.Schedule = &v1.Schedule{Cron: "@every 3s", ConcurrencyPolicy: v1.ForbidConcurrent}
	}))
	idle := e.create(e.task("never-fired", func(t *v1.Task) {
		t.Spec.Schedule = &v1.Schedule{Cron: "@every 1h"}
	}))
	testenv.Eventually(e.t, waitTimeout, "a scheduled run to be active", func(context.Context) (bool, error) {
		got := e.get(busy.Name)
		return len(got.Status.ActiveJobs) == 1, errors.New(describe(got))
	})
	e.waitPhase(idle.Name, v1.PhaseScheduled)
	for _, name := range []string{busy.Name, idle.Name} {
		e.update(name, func(t *v1.Task) { t.Spec.Schedule = nil })
	}
	got := e.waitPhase(busy.Name, v1.PhaseSucceeded)
	if got.Status.Attempts != 1 || !strings.HasSuffix(got.Status.LastJob.Name, "-1") || got.Status.LastError != "" {
		t.Errorf("the scheduled run did not become the Task's only run: %s", describe(got))
	}
	if names := w.names(busy.Name); len(names) != 1 {
		t.Errorf("Jobs %v, want the one scheduled run", names)
	}
	if reasons := e.eventReasons(got); slices.Contains(reasons, v1.EventRunFailed) {
		t.Errorf("events %v: the active run was reported as failed", reasons)
	}
	once := e.waitPhase(idle.Name, v1.PhaseSucceeded)
	if names := w.names(idle.Name); !slices.Equal(names, []string{"never-fired-0-1"}) || once.Status.Attempts != 1 {
		t.Errorf("a Task whose schedule never fired: Jobs %v, %s; want it to run once", names, describe(once))
	}
	w.checkOnce(t)
}

// TestScheduleAdded is item 8: a schedule added to an old Task counts from when it was added:
// no catch-up run, nothing missed.
func TestScheduleAdded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.watchJobs()
	task := e.create(e.task("late-cron"))
	e.waitPhase(task.Name, v1.PhaseSucceeded)
	added := time.Now().Truncate(time.Second)
	e.update(task.Name, func(t *v1.Task) { t.Spec.Schedule = &v1.Schedule{Cron: "@every 4s"} })
	testenv.Eventually(e.t, waitTimeout, "a scheduled run", func(context.Context) (bool, error) {
		got := e.get(task.Name)
		return got.Status.LastScheduleTime != nil && got.Status.CurrentRun.Outcome == v1.RunSucceeded, errors.New(describe(got))
	})
	got := e.get(task.Name)
	since := got.Status.ObservedSchedule.Since.Time
	if got.Status.MissedRuns != 0 || since.Before(added) || !got.Status.LastScheduleTime.After(since) {
		t.Errorf("schedule added at %v: since %v, %s, lastScheduleTime %v", added, since, describe(got), got.Status.LastScheduleTime)
	}
	for _, j := range w.of(task.Name)[1:] {
		if sched, err := time.Parse(time.RFC3339, j.Scheduled); err != nil || !sched.After(since) {
			t.Errorf("Job %s is for %q, before the schedule applied (%v)", j.Name, j.Scheduled, since)
		}
	}
	w.checkOnce(t)
}

// TestDeleteWithoutOperator is item 13: a finished Task and a scheduled Task between runs hold
// no finalizer, so they delete, and their Jobs are collected, with no operator running.
func TestDeleteWithoutOperator(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	done := e.create(e.task("done"))
	idle := e.create(e.task("idle-cron", func(t *v1.Task) { t.Spec.Schedule = &v1.Schedule{Cron: "@every 1h"} }))
	e.waitPhase(done.Name, v1.PhaseSucceeded)
	e.waitPhase(idle.Name, v1.PhaseScheduled)
	testenv.Eventually(e.t, waitTimeout, "the finalizers to go", func(context.Context) (bool, error) {
		a, b := e.get(done.Name), e.get(idle.Name)
		return len(a.Finalizers)+len(b.Finalizers) == 0, fmt.Errorf("%v %v", a.Finalizers, b.Finalizers)
	})
	e.op.stop(t)
	for _, task := range []*v1.Task{done, idle} {
		if err := e.c.Delete(t.Context(), task); err != nil {
			t.Fatalf("delete %s: %v", task.Name, err)
		}
	}
	testenv.Eventually(e.t, waitTimeout, "the Tasks and their Jobs to be gone without the operator", func(context.Context) (bool, error) {
		var tasks v1.TaskList
		if err := e.c.List(t.Context(), &tasks, client.InNamespace(e.ns)); err != nil {
			return false, err
		}
		jobs := len(e.jobs(done.Name))
		return len(tasks.Items) == 0 && jobs == 0, fmt.Errorf("%d Tasks, %d Jobs", len(tasks.Items), jobs)
	})
}

// TestEviction is item 11: an evicted pod (DisruptionTarget) is replaced by the Job controller and
// does not cost the Task an attempt.
func TestEviction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("evicted", withLabels(testenv.RunSecondsLabel, "6")))
	var first corev1.Pod
	testenv.Eventually(e.t, waitTimeout, "the pod to run", func(context.Context) (bool, error) {
		pods := e.pods(task.Name)
		if len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning {
			first = pods[0]
			return true, nil
		}
		return false, fmt.Errorf("%d pods", len(pods))
	})
	cs, err := kubernetes.NewForConfig(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: first.Name}}
	if err := cs.CoreV1().Pods(e.ns).EvictV1(t.Context(), eviction); err != nil {
		t.Fatalf("evict %s: %v", first.Name, err)
	}
	testenv.Eventually(e.t, waitTimeout, "a second pod", func(context.Context) (bool, error) {
		pods := e.pods(task.Name)
		return slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.UID != first.UID }), fmt.Errorf("%d pods", len(pods))
	})
	got := e.waitPhase(task.Name, v1.PhaseSucceeded)
	if got.Status.Attempts != 1 {
		t.Errorf("an eviction cost an attempt: %s", describe(got))
	}
	jobs := e.jobs(task.Name)
	if len(jobs) != 1 || jobs[0].Status.Succeeded != 1 {
		t.Fatalf("Jobs: %d", len(jobs))
	}
}

// TestDeletedPodFailsWithItsExitCode deletes a run's running pod (no eviction, so no
// DisruptionTarget): its container is killed (exit code 137), the pod failure policy's FailJob
// rule fails the Job, and lastError names that exit code and the pod.
func TestDeletedPodFailsWithItsExitCode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("killed", withLabels(outcome, hang), withRetries(0)))
	var pod corev1.Pod
	testenv.Eventually(e.t, waitTimeout, "the pod to run", func(context.Context) (bool, error) {
		pods := e.pods(task.Name)
		if len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning {
			pod = pods[0]
			return true, nil
		}
		return false, fmt.Errorf("%d pods", len(pods))
	})
	if err := e.c.Delete(t.Context(), &pod); err != nil {
		t.Fatalf("delete pod %s: %v", pod.Name, err)
	}
	got := e.waitPhase(task.Name, v1.PhaseFailed)
	want := fmt.Sprintf("Job killed-0-1 failed: PodFailurePolicy: Container task for pod %s/%s failed with exit code 137 ", e.ns, pod.Name)
	if !strings.HasPrefix(got.Status.LastError, want) {
		t.Errorf("lastError = %q, want it to start %q", got.Status.LastError, want)
	}
}

func isComplete(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// TestLabelsStrippedByPolicy is item 2 with a real policy: a MutatingAdmissionPolicy strips the
// task.example.com/name label from every Job of the namespace, on create and update, so the
// operator's cache never sees them. The operator still finds its Job (by name and owner, read
// from the API server), follows it, survives a restart, and never starts a second one.
func TestLabelsStrippedByPolicy(t *testing.T) {
	t.Parallel()
	e := newEnvWithoutOperator(t)
	w := e.watchJobs()
	stripLabel(t, e)
	e.op = e.startOperatorWith(operatorOptions{expectationTimeout: 2 * time.Second})
	task := e.create(e.task("stripped", withLabels(testenv.RunSecondsLabel, "8")))
	testenv.Eventually(e.t, waitTimeout, "the Job, found past the cache, to be recorded", func(context.Context) (bool, error) {
		got := e.get(task.Name)
		return got.Status.Phase == v1.PhaseRunning && len(got.Status.ActiveJobs) == 1, errors.New(describe(got))
	})
	e.op.stop(t)
	e.op = e.startOperatorWith(operatorOptions{expectationTimeout: 2 * time.Second})
	got := e.waitPhase(task.Name, v1.PhaseSucceeded)
	if got.Status.Attempts != 1 {
		t.Errorf("after the run: %s", describe(got))
	}
	if names := w.names(task.Name); !slices.Equal(names, []string{"stripped-0-1"}) {
		t.Errorf("Jobs %v, want only stripped-0-1", names)
	}
	job := &batchv1.Job{}
	if err := e.c.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: "stripped-0-1"}, job); err != nil {
		t.Fatal(err)
	}
	if _, ok := job.Labels[v1.LabelTaskName]; ok {
		t.Errorf("the policy did not strip the label: %v", job.Labels)
	}
	testenv.Eventually(e.t, waitTimeout, "the Job to be released", func(context.Context) (bool, error) {
		if err := e.c.Get(t.Context(), client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		return len(job.Finalizers) == 0, fmt.Errorf("%v", job.Finalizers)
	})
	w.checkOnce(t)
}

// stripLabel installs a MutatingAdmissionPolicy that removes task.example.com/name from the
// Jobs of the env's namespace, and waits until the API server applies it.
func stripLabel(t *testing.T, e *env) {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{admissionv1.AddToScheme, batchv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(e.cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	name := "strip-task-label-" + e.ns
	policy := &admissionv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
				},
			}}},
			Mutations: []admissionv1.Mutation{{
				PatchType: admissionv1.PatchTypeJSONPatch,
				JSONPatch: &admissionv1.JSONPatch{Expression: `has(object.metadata.labels) && "task.example.com/name" in object.metadata.labels ? ` +
					`[JSONPatch{op: "remove", path: "/metadata/labels/task.example.com~1name"}] : []`},
			}},
			FailurePolicy:      ptr.To(admissionv1.Fail),
			ReinvocationPolicy: admissionv1.NeverReinvocationPolicy,
		},
	}
	binding := &admissionv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName: name,
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: e.ns},
			}},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := c.Create(t.Context(), obj); err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
	}
	probe := e.task("probe")
	testenv.Eventually(e.t, waitTimeout, "the policy to strip labels", func(context.Context) (bool, error) {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, GenerateName: "probe-", Labels: map[string]string{v1.LabelTaskName: probe.Name}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "x"}},
			}}},
		}
		if err := c.Create(t.Context(), job, client.DryRunAll); err != nil {
			return false, err
		}
		_, kept := job.Labels[v1.LabelTaskName]
		return !kept, fmt.Errorf("%v", job.Labels)
	})
}

// TestScheduledFailureSurvivesJobRemoval is item 6: removing the failed run's Job neither makes
// a scheduled Task Ready again nor clears lastError. The outcome is in the record, not the Job.
func TestScheduledFailureSurvivesJobRemoval(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.create(e.task("cron-fails", withLabels(outcome, fail), func(t *v1.Task) {
		t.Spec.Schedule = &v1.Schedule{Cron: "@every 40s", ConcurrencyPolicy: v1.ForbidConcurrent}
	}))
	var failed *v1.Task
	testenv.Eventually(e.t, waitTimeout, "the run to fail for good", func(context.Context) (bool, error) {
		failed = e.get(task.Name)
		return meta.IsStatusConditionTrue(failed.Status.Conditions, v1.ConditionFailed), errors.New(describe(failed))
	})
	ready := meta.FindStatusCondition(failed.Status.Conditions, v1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || failed.Status.LastError == "" {
		t.Fatalf("after the failure: Ready %+v, %s", ready, describe(failed))
	}
	job := failed.Status.LastJob.Name
	if err := e.c.Delete(t.Context(), &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: job}},
		client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(e.t, waitTimeout, "the failed run's Job to be gone", func(context.Context) (bool, error) {
		err := e.c.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: job}, &batchv1.Job{})
		return apierrors.IsNotFound(err), fmt.Errorf("%v", err)
	})
	got := e.get(task.Name)
	if got.Status.LastJob.Name != job {
		t.Skipf("the next run started before the check (%s); nothing to conclude", got.Status.LastJob.Name)
	}
	if meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionReady) || got.Status.LastError != failed.Status.LastError {
		t.Errorf("after the Job's removal: Ready %+v, lastError %q (was %q)",
			meta.FindStatusCondition(got.Status.Conditions, v1.ConditionReady), got.Status.LastError, failed.Status.LastError)
	}
	wantKstatus(t, got, kstatus.InProgressStatus)
}
