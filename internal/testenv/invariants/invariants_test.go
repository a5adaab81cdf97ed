package invariants

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "example.com/task-operator/apis/v1"
)

// The fixtures: Tasks and Jobs as the operator leaves them when all went well, built by hand.

const ns = "ns"

var start = time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)

// job is attempt of task's run (scheduled "" for a one-shot) with outcome ("" still running).
func job(task *v1.Task, scheduled string, attempt int, outcome string) batchv1.Job {
	run := fmt.Sprint(attempt)
	name := fmt.Sprintf("%s-%d", task.Name, attempt)
	if scheduled != "" {
		run = scheduled
		name = fmt.Sprintf("%s-%s-%d", task.Name, strings.NewReplacer(":", "", "-", "").Replace(scheduled), attempt)
	}
	j := batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{v1.LabelTaskName: task.Name, v1.LabelRun: run, v1.LabelAttempt: fmt.Sprint(attempt)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1.GroupVersion.String(), Kind: v1.Kind, Name: task.Name, UID: task.UID, Controller: new(true),
			}},
		},
	}
	if scheduled != "" {
		j.Annotations = map[string]string{v1.AnnotationScheduledTime: scheduled}
	}
	switch outcome {
	case Complete:
		j.Status.Succeeded = 1
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	case Failed:
		j.Status.Failed = 1
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}}
	default:
		j.Status.Active = 1
	}
	return j
}

// ended sets task's status as the operator writes it once its newest Job (last) ended.
func ended(task *v1.Task, last *batchv1.Job, phase v1.Phase) {
	attempt := int32(atoi(last.Labels[v1.LabelAttempt]))
	outcome := map[v1.Phase]v1.RunOutcome{v1.PhaseSucceeded: v1.RunSucceeded, v1.PhaseFailed: v1.RunFailed}[phase]
	task.Status = v1.TaskStatus{
		ObservedGeneration: task.Generation, Phase: phase, Attempts: attempt,
		CurrentRun: &v1.RunRecord{Attempt: attempt, Job: v1.JobReference{Name: last.Name, UID: last.UID}, Outcome: outcome},
	}
	ok, failed := metav1.ConditionTrue, metav1.ConditionFalse
	if phase == v1.PhaseFailed {
		ok, failed = metav1.ConditionFalse, metav1.ConditionTrue
		task.Status.LastError = "exit code 1"
	}
	for typ, s := range map[string]metav1.ConditionStatus{"Ready": ok, "Succeeded": ok, "Failed": failed, "Reconciling": metav1.ConditionFalse, "Stalled": failed} {
		task.Status.Conditions = append(task.Status.Conditions, metav1.Condition{
			Type: typ, Status: s, Reason: "Test", ObservedGeneration: task.Generation, LastTransitionTime: metav1.NewTime(start),
		})
	}
}

func newTask(name string) *v1.Task {
	return &v1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Generation: 1}}
}

// world is a clean end state: a Task that succeeded at once, one that succeeded on its second
// attempt, one set up to fail that failed every attempt, and a scheduled one with two runs.
type world struct {
	in     Input
	expect map[string]Expect
}

func (w *world) add(task *v1.Task, exp Expect, jobs ...batchv1.Job) {
	w.in.Tasks = append(w.in.Tasks, *task)
	w.in.Jobs = append(w.in.Jobs, jobs...)
	w.expect[task.Name] = exp
}

func (w *world) task(name string) *v1.Task {
	for i := range w.in.Tasks {
		if w.in.Tasks[i].Name == name {
			return &w.in.Tasks[i]
		}
	}
	panic("no task " + name)
}

func (w *world) job(name string) *batchv1.Job {
	for i := range w.in.Jobs {
		if w.in.Jobs[i].Name == name {
			return &w.in.Jobs[i]
		}
	}
	panic("no job " + name)
}

func (w *world) options() Options {
	return Options{Expect: func(t *v1.Task) Expect { return w.expect[t.Name] }}
}

func cleanWorld() *world {
	w := &world{expect: map[string]Expect{}}

	once := newTask("once")
	j := job(once, "", 1, Complete)
	ended(once, &j, v1.PhaseSucceeded)
	w.add(once, Succeeds, j)

	flaky := newTask("flaky")
	j1, j2 := job(flaky, "", 1, Failed), job(flaky, "", 2, Complete)
	ended(flaky, &j2, v1.PhaseSucceeded)
	w.add(flaky, Succeeds, j1, j2)

	doomed := newTask("doomed")
	var doomedJobs []batchv1.Job
	for a := 1; a <= v1.DefaultMaxRetries+1; a++ {
		doomedJobs = append(doomedJobs, job(doomed, "", a, Failed))
	}
	ended(doomed, &doomedJobs[len(doomedJobs)-1], v1.PhaseFailed)
	w.add(doomed, Expect{MayFail: true}, doomedJobs...)

	cron := newTask("cron")
	r1, r2 := job(cron, "2026-01-02T03:04:00Z", 1, Complete), job(cron, "2026-01-02T03:05:00Z", 1, Complete)
	ended(cron, &r2, v1.PhaseSucceeded)
	w.add(cron, Expect{Scheduled: true, MaySucceed: true, MayFail: true}, r1, r2)
	return w
}

// found lists the categories with violations.
func found(r *Report) []Category {
	var out []Category
	for _, c := range Categories {
		if r.Counts[c] > 0 {
			out = append(out, c)
		}
	}
	return out
}

func TestCleanEndStateHasNoViolation(t *testing.T) {
	w := cleanWorld()
	r := Check(w.in, w.options())
	if r.Violations() != 0 {
		t.Fatalf("violations %v: %s", r.Counts, strings.Join(r.Examples, "; "))
	}
	if r.Tasks != 4 || r.Jobs != 9 || r.Seen != 9 || r.Runs != 5 || r.Retries != 4 || r.Succeeded != 3 || r.Failed != 1 {
		t.Errorf("stats %+v, want 4 Tasks, 9 Jobs seen in 5 runs, 4 retries, 3 Succeeded, 1 Failed", r.Stats)
	}
	if open := Unsettled(w.in); len(open) != 0 {
		t.Errorf("Unsettled = %v, want nothing", open)
	}
}

// Each case breaks the clean end state in one way; the checker must name that way, and only
// the categories the defect breaks.
func TestEveryViolationIsCaught(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*world)
		want   []Category
	}{
		{"a second Job for one attempt", func(w *world) {
			dup := job(w.task("once"), "", 1, "")
			dup.Name, dup.UID = "once-1-again", "uid-once-1-again"
			w.in.Jobs = slices.Insert(w.in.Jobs, 0, dup)
		}, []Category{Duplicates, StatusLies}},
		{"a Job name used by two Jobs (seen by a watch)", func(w *world) {
			w.in.Seen = seenAll(w)
			again := FromJob(w.job("once-1"))
			again.UID, again.Outcome, again.Deleted = "uid-other", "", true
			w.in.Seen = slices.Insert(w.in.Seen, 0, again)
		}, []Category{Duplicates, StatusLies}},
		{"a second Job for one run label and attempt, its scheduled time another", func(w *world) {
			dup := job(w.task("cron"), "2026-01-02T03:04:30Z", 1, "")
			dup.Labels[v1.LabelRun] = w.job("cron-20260102T030500Z-1").Labels[v1.LabelRun]
			w.in.Jobs = append(w.in.Jobs, dup)
		}, []Category{Duplicates}},
		{"more Jobs than attempts", func(w *world) {
			w.task("flaky").Status.Phase = v1.PhaseRunning
			w.task("flaky").Status.Attempts = 1
		}, []Category{Duplicates, NonTerminal}},
		{"a succeeded run run again", func(w *world) {
			w.job("flaky-1").Status = job(w.task("flaky"), "", 1, Complete).Status
		}, []Category{RerunAfterSuccess}},
		{"a Job with two pods", func(w *world) {
			w.job("once-1").Status.Failed = 1
		}, []Category{ExtraPods}},
		{"a Job whose Task is gone", func(w *world) {
			gone := newTask("gone")
			w.in.Jobs = append(w.in.Jobs, job(gone, "", 1, Complete))
		}, []Category{Orphans}},
		{"a Job owned by no Task", func(w *world) {
			j := job(newTask("nobody"), "", 1, Complete)
			j.OwnerReferences = nil
			w.in.Jobs = append(w.in.Jobs, j)
		}, []Category{Orphans}},
		{"a Task still running", func(w *world) {
			w.task("once").Status.Phase = v1.PhaseRunning
		}, []Category{NonTerminal}},
		{"a Task meant to succeed ended Failed", func(w *world) {
			w.expect["doomed"] = Succeeds
		}, []Category{UnexpectedFailure}},
		{"a Task meant to fail ended Succeeded", func(w *world) {
			w.expect["once"] = Expect{MayFail: true}
		}, []Category{WrongEnd}},
		{"a Task ended without any Job", func(w *world) {
			w.in.Jobs = slices.DeleteFunc(w.in.Jobs, func(j batchv1.Job) bool { return j.Name == "once-1" })
		}, []Category{WrongEnd}},
		{"currentRun names another Job", func(w *world) {
			w.task("flaky").Status.CurrentRun.Job = v1.JobReference{Name: "flaky-1", UID: "uid-flaky-1"}
		}, []Category{StatusLies}},
		{"attempts not the newest Job's", func(w *world) {
			w.task("flaky").Status.Attempts = 3
		}, []Category{StatusLies}},
		{"Succeeded but the newest Job failed", func(w *world) {
			w.job("once-1").Status = job(w.task("once"), "", 1, Failed).Status
		}, []Category{StatusLies}},
		{"Failed but a Job of its run completed", func(w *world) {
			w.job("doomed-2").Status = job(w.task("doomed"), "", 2, Complete).Status
		}, []Category{RerunAfterSuccess, StatusLies}},
		{"Failed before maxRetries", func(w *world) {
			w.task("doomed").Spec.Retry = &v1.RetryPolicy{MaxRetries: 5}
		}, []Category{StatusLies}},
		{"a condition wrong", func(w *world) {
			setCondition(w.task("once"), "Ready", metav1.ConditionFalse)
		}, []Category{StatusLies}},
		{"conditions of an older generation", func(w *world) {
			w.task("once").Generation = 2
		}, []Category{StatusLies}},
		{"a Task still holding its finalizer", func(w *world) {
			w.task("once").Finalizers = []string{v1.FinalizerJobs}
		}, []Category{FinalizersLeft}},
		{"a Job still holding its finalizer", func(w *world) {
			w.job("once-1").Finalizers = []string{v1.FinalizerRunOutcome}
		}, []Category{FinalizersLeft}},
		{"several runs of a Task not set up with a schedule", func(w *world) {
			w.expect["cron"] = Expect{MaySucceed: true}
		}, []Category{Duplicates, StatusLies}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := cleanWorld()
			tc.mutate(w)
			r := Check(w.in, w.options())
			if got := found(r); !slices.Equal(got, tc.want) {
				t.Errorf("violations in %v, want %v; examples: %s", got, tc.want, strings.Join(r.Examples, "; "))
			}
			if len(r.Examples) == 0 {
				t.Error("no offender named")
			}
		})
	}
}

func TestKstatusDisagreeingWithThePhaseIsCaught(t *testing.T) {
	w := cleanWorld()
	// The conditions at generation 2, status.observedGeneration behind: kstatus says InProgress.
	once := w.task("once")
	once.Generation = 2
	for i := range once.Status.Conditions {
		once.Status.Conditions[i].ObservedGeneration = 2
	}
	r := Check(w.in, w.options())
	if r.Counts[StatusLies] != 1 || len(r.Examples) != 1 || !strings.Contains(r.Examples[0], "kstatus InProgress") {
		t.Errorf("status disagreeing %d, examples %q; want 1, naming kstatus InProgress", r.Counts[StatusLies], r.Examples)
	}
}

func TestTaskMeantToSucceedMayFailWhenEveryAttemptWasDeleted(t *testing.T) {
	w := cleanWorld()
	w.expect["doomed"] = Succeeds
	opts := w.options()
	opts.JobsDeleted = true
	if r := Check(w.in, opts); r.Violations() != 0 {
		t.Errorf("violations %v: %s", r.Counts, strings.Join(r.Examples, "; "))
	}
	// Not if an attempt is missing: then the Task gave up before its retries ran out.
	w.in.Jobs = slices.DeleteFunc(w.in.Jobs, func(j batchv1.Job) bool { return j.Name == "doomed-1" })
	if r := Check(w.in, opts); r.Counts[UnexpectedFailure] != 1 {
		t.Errorf("failed Tasks = %d with an attempt missing, want 1 (%v)", r.Counts[UnexpectedFailure], r.Counts)
	}
}

func TestDeletedJobWithoutTaskIsNoOrphan(t *testing.T) {
	w := cleanWorld()
	gone := job(newTask("gone"), "", 1, Complete)
	gone.DeletionTimestamp = &metav1.Time{Time: start}
	w.in.Jobs = append(w.in.Jobs, gone)
	if r := Check(w.in, w.options()); r.Violations() != 0 {
		t.Errorf("violations %v: %s", r.Counts, strings.Join(r.Examples, "; "))
	}
}

func TestJobsSeenByAWatchAreJudgedOverListedOnes(t *testing.T) {
	w := cleanWorld()
	w.in.Seen = seenAll(w)
	// A deleted second attempt the list no longer shows: a succeeded run ran again.
	rerun := FromJob(w.job("once-1"))
	rerun.Name, rerun.UID, rerun.Attempt, rerun.Deleted = "once-2", "uid-once-2", "2", true
	w.in.Seen = append(w.in.Seen, rerun)
	r := Check(w.in, w.options())
	if want := []Category{Duplicates, RerunAfterSuccess, StatusLies}; !slices.Equal(found(r), want) {
		t.Errorf("violations in %v, want %v: %s", found(r), want, strings.Join(r.Examples, "; "))
	}
	if r.Seen != 10 || r.Jobs != 9 {
		t.Errorf("seen %d, listed %d; want 10 and 9", r.Seen, r.Jobs)
	}
}

func TestUnsettledNamesWhatStillMoves(t *testing.T) {
	w := cleanWorld()
	w.task("once").Status.Phase = v1.PhaseRunning
	w.task("flaky").Finalizers = []string{v1.FinalizerJobs}
	w.job("doomed-4").Finalizers = []string{v1.FinalizerRunOutcome}
	open := Unsettled(w.in)
	if len(open) != 3 || !strings.HasPrefix(open[0], "once(Running") || !strings.HasPrefix(open[1], "flaky(Succeeded") || open[2] != "job doomed-4 holds its finalizer" {
		t.Errorf("Unsettled = %q", open)
	}
}

func TestReportListsEveryCategory(t *testing.T) {
	r := &Report{Counts: map[Category]int{}}
	r.violate(Orphans, 2, "job x")
	s := r.String()
	for _, c := range Categories {
		if !strings.Contains(s, string(c)) || c.Means() == "" {
			t.Errorf("category %q missing from the report or unexplained:\n%s", c, s)
		}
	}
	if r.Violations() != 2 || !slices.Equal(slices.Collect(maps.Keys(r.Counts)), []Category{Orphans}) {
		t.Errorf("violations %d %v, want 2 orphans", r.Violations(), r.Counts)
	}
}

func seenAll(w *world) []Job {
	var seen []Job
	for i := range w.in.Jobs {
		seen = append(seen, FromJob(&w.in.Jobs[i]))
	}
	return seen
}

func setCondition(task *v1.Task, typ string, s metav1.ConditionStatus) {
	for i := range task.Status.Conditions {
		if task.Status.Conditions[i].Type == typ {
			task.Status.Conditions[i].Status = s
		}
	}
}
