package invariants

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	v1 "example.com/task-operator/apis/v1"
)

// task judges one Task's end state against its Jobs.
func (c *checker) task(task *v1.Task) {
	st := task.Status
	jobs := c.byTask[task.Name]
	runs := runsOf(jobs)
	// Every violation names what it was judged from: the Task's Jobs and its run record.
	violate := func(cat Category, format string, args ...any) {
		c.r.violate(cat, 1, format+" [%s]", append(args, describeTask(task, jobs))...)
	}
	c.r.Runs += len(runs)
	for _, run := range runs {
		// Once an attempt completed, the run is done: no later attempt.
		done := ""
		for _, j := range run {
			if done != "" {
				violate(RerunAfterSuccess, "%s: %s ran after %s completed", task.Name, j.Name, done)
			}
			if j.Outcome == Complete {
				done = j.Name
			}
		}
	}
	if len(task.Finalizers) > 0 {
		violate(FinalizersLeft, "Task %s still holds %v", task.Name, task.Finalizers)
	}
	switch st.Phase {
	case v1.PhaseSucceeded:
		c.r.Succeeded++
	case v1.PhaseFailed:
		c.r.Failed++
	default:
		violate(NonTerminal, "%s ended %s", task.Name, st.Phase)
		return
	}
	if len(jobs) == 0 {
		violate(WrongEnd, "%s is %s without any Job", task.Name, st.Phase)
		return
	}
	exp := c.opts.expect(task)
	c.record(task, runs, violate)
	if !exp.Scheduled && (len(runs) != 1 || len(jobs) != int(st.Attempts)) {
		// A Task without a schedule has one run: its attempts are its Jobs.
		violate(StatusLies, "%s: %d Jobs in %d runs for %d attempts", task.Name, len(jobs), len(runs), st.Attempts)
	}
	c.end(task, exp, runs[len(runs)-1], violate)
	conditions(task, violate)
}

// record checks the status' run record against the newest Job and its run.
func (c *checker) record(task *v1.Task, runs [][]Job, violate func(Category, string, ...any)) {
	st := task.Status
	current := runs[len(runs)-1]
	latest := current[len(current)-1]
	maxRetries := v1.MaxRetriesOf(task)
	switch {
	case st.CurrentRun == nil || st.CurrentRun.Job.Name != latest.Name || st.CurrentRun.Job.UID != latest.UID:
		violate(StatusLies, "%s: currentRun %+v, but its newest Job is %s", task.Name, st.CurrentRun, latest.Name)
	case strconv.Itoa(int(st.Attempts)) != latest.Attempt || st.Attempts != st.CurrentRun.Attempt:
		violate(StatusLies, "%s: attempts %d, currentRun.attempt %d, newest Job %s is attempt %s", task.Name, st.Attempts, st.CurrentRun.Attempt, latest.Name, latest.Attempt)
	case st.Phase == v1.PhaseSucceeded && latest.Outcome != Complete:
		violate(StatusLies, "%s: Succeeded, but its last Job %s did not complete (%s)", task.Name, latest.Name, latest)
	case st.Phase == v1.PhaseFailed && slices.ContainsFunc(current, completed):
		violate(StatusLies, "%s: Failed, but a Job of its run completed", task.Name)
	case st.Phase == v1.PhaseFailed && st.Attempts != maxRetries+1:
		violate(StatusLies, "%s: Failed after %d attempts, maxRetries is %d", task.Name, st.Attempts, maxRetries)
	}
}

// end checks the phase a Task ended in against what it was set up to do.
func (c *checker) end(task *v1.Task, exp Expect, current []Job, violate func(Category, string, ...any)) {
	phase := task.Status.Phase
	if phase == v1.PhaseSucceeded && exp.MaySucceed || phase == v1.PhaseFailed && exp.MayFail {
		return
	}
	if phase == v1.PhaseSucceeded {
		violate(WrongEnd, "%s ended Succeeded, set up to fail", task.Name)
		return
	}
	// A Task meant to succeed may end Failed if the scenario deleted or failed every attempt
	// of its run.
	everyAttemptLost := len(current) == int(v1.MaxRetriesOf(task))+1 && !slices.ContainsFunc(current, completed)
	if exp.MaySucceed && c.opts.JobsDeleted && everyAttemptLost {
		return
	}
	violate(UnexpectedFailure, "%s ended Failed, set up to succeed: %s", task.Name, task.Status.LastError)
}

func completed(j Job) bool { return j.Outcome == Complete }

// conditions checks the conditions (at the Task's generation) and kstatus of a Task that ended.
func conditions(task *v1.Task, violate func(Category, string, ...any)) {
	st := task.Status
	want := map[string]metav1.ConditionStatus{"Ready": "False", "Succeeded": "False", "Failed": "True", "Reconciling": "False", "Stalled": "True"}
	wantK := kstatus.FailedStatus
	if st.Phase == v1.PhaseSucceeded {
		want = map[string]metav1.ConditionStatus{"Ready": "True", "Succeeded": "True", "Failed": "False", "Reconciling": "False", "Stalled": "False"}
		wantK = kstatus.CurrentStatus
	}
	for _, typ := range []string{"Ready", "Succeeded", "Failed", "Reconciling", "Stalled"} {
		if c := meta.FindStatusCondition(st.Conditions, typ); c == nil || c.Status != want[typ] || c.ObservedGeneration != task.Generation {
			violate(StatusLies, "%s (%s): condition %s = %+v, want %s at generation %d", task.Name, st.Phase, typ, c, want[typ], task.Generation)
		}
	}
	if got, err := kstatusOf(task); err != nil || got != wantK {
		violate(StatusLies, "%s (%s): kstatus %s (%v), want %s", task.Name, st.Phase, got, err, wantK)
	}
}

// kstatusOf is what sigs.k8s.io/cli-utils' kstatus (Flux, kpt, Argo CD health checks) makes of
// a Task, through the unstructured form those tools read.
func kstatusOf(task *v1.Task) (kstatus.Status, error) {
	task = task.DeepCopy()
	task.APIVersion, task.Kind = v1.GroupVersion.String(), v1.Kind
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(task)
	if err != nil {
		return "", err
	}
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
	if err != nil {
		return "", err
	}
	return res.Status, nil
}

// describeTask is what a violation is judged from: the Task's phase and run record, and every
// Job seen for it (name, attempt, outcome, deleted), oldest run first.
func describeTask(task *v1.Task, jobs []Job) string {
	st := task.Status
	rec := "none"
	if cr := st.CurrentRun; cr != nil {
		rec = fmt.Sprintf("scheduled %s attempt %d job %s outcome %s finished %s retry %s",
			formatTime(cr.ScheduledTime), cr.Attempt, cr.Job.Name, cr.Outcome, formatTime(cr.FinishTime), formatTime(cr.RetryTime))
	}
	return fmt.Sprintf("phase %s, attempts %d, lastError %q, currentRun {%s}; Jobs %s",
		st.Phase, st.Attempts, st.LastError, rec, describeJobs(jobs))
}

func formatTime(t *metav1.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
