package reconciler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	v1 "example.com/task-operator/apis/v1"
)

func TestJobName(t *testing.T) {
	sched := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // 1767225600
	long := strings.Repeat("a", 62)
	longDotted := strings.Repeat("ab.", 30) + "z"
	tests := []struct {
		name string
		task string
		run  runID
		want string
	}{
		{"first attempt", "backup", runID{Attempt: 1}, "backup-0-1"},
		{"retry", "backup", runID{Attempt: 12}, "backup-0-12"},
		{"scheduled first attempt", "nightly", runID{Scheduled: sched, Attempt: 1}, "nightly-1767225600-1"},
		{"scheduled retry", "nightly", runID{Scheduled: sched, Attempt: 2}, "nightly-1767225600-2"},
		{"scheduled time in another zone names the same instant", "nightly", runID{Scheduled: sched.In(time.FixedZone("x", 3600)), Attempt: 1}, "nightly-1767225600-1"},
		{"62 is kept whole", strings.Repeat("b", 58), runID{Attempt: 1}, strings.Repeat("b", 58) + "-0-1"},
		{"63 is cut and hashed", strings.Repeat("b", 59), runID{Attempt: 1}, strings.Repeat("b", 50) + "-" + v1.NameHash(strings.Repeat("b", 59)) + "-0-1"},
		{"too long is cut and hashed", long, runID{Attempt: 1}, long[:50] + "-" + v1.NameHash(long) + "-0-1"},
		{"too long scheduled", long, runID{Scheduled: sched, Attempt: 3}, long[:41] + "-" + v1.NameHash(long) + "-1767225600-3"},
		{"cut never ends with a dot", longDotted, runID{Attempt: 1}, longDotted[:50] + "-" + v1.NameHash(longDotted) + "-0-1"},
		{"a dot at the cut becomes a dash", strings.Repeat("c", 49) + "." + strings.Repeat("c", 20), runID{Attempt: 1}, strings.Repeat("c", 49) + "--" + v1.NameHash(strings.Repeat("c", 49)+"."+strings.Repeat("c", 20)) + "-0-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := jobName(tc.task, tc.run)
			if got != tc.want {
				t.Errorf("jobName(%q, %+v) = %q, want %q", tc.task, tc.run, got, tc.want)
			}
			if len(got) > 63 {
				t.Errorf("len = %d, want <= 63", len(got))
			}
			if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
				t.Errorf("not a DNS subdomain: %v", errs)
			}
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
				t.Errorf("not a label value: %v", errs)
			}
			if again := jobName(tc.task, tc.run); again != got {
				t.Errorf("not deterministic: %q then %q", got, again)
			}
			back, ok := runFromName(tc.task, got)
			if !ok || !back.equal(tc.run) {
				t.Errorf("runFromName(%q, %q) = %+v, %v; want %+v", tc.task, got, back, ok, tc.run)
			}
		})
	}
}

// TestJobNamesNeverCollide is issue #14 item 7: under the old naming, Task "a"'s scheduled retry
// and Task "a-1767225660"'s one-shot retry were both "a-1767225660-2". Every pair of (Task, run)
// below must map to distinct Job names, and each name must read back only as its own Task's.
func TestJobNamesNeverCollide(t *testing.T) {
	sched := time.Unix(1767225660, 0).UTC()
	tasks := []string{"a", "a-0", "a-1", "a-1767225660", "a-1767225660-2", "a-0-1", "a0", "b", strings.Repeat("x", 70), strings.Repeat("x", 70) + "-0"}
	runs := []runID{{Attempt: 1}, {Attempt: 2}, {Attempt: 10}, {Scheduled: sched, Attempt: 1}, {Scheduled: sched, Attempt: 2}, {Scheduled: sched.Add(time.Minute), Attempt: 1}}
	owner := map[string]string{}
	for _, task := range tasks {
		for _, run := range runs {
			name := jobName(task, run)
			key := fmt.Sprintf("%s %+v", task, run)
			if prev, ok := owner[name]; ok {
				t.Errorf("%s and %s both map to Job %s", prev, key, name)
			}
			owner[name] = key
		}
	}
	for name, key := range owner {
		for _, task := range tasks {
			if _, ok := runFromName(task, name); ok && !strings.HasPrefix(key, task+" ") {
				t.Errorf("Job %s of %s reads as a Job of Task %q", name, key, task)
			}
		}
	}
}

// TestTaskNamedLikeAnotherTasksCutNameGetsOtherJobNames: a long Task name is cut and hashed,
// and that cut form is itself a valid Task name. A Task named exactly so must not get the long
// Task's Job names, for one-shot and scheduled runs, at every length around the limit.
func TestTaskNamedLikeAnotherTasksCutNameGetsOtherJobNames(t *testing.T) {
	sched := time.Unix(1767225600, 0).UTC()
	runs := []runID{{Attempt: 1}, {Attempt: 2}, {Attempt: 101}, {Scheduled: sched, Attempt: 1}, {Scheduled: sched, Attempt: 3}}
	for n := 40; n <= 80; n++ {
		long := "collide-" + strings.Repeat("a", n)
		for _, run := range runs {
			longJob := jobName(long, run)
			cutForm := strings.TrimSuffix(longJob, run.nameSuffix())
			if cutForm == long {
				continue // short enough to be kept whole
			}
			if other := jobName(cutForm, run); other == longJob {
				t.Errorf("Task %q and Task %q both map to Job %q", long, cutForm, longJob)
			}
			if _, ok := runFromName(cutForm, longJob); ok {
				t.Errorf("Job %q of Task %q reads as a Job of Task %q", longJob, long, cutForm)
			}
			if len(longJob) > maxNameLength {
				t.Errorf("Job %q is %d characters", longJob, len(longJob))
			}
		}
	}
}

func TestJobNameKeepsLongNamesApart(t *testing.T) {
	a := strings.Repeat("x", 80) + "a"
	b := strings.Repeat("x", 80) + "b"
	if jobName(a, runID{Attempt: 1}) == jobName(b, runID{Attempt: 1}) {
		t.Fatal("two long Task names that differ only at the end got the same Job name")
	}
}

func TestRunFromNameRejects(t *testing.T) {
	for _, tc := range []struct{ task, name string }{
		{"t", "t-1"},              // an earlier release's one-shot name
		{"t", "t-1767225600"},     // an earlier release's scheduled name
		{"t", "t-0-0"},            // attempt 0
		{"t", "t-0-+1"},           // not decimal digits
		{"t", "u-0-1"},            // another Task's
		{"t", "t-x-1"},            // not a number
		{"t", "t--1"},             // empty component
		{"t", "t-0-99999999999"},  // attempt out of range
		{"t-0", "t-0-1"},          // Task "t"'s Job, not "t-0"'s
		{"t", "tt-0-1"},           // a Task whose name merely starts with t
		{"t", ""},                 // nothing
		{"t", "-0-1"},             // no Task part
		{"t", "t-1767225600-2-3"}, // three numbers
	} {
		if run, ok := runFromName(tc.task, tc.name); ok {
			t.Errorf("runFromName(%q, %q) = %+v, want no match", tc.task, tc.name, run)
		}
	}
}

func TestLegacyRunFromName(t *testing.T) {
	sched := time.Unix(1767225600, 0).UTC()
	long := strings.Repeat("a", 62)
	tests := []struct {
		task, name string
		want       runID
		ok         bool
	}{
		{"t", "t-1", runID{Attempt: 1}, true},
		{"t", "t-12", runID{Attempt: 12}, true},
		{"t", "t-1767225600", runID{Scheduled: sched, Attempt: 1}, true},
		{"t", "t-1767225600-2", runID{Scheduled: sched, Attempt: 2}, true},
		{long, long[:52] + "-" + v1.NameHash(long) + "-1", runID{Attempt: 1}, true},
		{"t", "u-1", runID{}, false},
		{"t", "t-0-1", runID{}, false},
	}
	for _, tc := range tests {
		got, ok := legacyRunFromName(tc.task, tc.name)
		if ok != tc.ok || !got.equal(tc.want) {
			t.Errorf("legacyRunFromName(%q, %q) = %+v, %v; want %+v, %v", tc.task, tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestLabelValue(t *testing.T) {
	tests := []struct {
		name, in string
		want     string
	}{
		{"short", "backup", "backup"},
		{"63", strings.Repeat("c", 63), strings.Repeat("c", 63)},
		{"64", strings.Repeat("c", 64), strings.Repeat("c", 54) + "-" + v1.NameHash(strings.Repeat("c", 64))},
		{"dotted 253", strings.Repeat("d.", 126) + "e", strings.TrimRight(strings.Repeat("d.", 27), ".") + "-" + v1.NameHash(strings.Repeat("d.", 126)+"e")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := labelValue(tc.in)
			if got != tc.want {
				t.Errorf("labelValue = %q, want %q", got, tc.want)
			}
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
				t.Errorf("not a label value: %v", errs)
			}
		})
	}
}

func TestRunIDLess(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		a, b runID
		want bool
	}{
		{runID{Attempt: 1}, runID{Attempt: 2}, true},
		{runID{Attempt: 2}, runID{Attempt: 1}, false},
		{runID{Attempt: 9}, runID{Scheduled: t0, Attempt: 1}, true}, // a one-shot run sorts before any scheduled one
		{runID{Scheduled: t0, Attempt: 3}, runID{Scheduled: t0.Add(time.Second), Attempt: 1}, true},
		{runID{Scheduled: t0, Attempt: 1}, runID{Scheduled: t0, Attempt: 1}, false},
	}
	for _, tc := range tests {
		if got := tc.a.less(tc.b); got != tc.want {
			t.Errorf("%+v.less(%+v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func FuzzRunFromName(f *testing.F) {
	f.Add("t", "t-0-1")
	f.Add("a-1", "a-1-1767225600-2")
	f.Fuzz(func(t *testing.T, task, name string) {
		run, ok := runFromName(task, name)
		if ok && jobName(task, run) != name {
			t.Errorf("runFromName(%q, %q) = %+v, which names %q", task, name, run, jobName(task, run))
		}
	})
}

// TestOrphanOfThePreviousReleaseIsRecognised: a Job the previous release made (no
// task.example.com/task-uid annotation) that lost its owner reference (delete --cascade=orphan
// with the operator away) still holds the run-outcome finalizer; it must be found as the Task's
// so that the finalizer is released. The previous release kept a name of exactly 63 characters
// whole and trimmed '-' and '.' off the end of a cut; this release names both differently, so
// such a Job is no longer recognised by its name.
func TestOrphanOfThePreviousReleaseIsRecognised(t *testing.T) {
	previousFitName := func(base, suffix string) string { // the rule of the previous release
		if len(base)+len(suffix) <= maxNameLength {
			return base + suffix
		}
		hash := "-" + v1.NameHash(base)
		keep := max(1, maxNameLength-len(suffix)-len(hash))
		return strings.TrimRight(base[:min(keep, len(base))], "-.") + hash + suffix
	}
	for _, task := range []string{
		strings.Repeat("a", 58),                            // kept whole at 62 by both rules
		strings.Repeat("a", 59),                            // 63 with "-0-1": kept whole before, hashed now
		strings.Repeat("a", 49) + "-" + "bbbbbbbbbbbbbbbb", // the cut ends in '-'
		strings.Repeat("a", 49) + "." + "bbbbbbbbbbbbbbbb", // the cut ends in '.'
	} {
		name := previousFitName(task, "-0-1")
		job := batchv1.Job{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns",
			Labels:     map[string]string{v1.LabelTaskName: labelValue(task), v1.LabelAttempt: "1"},
			Finalizers: []string{v1.FinalizerRunOutcome},
		}}
		if got := orphansOf(task, "", []batchv1.Job{job}); len(got) != 1 {
			t.Errorf("Task %q (%d characters), Job %q of the previous release without an owner: not an orphan, its finalizer is never released", task, len(task), name)
		}
	}
}

// TestLabelValueUnchangedSinceThePreviousRelease: every reader of a Task's Jobs lists them by
// task.example.com/name = labelValue(task name) (observeJobs, liveJobs, releaseOrphans), and a
// Job's labels are never rewritten, so a Job made by the previous release is found only while
// labelValue gives the value that release wrote. For a name over 63 characters whose cut ends
// in '-' or '.', the previous release trimmed it; this one no longer does.
func TestLabelValueUnchangedSinceThePreviousRelease(t *testing.T) {
	previous := func(name string) string { // labelValue of the previous release
		if len(name) <= maxNameLength {
			return name
		}
		return strings.TrimRight(name[:maxNameLength-9], "-.") + "-" + v1.NameHash(name)
	}
	for _, name := range []string{
		strings.Repeat("a", 63),
		strings.Repeat("a", 70),
		strings.Repeat("a", 53) + "-" + strings.Repeat("b", 20), // the cut ends in '-'
		strings.Repeat("a", 53) + "." + strings.Repeat("b", 20), // the cut ends in '.'
	} {
		if got, want := labelValue(name), previous(name); got != want {
			t.Errorf("labelValue(%q) = %q, the previous release labelled its Jobs %q: they are no longer listed (never pruned, finalizers never released)", name, got, want)
		}
	}
}
