package reconciler

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	v1 "example.com/task-operator/apis/v1"
)

// expectationTimeout bounds how long the controller waits for the cache to show its own write;
// past it the write is assumed lost (like pkg/controller/job's ExpectationsTimeout, shorter).
const expectationTimeout = time.Minute

// rememberFinishedFor bounds how long the final state of a deleted Job is kept.
const rememberFinishedFor = 10 * time.Minute

// expectations remember, per Task, what the controller wrote and the cache may not show yet, so
// that no decision is made on a view older than the controller's own writes:
//
//   - the resourceVersion of its last write to the Task: an older cached Task is skipped (the
//     watch event of the write will bring the reconcile back);
//   - Jobs it created: until the cache shows them the Task waits, so a stale cache can never
//     lead to a second run;
//   - Jobs it deleted: until the cache drops them they count as gone;
//   - the final state of finished Jobs deleted before a reconcile read them (a TTL of 0 races
//     the controller), so their outcome is not lost.
//
// It is all in memory: after a restart the cache is freshly listed, and the Job names are
// deterministic, so a repeated creation is an AlreadyExists, not a duplicate.
type expectations struct {
	mu    sync.Mutex
	tasks map[types.UID]*taskExpectations
	names map[types.NamespacedName]types.UID
}

type taskExpectations struct {
	written  string
	creates  map[string]time.Time
	deletes  map[string]time.Time
	finished map[string]rememberedJob
}

type rememberedJob struct {
	job observedJob
	at  time.Time
}

func newExpectations() *expectations {
	return &expectations{tasks: map[types.UID]*taskExpectations{}, names: map[types.NamespacedName]types.UID{}}
}

func (e *expectations) get(task *v1.Task) *taskExpectations {
	te := e.tasks[task.UID]
	if te == nil {
		te = &taskExpectations{creates: map[string]time.Time{}, deletes: map[string]time.Time{}, finished: map[string]rememberedJob{}}
		e.tasks[task.UID] = te
		e.names[types.NamespacedName{Namespace: task.Namespace, Name: task.Name}] = task.UID
	}
	return te
}

// wrote records the resourceVersion the API server gave the Task on the controller's write.
func (e *expectations) wrote(task *v1.Task) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(task).written = task.ResourceVersion
}

// stale reports whether the cached task is older than the controller's last write to it.
func (e *expectations) stale(task *v1.Task) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	te := e.tasks[task.UID]
	if te == nil || te.written == "" {
		return false
	}
	cmp, err := resourceversion.CompareResourceVersion(task.ResourceVersion, te.written)
	return err == nil && cmp < 0
}

func (e *expectations) created(task *v1.Task, job string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(task).creates[job] = now
}

func (e *expectations) deleted(task *v1.Task, job string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(task).deletes[job] = now
}

// settle checks the expectations against the Jobs now in the cache (by name). It returns how
// long to wait for a created Job to show up (0: none pending) and the cached Jobs the
// controller already deleted.
func (e *expectations) settle(task *v1.Task, cached map[string]bool, now time.Time) (wait time.Duration, deleting map[string]bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	te := e.tasks[task.UID]
	if te == nil {
		return 0, nil
	}
	for name, at := range te.creates {
		left := expectationTimeout - now.Sub(at)
		switch {
		case cached[name] || left <= 0:
			delete(te.creates, name)
		case wait == 0 || left < wait:
			wait = left
		}
	}
	for name, at := range te.deletes {
		if !cached[name] || now.Sub(at) >= expectationTimeout {
			delete(te.deletes, name)
			continue
		}
		if deleting == nil {
			deleting = map[string]bool{}
		}
		deleting[name] = true
	}
	return wait, deleting
}

// rememberFinished keeps the final state of a finished Job that was just deleted, for a Task
// the controller is tracking.
func (e *expectations) rememberFinished(owner types.UID, job observedJob, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	te := e.tasks[owner]
	if te == nil {
		return
	}
	te.finished[job.Name] = rememberedJob{job: job, at: now}
}

// finished returns the remembered final states of the task's deleted Jobs.
func (e *expectations) finished(task *v1.Task, now time.Time) []observedJob {
	e.mu.Lock()
	defer e.mu.Unlock()
	te := e.tasks[task.UID]
	if te == nil {
		return nil
	}
	var out []observedJob
	for name, r := range te.finished {
		if now.Sub(r.at) > rememberFinishedFor {
			delete(te.finished, name)
			continue
		}
		out = append(out, r.job)
	}
	return out
}

// consumed drops remembered final states once a stored status reflects them.
func (e *expectations) consumed(task *v1.Task, jobs []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if te := e.tasks[task.UID]; te != nil {
		for _, name := range jobs {
			delete(te.finished, name)
		}
	}
}

// forget drops everything about a Task that is gone.
func (e *expectations) forget(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if uid, ok := e.names[key]; ok {
		delete(e.tasks, uid)
		delete(e.names, key)
	}
}
