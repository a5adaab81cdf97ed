package invariants

import (
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "example.com/task-operator/apis/v1"
)

// Options is what differs by scenario.
type Options struct {
	// Expect says what each Task was set up to do; nil expects every Task to be a one-shot
	// meant to succeed.
	Expect func(*v1.Task) Expect
	// JobsDeleted says the scenario deleted Jobs on purpose: a Task meant to succeed may then
	// end Failed, if every attempt of its last run failed or was deleted.
	JobsDeleted bool
}

// Expect is what one Task was set up to do.
type Expect struct {
	// Scheduled says the Task had a schedule: its Jobs may be of several runs, and it may
	// have more Jobs than its status counts attempts (those of the latest run).
	Scheduled bool
	// MaySucceed and MayFail are the phases it may end in.
	MaySucceed, MayFail bool
}

// Succeeds is the expectation of a one-shot Task whose pods all succeed.
var Succeeds = Expect{MaySucceed: true}

func (o Options) expect(task *v1.Task) Expect {
	if o.Expect == nil {
		return Succeeds
	}
	return o.Expect(task)
}

// checker holds one Check's state.
type checker struct {
	in   Input
	opts Options
	r    *Report
	// byTask holds the judged Jobs of each existing Task, by name.
	byTask map[string][]Job
	// surplus counts, per Task, the Jobs beyond the first of each attempt.
	surplus map[string]int
}

// Check judges in against every invariant and returns what it found.
func Check(in Input, opts Options) *Report {
	c := &checker{in: in, opts: opts, r: &Report{Counts: map[Category]int{}}, byTask: map[string][]Job{}, surplus: map[string]int{}}
	c.r.Tasks, c.r.Jobs = len(in.Tasks), len(in.Jobs)
	seen := c.judged()
	c.jobs(seen)
	c.attempts(seen)
	for i := range in.Tasks {
		c.task(&in.Tasks[i])
	}
	c.listed()
	return c.r
}

// judged is the Jobs judged per Task: Input.Seen, or the Jobs listed that a Task controls;
// less those whose Task is known not to exist (orphans, which listed judges).
func (c *checker) judged() []Job {
	seen := c.in.Seen
	if seen == nil {
		for i := range c.in.Jobs {
			if j := FromJob(&c.in.Jobs[i]); j.Task != "" {
				seen = append(seen, j)
			}
		}
	}
	uids := map[types.UID]bool{}
	for _, t := range c.in.Tasks {
		uids[t.UID] = true
	}
	return slices.DeleteFunc(slices.Clone(seen), func(j Job) bool { return j.TaskUID != "" && !uids[j.TaskUID] })
}

// jobs counts what each Job shows on its own: its pods, its outcome, a name used before.
func (c *checker) jobs(seen []Job) {
	parallelism := map[string]int{}
	for _, t := range c.in.Tasks {
		parallelism[t.Name] = max(1, int(t.Spec.Parallelism))
	}
	names := map[string]int{}
	for _, j := range seen {
		c.byTask[j.Task] = append(c.byTask[j.Task], j)
		names[j.Name]++
		c.r.Seen++
		switch j.Outcome {
		case Complete:
			c.r.Completed++
		case Failed:
			c.r.JobsFailed++
		}
		if atoi(j.Attempt) > 1 {
			c.r.Retries++
		}
		if j.PodSucceeded && j.Outcome != Complete && j.Deleted {
			c.r.CancelledAtSuccess++
		}
		if p := max(1, parallelism[j.Task]); j.Pods > p {
			c.r.violate(ExtraPods, 1, "Job %s ran %d pods, parallelism %d", j.Name, j.Pods, p)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if n := names[name]; n > 1 {
			task := taskOfJob(seen, name)
			c.r.violate(Duplicates, n-1, "Job name %s used %d times [Jobs %s]", name, n, describeJobs(c.byTask[task]))
		}
	}
}

// attempts counts the Jobs beyond the first of each attempt of each run, and a Task without a
// schedule holding more Jobs than its status counts attempts.
func (c *checker) attempts(seen []Job) {
	perAttempt := map[string][]Job{}
	for _, j := range seen {
		perAttempt[j.attemptKey()] = append(perAttempt[j.attemptKey()], j)
	}
	for _, key := range slices.Sorted(maps.Keys(perAttempt)) {
		if jobs := perAttempt[key]; len(jobs) > 1 {
			task := jobs[0].Task
			c.surplus[task] += len(jobs) - 1
			c.r.violate(Duplicates, len(jobs)-1, "%s ran %d times [Jobs %s]", key, len(jobs), describeJobs(c.byTask[task]))
		}
	}
	for i := range c.in.Tasks {
		task := &c.in.Tasks[i]
		if c.opts.expect(task).Scheduled {
			continue
		}
		n, attempts := len(c.byTask[task.Name]), int(task.Status.Attempts)
		if extra := n - attempts - c.surplus[task.Name]; extra > 0 {
			c.r.violate(Duplicates, extra, "task %s: %d Jobs for %d attempts [Jobs %s]", task.Name, n, attempts, describeJobs(c.byTask[task.Name]))
		}
	}
}

// listed counts what the Jobs listed at the end show: no owner, a finalizer left.
func (c *checker) listed() {
	uids := map[types.UID]bool{}
	for _, t := range c.in.Tasks {
		uids[t.UID] = true
	}
	for i := range c.in.Jobs {
		job := &c.in.Jobs[i]
		if controllerutil.ContainsFinalizer(job, v1.FinalizerRunOutcome) {
			c.r.violate(FinalizersLeft, 1, "Job %s still holds its finalizer", job.Name)
		}
		owner := metav1.GetControllerOf(job)
		if (owner == nil || owner.Kind != v1.Kind || !uids[owner.UID]) && job.DeletionTimestamp == nil {
			c.r.violate(Orphans, 1, "job %s has no existing owner Task", job.Name)
		}
	}
}

func taskOfJob(jobs []Job, name string) string {
	for _, j := range jobs {
		if j.Name == name {
			return j.Task
		}
	}
	return ""
}
