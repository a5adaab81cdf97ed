package reconciler_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/internal/testenv/invariants"
)

// The chaos test (issue #14, "proof under chaos"). A smoke size (30 Tasks, 40 s) runs in
// `make test`;
//
//	go test ./reconciler/ -run TestChaos -chaos.full -timeout 30m
//
// runs the full size. -chaos.seed replays a run.
var (
	chaosFull  = flag.Bool("chaos.full", false, "run TestChaos at full size (300 Tasks, 5 minutes of chaos)")
	chaosTasks = flag.Int("chaos.tasks", 0, "Tasks in TestChaos (default 30, 300 with -chaos.full)")
	chaosFor   = flag.Duration("chaos.duration", 0, "how long TestChaos keeps the chaos up (default 40s, 5m with -chaos.full)")
	chaosSeed  = flag.Uint64("chaos.seed", 0, "seed of TestChaos' random choices (default: the time)")
)

// chaosKind is what a Task of the chaos mix is for.
type chaosKind string

const (
	kindOnce   chaosKind = "one-shot"           // succeeds; half with a TTL of 0
	kindFlaky  chaosKind = "failing-then-fixed" // fails until the chaos client lifts its outcome label
	kindDoomed chaosKind = "always-failing"     // fails every attempt
	kindCron   chaosKind = "scheduled"          // @every 10s/12s, Allow, Forbid or Replace; half with a TTL of 0
)

const chaosMaxRetries = 3

// TestChaos runs a mix of Tasks on two operator replicas with leader election while the
// replicas are SIGKILLed and restarted at random (the leader half of the time), a chaos client
// deletes random Jobs and edits schedules, and failing Tasks are fixed along the way. At the end
// the schedules are removed (each scheduled Task's latest run becomes its only run) and every
// Task must finish. Judged by the invariant checker the bench's fault scenarios share
// (internal/testenv/invariants), from every Job and pod that existed, as watch events reported
// them, and the Tasks and Jobs at the end:
//
//   - no attempt of any run (Task, run, attempt) has two Jobs, no Job name is reused, a Task
//     without a schedule has no more Jobs than attempts;
//   - no run whose Job completed has another attempt;
//   - every Job ran at most one pod (parallelism 1, no evictions);
//   - no Job outlives its Task (orphan);
//   - every Task ends Succeeded or Failed as its kind allows, with the attempts its Jobs show,
//     and its status (currentRun, attempts, conditions, kstatus) agrees with its Jobs;
//   - no Job and no Task is left holding a finalizer.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test: needs a control plane and operator processes")
	}
	size := chaosSize()
	t.Logf("chaos: %d Tasks, %s of chaos, seed %d", size.tasks, size.chaos, size.seed)
	ctx, cancel := context.WithTimeout(context.Background(), size.chaos+6*time.Minute)
	defer cancel()

	fleet := startFleet(ctx, t, 2)
	ns := fleet.namespace(ctx, t)
	w := newJobWatch(t, fleet.config(), ns)
	transitionsBefore, err := leaderChanges(ctx, fleet)
	if err != nil {
		t.Fatalf("read the Lease: %v", err)
	}
	c := &chaos{t: t, c: fleet.client(), ns: ns, w: w, rng: rand.New(rand.NewPCG(size.seed, 0xc4a05)), kinds: map[string]chaosKind{}}

	c.createTasks(ctx, size.tasks)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, actor := range []func(context.Context, <-chan struct{}){
		func(ctx context.Context, stop <-chan struct{}) { c.killReplicas(ctx, stop, fleet) },
		c.deleteJobs,
		c.editSchedules,
		c.fixFlaky,
	} {
		wg.Go(func() { actor(ctx, stop) })
	}
	sleep(ctx, size.chaos)
	close(stop)
	wg.Wait()

	// Quiet again: both replicas up, schedules removed, every Task finishes.
	fleet.ensure(ctx, t, 2)
	c.removeSchedules(ctx)
	c.fixAll(ctx)
	c.waitSettled()

	report := c.check(ctx)
	transitions, err := leaderChanges(ctx, fleet)
	if err != nil {
		t.Fatalf("read the Lease: %v", err)
	}
	report.sigkills, report.leaderChanges = fleet.kills(), transitions-transitionsBefore
	t.Logf("chaos results (seed %d):\n%s", size.seed, report)
	if report.Violations() > 0 {
		t.Errorf("%d invariant violations; first: %s", report.Violations(), strings.Join(report.Examples, "; "))
	}
	if report.sigkills == 0 || report.jobsDeleted == 0 || report.scheduleEdits == 0 {
		t.Errorf("the chaos did not happen: %d SIGKILLs, %d Jobs deleted, %d schedule edits", report.sigkills, report.jobsDeleted, report.scheduleEdits)
	}
}

type chaosSizes struct {
	tasks int
	chaos time.Duration
	seed  uint64
}

func chaosSize() chaosSizes {
	s := chaosSizes{tasks: 30, chaos: 40 * time.Second, seed: *chaosSeed}
	if *chaosFull {
		s.tasks, s.chaos = 300, 5*time.Minute
	}
	if *chaosTasks > 0 {
		s.tasks = *chaosTasks
	}
	if *chaosFor > 0 {
		s.chaos = *chaosFor
	}
	if s.seed == 0 {
		s.seed = uint64(time.Now().UnixNano())
	}
	return s
}

// chaos is the chaos client and the bookkeeping of what it did.
type chaos struct {
	t  *testing.T
	c  client.Client
	ns string
	w  *jobWatch

	mu    sync.Mutex
	rng   *rand.Rand
	kinds map[string]chaosKind
	fixed map[string]bool

	jobsDeleted, scheduleEdits, fixes atomic.Int64
}

func (c *chaos) intn(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.IntN(n)
}

// between is a random duration in [lo, hi].
func (c *chaos) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(c.intn(int(hi-lo)+1))
}

func (c *chaos) createTasks(ctx context.Context, n int) {
	c.fixed = map[string]bool{}
	policies := []v1.ConcurrencyPolicy{v1.AllowConcurrent, v1.ForbidConcurrent, v1.ReplaceConcurrent}
	for i := range n {
		kind := []chaosKind{kindOnce, kindOnce, kindOnce, kindOnce, kindFlaky, kindFlaky, kindDoomed, kindCron, kindCron, kindCron}[i%10]
		task := &v1.Task{
			ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: fmt.Sprintf("%s-%03d", kindPrefix(kind), i), Labels: map[string]string{
				testenv.RunSecondsLabel: strconv.Itoa(1 + c.intn(3)),
			}},
			Spec: v1.TaskSpec{
				Runner: v1.Runner{Type: v1.RunnerShell, Shell: &v1.ShellRunner{Script: "true"}},
				Retry: &v1.RetryPolicy{MaxRetries: chaosMaxRetries, Backoff: &v1.Backoff{
					Initial: &metav1.Duration{Duration: 2 * time.Second}, Factor: 2, Max: &metav1.Duration{Duration: 4 * time.Second},
				}},
			},
		}
		switch kind {
		case kindFlaky, kindDoomed:
			task.Labels[outcome] = fail
		case kindCron:
			task.Spec.Schedule = &v1.Schedule{Cron: "@every 10s", ConcurrencyPolicy: policies[i%len(policies)]}
		}
		if (kind == kindOnce || kind == kindCron) && i%20 < 10 {
			task.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
		}
		c.kinds[task.Name] = kind
		retryWrite(ctx, c.t, "create "+task.Name, func() error { return c.c.Create(ctx, task) })
	}
}

func kindPrefix(k chaosKind) string {
	switch k {
	case kindOnce:
		return "once"
	case kindFlaky:
		return "flaky"
	case kindDoomed:
		return "doomed"
	default:
		return "cron"
	}
}

// killReplicas SIGKILLs a replica every 4 to 10 seconds, the leader half of the time, and
// starts a new one in its place.
func (c *chaos) killReplicas(ctx context.Context, stop <-chan struct{}, f *fleet) {
	for waitOrStop(ctx, stop, c.between(4*time.Second, 10*time.Second)) {
		f.killOne(ctx, c.t, c.intn(2) == 0, c.intn)
	}
}

// deleteJobs deletes a random Job every 1 to 3 seconds, active or finished.
func (c *chaos) deleteJobs(ctx context.Context, stop <-chan struct{}) {
	for waitOrStop(ctx, stop, c.between(time.Second, 3*time.Second)) {
		var live []jobSeen
		for _, j := range c.w.all() {
			if !j.Deleted {
				live = append(live, j)
			}
		}
		if len(live) == 0 {
			continue
		}
		j := live[c.intn(len(live))]
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: j.Name}}
		err := c.c.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &j.UID})
		if err == nil {
			c.jobsDeleted.Add(1)
		}
	}
}

// editSchedules switches a random scheduled Task between two schedules every 3 to 8 seconds.
func (c *chaos) editSchedules(ctx context.Context, stop <-chan struct{}) {
	var crons []string
	for name, k := range c.kinds {
		if k == kindCron {
			crons = append(crons, name)
		}
	}
	sort.Strings(crons)
	if len(crons) == 0 {
		return
	}
	for waitOrStop(ctx, stop, c.between(3*time.Second, 8*time.Second)) {
		name := crons[c.intn(len(crons))]
		if c.update(ctx, name, func(t *v1.Task) {
			if t.Spec.Schedule == nil {
				return
			}
			t.Spec.Schedule.Cron = map[string]string{"@every 10s": "@every 12s", "@every 12s": "@every 10s"}[t.Spec.Schedule.Cron]
		}) {
			c.scheduleEdits.Add(1)
		}
	}
}

// fixFlaky lifts the failing label of a failing-then-fixed Task once its first attempt exists.
func (c *chaos) fixFlaky(ctx context.Context, stop <-chan struct{}) {
	for waitOrStop(ctx, stop, time.Second) {
		for _, j := range c.w.all() {
			if c.kinds[j.Task] != kindFlaky || c.fixed[j.Task] {
				continue
			}
			if c.update(ctx, j.Task, func(t *v1.Task) { delete(t.Labels, outcome) }) {
				c.fixed[j.Task] = true
				c.fixes.Add(1)
			}
		}
	}
}

// fixAll fixes the flaky Tasks that never got a Job during the chaos, so that every flaky Task
// can succeed.
func (c *chaos) fixAll(ctx context.Context) {
	for name, k := range c.kinds {
		if k == kindFlaky && !c.fixed[name] {
			c.update(ctx, name, func(t *v1.Task) { delete(t.Labels, outcome) })
			c.fixed[name] = true
		}
	}
}

func (c *chaos) removeSchedules(ctx context.Context) {
	for name, k := range c.kinds {
		if k == kindCron {
			if !c.update(ctx, name, func(t *v1.Task) { t.Spec.Schedule = nil }) {
				c.t.Fatalf("could not remove the schedule of %s", name)
			}
		}
	}
}

// update applies mut to the Task, retrying conflicts and a webhook that is briefly away (a
// replica was just killed). It reports whether the write went through.
func (c *chaos) update(ctx context.Context, name string, mut func(*v1.Task)) bool {
	for range 20 {
		task := &v1.Task{}
		if err := c.c.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: name}, task); err != nil {
			return false
		}
		mut(task)
		err := c.c.Update(ctx, task)
		if err == nil {
			return true
		}
		if !apierrors.IsConflict(err) && !isWebhookDown(err) {
			c.t.Logf("update %s: %v", name, err)
			return false
		}
		if !waitOrStop(ctx, nil, 500*time.Millisecond) {
			return false
		}
	}
	return false
}

// waitSettled waits until every Task is Succeeded or Failed and nothing holds a finalizer.
func (c *chaos) waitSettled() {
	testenv.Eventually(c.t, 5*time.Minute, "every Task to settle after the chaos", c.settled)
}

func (c *chaos) settled(ctx context.Context) (bool, error) {
	in, err := invariants.Collect(ctx, c.c, c.ns)
	if err != nil {
		return false, err
	}
	if open := invariants.Unsettled(in); len(open) > 0 {
		return false, fmt.Errorf("%d open: %s", len(open), strings.Join(open[:min(5, len(open))], ", "))
	}
	return true, nil
}

// chaosReport is what the chaos did and what the invariant checker found.
type chaosReport struct {
	tasks                             map[chaosKind]int
	jobsDeleted, scheduleEdits, fixes int64
	sigkills, leaderChanges           int
	*invariants.Report
}

func (r *chaosReport) String() string {
	var mix []string
	for _, k := range []chaosKind{kindOnce, kindFlaky, kindDoomed, kindCron} {
		mix = append(mix, fmt.Sprintf("%d %s", r.tasks[k], k))
	}
	return fmt.Sprintf("  Tasks                         %s\n", strings.Join(mix, ", ")) +
		fmt.Sprintf("  chaos                         %d SIGKILLs, %d leader changes, %d Jobs deleted, %d schedule edits, %d Tasks fixed\n",
			r.sigkills, r.leaderChanges, r.jobsDeleted, r.scheduleEdits, r.fixes) +
		r.Report.String()
}

// check judges the end state against every Job and pod the watch saw.
func (c *chaos) check(ctx context.Context) *chaosReport {
	in, err := invariants.Collect(ctx, c.c, c.ns)
	if err != nil {
		c.t.Fatal(err)
	}
	in.Seen = seenJobs(c.w.all())
	r := &chaosReport{tasks: map[chaosKind]int{}, jobsDeleted: c.jobsDeleted.Load(), scheduleEdits: c.scheduleEdits.Load(), fixes: c.fixes.Load()}
	for _, task := range in.Tasks {
		r.tasks[c.kinds[task.Name]]++
	}
	// The chaos deletes Jobs: a Task meant to succeed may fail if it lost every attempt.
	r.Report = invariants.Check(in, invariants.Options{Expect: c.expect, JobsDeleted: true})
	return r
}

// expect is what a Task of the mix was set up to do. A scheduled Task's schedule is removed at
// the end; its Jobs still span several runs.
func (c *chaos) expect(task *v1.Task) invariants.Expect {
	switch c.kinds[task.Name] {
	case kindDoomed:
		return invariants.Expect{MayFail: true}
	case kindCron:
		return invariants.Expect{Scheduled: true, MaySucceed: true, MayFail: true}
	default:
		return invariants.Succeeds
	}
}

// seenJobs is what the watch saw, as the checker reads it.
func seenJobs(seen []jobSeen) []invariants.Job {
	out := make([]invariants.Job, 0, len(seen))
	for _, j := range seen {
		out = append(out, invariants.Job{
			Name: j.Name, UID: j.UID, Task: j.Task, Run: j.Run, Attempt: j.Attempt, Scheduled: j.Scheduled,
			Outcome: j.Outcome, Deleted: j.Deleted, Pods: len(j.Pods), PodSucceeded: j.PodSucceeded, ReplacedBy: j.ReplacedBy,
		})
	}
	return out
}

// waitOrStop waits d; false when stop closed or ctx ended first.
func waitOrStop(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	case <-time.After(d):
		return true
	}
}

func sleep(ctx context.Context, d time.Duration) { waitOrStop(ctx, nil, d) }

// retryWrite retries a write that fails while no replica serves the webhooks.
func retryWrite(ctx context.Context, t *testing.T, what string, write func() error) {
	t.Helper()
	for {
		err := write()
		if err == nil || apierrors.IsAlreadyExists(err) {
			return
		}
		if !isWebhookDown(err) || !waitOrStop(ctx, nil, 500*time.Millisecond) {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

func isWebhookDown(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "failed calling webhook") || strings.Contains(msg, "connection refused") ||
		strings.Contains(msg, "no endpoints") || apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)
}

// leaderChanges reads how many times the operator's Lease changed hands (its
// leaseTransitions, which the leader election keeps exactly).
func leaderChanges(ctx context.Context, f *fleet) (int, error) {
	lease := &coordinationv1.Lease{}
	if err := f.client().Get(ctx, types.NamespacedName{Namespace: f.operatorNamespace(), Name: leaseName}, lease); err != nil {
		return 0, err
	}
	return int(ptr.Deref(lease.Spec.LeaseTransitions, 0)), nil
}

// leaseName is the operator's default --leader-election-id.
const leaseName = "task-operator.example.com"
