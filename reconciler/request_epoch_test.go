package reconciler

import (
	"testing"

	v1 "example.com/task-operator/apis/v1"
)

// TestARunRequestAtOrBeforeTheEpochIsNotTheFirstAttemptsJob: a run-requested annotation is any
// RFC 3339 time (set by hand with kubectl annotate). One at 1970-01-01T00:00:00Z must not name
// its Job <task>-0-1, the one-shot Task's first attempt, nor one before 1970 a Job whose name
// does not read back as its run (and whose run label starts with '-'): either the request is
// refused as invalid, or its run gets a Job of its own.
func TestARunRequestAtOrBeforeTheEpochIsNotTheFirstAttemptsJob(t *testing.T) {
	for _, when := range []string{"1970-01-01T00:00:00Z", "1969-12-31T23:59:59Z"} {
		t.Run(when, func(t *testing.T) {
			s := &sim{t: t, task: newTask()}
			s.step(at(1))
			first := jobName("t", runID{Attempt: 1})
			s.finish(first, jobSucceeded, at(5))
			s.step(at(5))
			s.task.Annotations = map[string]string{v1.AnnotationRunRequested: when}
			p := planRuns(s.task, analyze(s.task, s.jobs, at(10)), s.jobs, at(10))
			if p.create == nil {
				return // refused: fine
			}
			name := jobName("t", *p.create)
			if name == first {
				t.Fatalf("the request for %s plans Job %s, the first attempt's, which exists", when, name)
			}
			back, ok := runFromName("t", name)
			if !ok || !back.equal(*p.create) {
				t.Errorf("Job %s of the request for %s reads back as %v (ok %t), want %v", name, when, back, ok, *p.create)
			}
			if l := p.create.runLabel(); l == "" || l[0] == '-' {
				t.Errorf("run label %q is not a valid label value", l)
			}
		})
	}
}
