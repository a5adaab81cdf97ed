package reconciler

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	v1 "example.com/task-operator/apis/v1"
)

// defaultExpectationTimeout bounds how long the controller waits for the cache to show a Job it
// created before it asks the API server directly (pkg/controller/job waits 5 minutes before
// giving up on an expectation; here the answer comes from a live read, so waiting less is safe).
const defaultExpectationTimeout = time.Minute

// expectations remember, per Task, what the controller wrote and the cache may not show yet, so
// that no decision is made on a view older than the controller's own writes:
//
//   - the resourceVersion of its last write to the Task: an older cached Task is skipped (the
//     watch event of the write will bring the reconcile back);
//   - Jobs it created: until the cache shows them the Task waits; past the timeout the Job is
//     read from the API server, never assumed gone;
//   - Jobs it deleted: until the cache shows them deleted they count as being deleted.
//
// A Task's record lasts only while it expects something: once the cache has caught up with the
// write and shows every Job created, the record goes, so that resting Tasks cost nothing here.
//
// It is only an optimisation of what is durable: after a restart the cache is freshly listed,
// the status names every Job whose outcome is not recorded, and Job names are deterministic, so
// a repeated creation is an AlreadyExists, not a duplicate.
type expectations struct {
	timeout time.Duration
	mu      sync.Mutex
	tasks   map[types.UID]*taskExpectations
	names   map[types.NamespacedName]types.UID
}

type taskExpectations struct {
	written string
	creates map[string]time.Time
	deletes map[string]time.Time
}

func newExpectations(timeout time.Duration) *expectations {
	if timeout <= 0 {
		timeout = defaultExpectationTimeout
	}
	return &expectations{timeout: timeout, tasks: map[types.UID]*taskExpectations{}, names: map[types.NamespacedName]types.UID{}}
}

func (e *expectations) get(task *v1.Task) *taskExpectations {
	te := e.tasks[task.UID]
	if te == nil {
		te = &taskExpectations{}
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
	if err == nil && cmp < 0 {
		return true
	}
	if err == nil {
		// The cache shows the write: later cached views are as new or newer.
		te.written = ""
		e.dropIfEmpty(task, te)
	}
	return false
}

// dropIfEmpty forgets a Task that expects nothing any more.
func (e *expectations) dropIfEmpty(task *v1.Task, te *taskExpectations) {
	if te.written != "" || len(te.creates) > 0 || len(te.deletes) > 0 {
		return
	}
	delete(e.tasks, task.UID)
	key := types.NamespacedName{Namespace: task.Namespace, Name: task.Name}
	if e.names[key] == task.UID {
		delete(e.names, key)
	}
	if len(e.tasks) == 0 {
		// Go maps keep the room of their largest size: after a burst of 10,000 Tasks settles,
		// start small again.
		e.tasks, e.names = map[types.UID]*taskExpectations{}, map[types.NamespacedName]types.UID{}
	}
}

func (e *expectations) created(task *v1.Task, job string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	te := e.get(task)
	if te.creates == nil {
		te.creates = map[string]time.Time{}
	}
	te.creates[job] = now
}

func (e *expectations) deleted(task *v1.Task, job string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	te := e.get(task)
	if te.deletes == nil {
		te.deletes = map[string]time.Time{}
	}
	te.deletes[job] = now
}

// cacheCheck is what the expectations say about the cache's view of a Task's Jobs.
type cacheCheck struct {
	// wait is how long until the earliest unseen creation times out (0: none pending).
	wait time.Duration
	// overdue are Jobs created longer than the timeout ago that the cache still does not
	// show: the controller reads them from the API server.
	overdue []string
	// deleting are cached Jobs the controller deleted whose deletion the cache does not show.
	deleting map[string]bool
}

// checkCache checks the expectations against the Jobs now in the cache (by name).
func (e *expectations) checkCache(task *v1.Task, cached map[string]bool, now time.Time) cacheCheck {
	e.mu.Lock()
	defer e.mu.Unlock()
	var s cacheCheck
	te := e.tasks[task.UID]
	if te == nil {
		return s
	}
	for name, at := range te.creates {
		left := e.timeout - now.Sub(at)
		switch {
		case cached[name]:
			delete(te.creates, name)
		case left <= 0:
			s.overdue = append(s.overdue, name)
		case s.wait == 0 || left < s.wait:
			s.wait = left
		}
	}
	for name, at := range te.deletes {
		if !cached[name] || now.Sub(at) >= e.timeout {
			delete(te.deletes, name)
			continue
		}
		if s.deleting == nil {
			s.deleting = map[string]bool{}
		}
		s.deleting[name] = true
	}
	e.dropIfEmpty(task, te)
	return s
}

// confirmed drops the creation of job once the API server has answered for it.
func (e *expectations) confirmed(task *v1.Task, job string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if te := e.tasks[task.UID]; te != nil {
		delete(te.creates, job)
		e.dropIfEmpty(task, te)
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
