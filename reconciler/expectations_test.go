package reconciler

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	v1 "example.com/task-operator/apis/v1"
)

func TestExpectationsStale(t *testing.T) {
	e := newExpectations(0)
	task := newTask()
	task.ResourceVersion = "100"
	if e.stale(task) {
		t.Error("stale without any write")
	}
	e.wrote(task)
	// In the order a cache shows them: older views are stale until it shows the write.
	for _, step := range []struct {
		rv   string
		want bool
	}{{"98", true}, {"99", true}, {"not-a-number", false}, {"99", true}, {"101", false}} {
		cached := task.DeepCopy()
		cached.ResourceVersion = step.rv
		if got := e.stale(cached); got != step.want {
			t.Errorf("stale(rv %s) = %v, want %v", step.rv, got, step.want)
		}
	}
	other := newTask(func(t *v1.Task) { t.UID = "other" })
	other.ResourceVersion = "1"
	if e.stale(other) {
		t.Error("another Task is stale")
	}
	e.wrote(task)
	e.forget(types.NamespacedName{Namespace: "ns", Name: "t"})
	task.ResourceVersion = "1"
	if e.stale(task) {
		t.Error("stale after forget")
	}
}

// A Task whose writes and Jobs the cache shows leaves no record behind: 10,000 resting Tasks
// must not hold 10,000 records.
func TestExpectationsForgetWhatTheCacheShows(t *testing.T) {
	e := newExpectations(0)
	task := newTask()
	task.ResourceVersion = "5"
	e.wrote(task)
	e.created(task, "t-0-1", at(0))
	e.deleted(task, "t-0-0", at(0))
	if e.stale(task) || len(e.tasks) != 1 {
		t.Fatalf("after the cache showed the write: %d records, want 1 (Jobs still expected)", len(e.tasks))
	}
	if s := e.checkCache(task, map[string]bool{"t-0-0": true}, at(1)); s.wait == 0 || !s.deleting["t-0-0"] {
		t.Fatalf("settle before the cache shows the Jobs: %+v", s)
	}
	if s := e.checkCache(task, map[string]bool{"t-0-1": true}, at(2)); s.wait != 0 || len(s.deleting) != 0 {
		t.Fatalf("settle once the cache shows the Jobs: %+v", s)
	}
	if len(e.tasks) != 0 || len(e.names) != 0 {
		t.Errorf("records left: %d tasks, %d names; want none", len(e.tasks), len(e.names))
	}
	// What is expected again is tracked again.
	task.ResourceVersion = "9"
	e.wrote(task)
	task.ResourceVersion = "8"
	if !e.stale(task) {
		t.Error("a view older than a new write is not stale")
	}
}

func TestExpectationsSettle(t *testing.T) {
	e := newExpectations(0)
	task := newTask()
	e.created(task, "t-0-1", at(0))
	if s := e.checkCache(task, map[string]bool{}, at(10)); s.wait != defaultExpectationTimeout-10*time.Second || len(s.overdue) != 0 {
		t.Errorf("unseen creation: %+v, want a wait of %v", s, defaultExpectationTimeout-10*time.Second)
	}
	if s := e.checkCache(task, map[string]bool{"t-0-1": true}, at(11)); s.wait != 0 {
		t.Errorf("seen creation: wait %v, want 0", s.wait)
	}
	// Past the timeout a creation the cache still does not show is never assumed gone: it is
	// handed over to be read from the API server, and kept until that read answered.
	e.created(task, "t-0-2", at(0))
	for range 2 {
		if s := e.checkCache(task, map[string]bool{}, at(61)); s.wait != 0 || len(s.overdue) != 1 || s.overdue[0] != "t-0-2" {
			t.Errorf("overdue creation: %+v, want t-0-2 overdue", s)
		}
	}
	e.confirmed(task, "t-0-2")
	if s := e.checkCache(task, map[string]bool{}, at(62)); len(s.overdue) != 0 {
		t.Errorf("confirmed creation still overdue: %+v", s)
	}

	e.deleted(task, "t-0-1", at(100))
	if s := e.checkCache(task, map[string]bool{"t-0-1": true}, at(101)); !s.deleting["t-0-1"] {
		t.Error("a deleted Job still in the cache is not reported as deleting")
	}
	if s := e.checkCache(task, map[string]bool{}, at(102)); s.deleting["t-0-1"] {
		t.Error("a deleted Job gone from the cache is still deleting")
	}
}

func TestExpectationsTimeoutIsConfigurable(t *testing.T) {
	e := newExpectations(2 * time.Second)
	task := newTask()
	e.created(task, "t-0-1", at(0))
	if s := e.checkCache(task, nil, at(1)); s.wait != time.Second {
		t.Errorf("wait %v, want 1s", s.wait)
	}
	if s := e.checkCache(task, nil, at(2)); len(s.overdue) != 1 {
		t.Errorf("not overdue after the timeout: %+v", s)
	}
}
