package reconciler

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	v1 "example.com/task-operator/apis/v1"
)

func TestExpectationsStale(t *testing.T) {
	e := newExpectations()
	task := newTask()
	task.ResourceVersion = "100"
	if e.stale(task) {
		t.Error("stale without any write")
	}
	e.wrote(task)
	for rv, want := range map[string]bool{"99": true, "100": false, "101": false, "1000": false, "not-a-number": false} {
		cached := task.DeepCopy()
		cached.ResourceVersion = rv
		if got := e.stale(cached); got != want {
			t.Errorf("stale(rv %s) = %v, want %v", rv, got, want)
		}
	}
	other := newTask(func(t *v1.Task) { t.UID = "other" })
	other.ResourceVersion = "1"
	if e.stale(other) {
		t.Error("another Task is stale")
	}
	e.forget(types.NamespacedName{Namespace: "ns", Name: "t"})
	task.ResourceVersion = "1"
	if e.stale(task) {
		t.Error("stale after forget")
	}
}

func TestExpectationsSettle(t *testing.T) {
	e := newExpectations()
	task := newTask()
	e.created(task, "t-1", at(0))
	if wait, _ := e.settle(task, map[string]bool{}, at(10)); wait != expectationTimeout-10*time.Second {
		t.Errorf("unseen creation: wait %v, want %v", wait, expectationTimeout-10*time.Second)
	}
	if wait, _ := e.settle(task, map[string]bool{"t-1": true}, at(11)); wait != 0 {
		t.Errorf("seen creation: wait %v, want 0", wait)
	}
	e.created(task, "t-2", at(0))
	if wait, _ := e.settle(task, map[string]bool{}, at(61)); wait != 0 {
		t.Errorf("expired creation: wait %v, want 0", wait)
	}

	e.deleted(task, "t-1", at(100))
	if _, deleting := e.settle(task, map[string]bool{"t-1": true}, at(101)); !deleting["t-1"] {
		t.Error("a deleted Job still in the cache is not reported as deleting")
	}
	if _, deleting := e.settle(task, map[string]bool{}, at(102)); deleting["t-1"] {
		t.Error("a deleted Job gone from the cache is still deleting")
	}
}

func TestExpectationsRememberFinished(t *testing.T) {
	e := newExpectations()
	task := newTask()
	j := oneShotJob(1, jobSucceeded, 5)
	e.rememberFinished(task.UID, j, at(0))
	if got := e.finished(task, at(1)); len(got) != 0 {
		t.Errorf("remembered a Job of a Task the controller does not track: %v", got)
	}
	e.wrote(task)
	e.rememberFinished(task.UID, j, at(0))
	if got := e.finished(task, at(1)); len(got) != 1 || got[0].Name != j.Name {
		t.Errorf("finished = %v, want %s", got, j.Name)
	}
	e.consumed(task, []string{j.Name})
	if got := e.finished(task, at(2)); len(got) != 0 {
		t.Errorf("still remembered after being consumed: %v", got)
	}
	e.rememberFinished(task.UID, j, at(0))
	if got := e.finished(task, at(0).Add(rememberFinishedFor+time.Second)); len(got) != 0 {
		t.Errorf("still remembered after %v: %v", rememberFinishedFor, got)
	}
}
