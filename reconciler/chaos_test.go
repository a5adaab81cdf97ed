package reconciler_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
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
// Task must finish. Checked from every Job and pod that existed, as watch events reported them:
//
//   - no attempt of any run (Task, schedule time, attempt) has two Jobs, no Job name is reused;
//   - no run whose Job completed has another attempt;
//   - every Job ran at most one pod (parallelism 1, no evictions);
//   - every Task ends Succeeded or Failed with the attempts its Jobs show, and its status
//     (currentRun, attempts, conditions, kstatus) agrees with its Jobs;
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
	if report.violations() > 0 {
		t.Errorf("%d invariant violations; first: %s", report.violations(), strings.Join(report.examples, "; "))
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
	var tasks v1.TaskList
	if err := c.c.List(ctx, &tasks, client.InNamespace(c.ns)); err != nil {
		return false, err
	}
	var open []string
	for _, task := range tasks.Items {
		if task.Status.Phase != v1.PhaseSucceeded && task.Status.Phase != v1.PhaseFailed || len(task.Finalizers) > 0 {
			open = append(open, fmt.Sprintf("%s(%s, attempts %d, finalizers %v)", task.Name, task.Status.Phase, task.Status.Attempts, task.Finalizers))
		}
	}
	var jobs batchv1.JobList
	if err := c.c.List(ctx, &jobs, client.InNamespace(c.ns)); err != nil {
		return false, err
	}
	for _, job := range jobs.Items {
		if controllerutil.ContainsFinalizer(&job, v1.FinalizerRunOutcome) {
			open = append(open, "job "+job.Name+" holds its finalizer")
		}
	}
	if len(open) > 0 {
		return false, fmt.Errorf("%d open: %s", len(open), strings.Join(open[:min(5, len(open))], ", "))
	}
	return true, nil
}

// chaosReport counts what happened and what was wrong.
type chaosReport struct {
	tasks                                       map[chaosKind]int
	succeeded, failed                           int
	jobs, runs, retries, completed, jobsFailed  int
	jobsDeleted, scheduleEdits, fixes           int64
	sigkills, leaderChanges                     int
	twice, rerunAfterSuccess, extraPods         int
	cancelledAtSuccess                          int
	wrongEnd, statusLies, finalizersLeft, other int
	examples                                    []string
}

func (r *chaosReport) violate(counter *int, format string, args ...any) {
	*counter++
	if len(r.examples) < 10 {
		r.examples = append(r.examples, fmt.Sprintf(format, args...))
	}
}

func (r *chaosReport) violations() int {
	return r.twice + r.rerunAfterSuccess + r.extraPods + r.wrongEnd + r.statusLies + r.finalizersLeft + r.other
}

func (r *chaosReport) String() string {
	var b strings.Builder
	kinds := []chaosKind{kindOnce, kindFlaky, kindDoomed, kindCron}
	var mix []string
	for _, k := range kinds {
		mix = append(mix, fmt.Sprintf("%d %s", r.tasks[k], k))
	}
	fmt.Fprintf(&b, "  Tasks                         %s\n", strings.Join(mix, ", "))
	fmt.Fprintf(&b, "  ended                         %d Succeeded, %d Failed\n", r.succeeded, r.failed)
	fmt.Fprintf(&b, "  Jobs (attempts) created       %d for %d runs: %d retries; %d completed, %d failed\n", r.jobs, r.runs, r.retries, r.completed, r.jobsFailed)
	fmt.Fprintf(&b, "  chaos                         %d SIGKILLs, %d leader changes, %d Jobs deleted, %d schedule edits, %d Tasks fixed\n",
		r.sigkills, r.leaderChanges, r.jobsDeleted, r.scheduleEdits, r.fixes)
	fmt.Fprintf(&b, "  cancelled as their pod ended  %d (deleted before the Job controller counted the pod's success: a failed attempt)\n", r.cancelledAtSuccess)
	fmt.Fprintf(&b, "  attempts run twice            %d\n", r.twice)
	fmt.Fprintf(&b, "  succeeded runs run again      %d\n", r.rerunAfterSuccess)
	fmt.Fprintf(&b, "  Jobs with more than one pod   %d\n", r.extraPods)
	fmt.Fprintf(&b, "  wrong final state             %d\n", r.wrongEnd)
	fmt.Fprintf(&b, "  status disagreeing with Jobs  %d\n", r.statusLies)
	fmt.Fprintf(&b, "  finalizers left               %d\n", r.finalizersLeft)
	return b.String()
}

// check judges the end state against every Job and pod the watch saw.
func (c *chaos) check(ctx context.Context) *chaosReport {
	r := &chaosReport{tasks: map[chaosKind]int{}, jobsDeleted: c.jobsDeleted.Load(), scheduleEdits: c.scheduleEdits.Load(), fixes: c.fixes.Load()}
	var tasks v1.TaskList
	if err := c.c.List(ctx, &tasks, client.InNamespace(c.ns)); err != nil {
		c.t.Fatal(err)
	}
	seen := c.w.all()
	byTask := map[string][]jobSeen{}
	names := map[string]int{}
	attempts := map[string]int{}
	taskOf := map[string]string{}
	for _, j := range seen {
		byTask[j.Task] = append(byTask[j.Task], j)
		names[j.Name]++
		attempts[j.runKey()]++
		taskOf[j.runKey()], taskOf[j.Name] = j.Task, j.Task
		r.jobs++
		switch j.Outcome {
		case "Complete":
			r.completed++
		case "Failed":
			r.jobsFailed++
		}
		if n, _ := strconv.Atoi(j.Attempt); n > 1 {
			r.retries++
		}
		if len(j.Pods) > 1 {
			r.violate(&r.extraPods, "Job %s ran %d pods", j.Name, len(j.Pods))
		}
		if j.PodSucceeded && j.Outcome != "Complete" && j.Deleted {
			r.cancelledAtSuccess++
		}
	}
	for key, n := range attempts {
		if n > 1 {
			r.violate(&r.twice, "%s ran %d times [Jobs %s]", key, n, describeJobs(byTask[taskOf[key]]))
		}
	}
	for name, n := range names {
		if n > 1 {
			r.violate(&r.twice, "Job name %s used %d times [Jobs %s]", name, n, describeJobs(byTask[taskOf[name]]))
		}
	}
	for i := range tasks.Items {
		task := &tasks.Items[i]
		kind := c.kinds[task.Name]
		r.tasks[kind]++
		c.checkTask(r, task, kind, byTask[task.Name])
	}
	var jobs batchv1.JobList
	if err := c.c.List(ctx, &jobs, client.InNamespace(c.ns)); err != nil {
		c.t.Fatal(err)
	}
	for _, job := range jobs.Items {
		if controllerutil.ContainsFinalizer(&job, v1.FinalizerRunOutcome) {
			r.violate(&r.finalizersLeft, "Job %s still holds its finalizer", job.Name)
		}
	}
	return r
}

// checkTask checks one Task's end state against its Jobs, oldest first.
func (c *chaos) checkTask(r *chaosReport, task *v1.Task, kind chaosKind, jobs []jobSeen) {
	st := task.Status
	// Every violation names what it was judged from: the Task's Jobs and its run record.
	violate := func(counter *int, format string, args ...any) {
		r.violate(counter, format+" [%s]", append(args, describeTask(task, jobs))...)
	}
	r.runs += len(runsOf(jobs))
	for _, run := range runsOf(jobs) {
		// Once an attempt completed, the run is done: no later attempt.
		done := ""
		for _, j := range run {
			if done != "" {
				violate(&r.rerunAfterSuccess, "%s: %s ran after %s completed", task.Name, j.Name, done)
			}
			if j.Outcome == "Complete" {
				done = j.Name
			}
		}
	}
	if len(task.Finalizers) > 0 {
		violate(&r.finalizersLeft, "Task %s still holds %v", task.Name, task.Finalizers)
	}
	switch st.Phase {
	case v1.PhaseSucceeded:
		r.succeeded++
	case v1.PhaseFailed:
		r.failed++
	default:
		violate(&r.wrongEnd, "%s ended %s", task.Name, st.Phase)
		return
	}
	if len(jobs) == 0 {
		violate(&r.wrongEnd, "%s is %s without any Job", task.Name, st.Phase)
		return
	}
	latest := latestOf(jobs)
	current := runsOf(jobs)[len(runsOf(jobs))-1]
	switch {
	case st.CurrentRun == nil || st.CurrentRun.Job.Name != latest.Name || st.CurrentRun.Job.UID != latest.UID:
		violate(&r.statusLies, "%s: currentRun %+v, but its newest Job is %s", task.Name, st.CurrentRun, latest.Name)
	case strconv.Itoa(int(st.Attempts)) != latest.Attempt || st.Attempts != st.CurrentRun.Attempt:
		violate(&r.statusLies, "%s: attempts %d, currentRun.attempt %d, newest Job %s is attempt %s", task.Name, st.Attempts, st.CurrentRun.Attempt, latest.Name, latest.Attempt)
	case st.Phase == v1.PhaseSucceeded && latest.Outcome != "Complete":
		violate(&r.statusLies, "%s: Succeeded, but its last Job %s did not complete (%s)", task.Name, latest.Name, latest)
	case st.Phase == v1.PhaseFailed && slices.ContainsFunc(current, func(j jobSeen) bool { return j.Outcome == "Complete" }):
		violate(&r.statusLies, "%s: Failed, but a Job of its run completed", task.Name)
	case st.Phase == v1.PhaseFailed && st.Attempts != chaosMaxRetries+1:
		violate(&r.statusLies, "%s: Failed after %d attempts, maxRetries is %d", task.Name, st.Attempts, chaosMaxRetries)
	}
	if kind == kindOnce || kind == kindFlaky || kind == kindDoomed {
		// A one-shot Task has one run: its attempts are its Jobs.
		if len(runsOf(jobs)) != 1 || len(jobs) != int(st.Attempts) {
			violate(&r.statusLies, "%s: %d Jobs in %d runs for %d attempts", task.Name, len(jobs), len(runsOf(jobs)), st.Attempts)
		}
	}
	wantKind := map[v1.Phase]bool{v1.PhaseSucceeded: kind != kindDoomed, v1.PhaseFailed: kind == kindDoomed || kind == kindCron}
	if !wantKind[st.Phase] && !(kind != kindDoomed && st.Phase == v1.PhaseFailed && allAttemptsDeletedOrFailed(current)) {
		violate(&r.wrongEnd, "%s (%s) ended %s", task.Name, kind, st.Phase)
	}
	c.checkConditions(r, task, violate)
}

// allAttemptsDeletedOrFailed: a Task meant to succeed may end Failed if the chaos deleted or
// failed every attempt of its run.
func allAttemptsDeletedOrFailed(run []jobSeen) bool {
	return len(run) == chaosMaxRetries+1 && !slices.ContainsFunc(run, func(j jobSeen) bool { return j.Outcome == "Complete" })
}

// checkConditions checks the conditions and kstatus of a Task that ended; violate counts in r's
// counters.
func (c *chaos) checkConditions(r *chaosReport, task *v1.Task, violate func(counter *int, format string, args ...any)) {
	st := task.Status
	want := map[string]metav1.ConditionStatus{}
	wantK := kstatus.CurrentStatus
	if st.Phase == v1.PhaseSucceeded {
		want = map[string]metav1.ConditionStatus{"Ready": "True", "Succeeded": "True", "Failed": "False", "Reconciling": "False", "Stalled": "False"}
	} else {
		want = map[string]metav1.ConditionStatus{"Ready": "False", "Succeeded": "False", "Failed": "True", "Reconciling": "False", "Stalled": "True"}
		wantK = kstatus.FailedStatus
	}
	for typ, s := range want {
		if c := meta.FindStatusCondition(st.Conditions, typ); c == nil || c.Status != s || c.ObservedGeneration != task.Generation {
			violate(&r.statusLies, "%s (%s): condition %s = %+v, want %s at generation %d", task.Name, st.Phase, typ, c, s, task.Generation)
		}
	}
	if got, err := kstatusOf(task); err != nil || got != wantK {
		violate(&r.statusLies, "%s (%s): kstatus %s, want %s", task.Name, st.Phase, got, wantK)
	}
}

// runsOf groups a Task's Jobs by run, oldest run first, attempts in order.
func runsOf(jobs []jobSeen) [][]jobSeen {
	byRun := map[string][]jobSeen{}
	var keys []string
	for _, j := range jobs {
		key := j.Scheduled
		if _, ok := byRun[key]; !ok {
			keys = append(keys, key)
		}
		byRun[key] = append(byRun[key], j)
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a] < keys[b] }) // RFC 3339 UTC sorts by time; "" (one-shot) first
	out := make([][]jobSeen, 0, len(keys))
	for _, k := range keys {
		run := byRun[k]
		sort.Slice(run, func(a, b int) bool { return atoi(run[a].Attempt) < atoi(run[b].Attempt) })
		out = append(out, run)
	}
	return out
}

// latestOf is the Job of the newest run and attempt.
func latestOf(jobs []jobSeen) jobSeen {
	runs := runsOf(jobs)
	last := runs[len(runs)-1]
	return last[len(last)-1]
}

// describeTask is what a violation is judged from: the Task's phase and run record, and every
// Job seen for it (name, attempt, outcome, deleted), oldest run first.
func describeTask(task *v1.Task, jobs []jobSeen) string {
	st := task.Status
	rec := "none"
	if cr := st.CurrentRun; cr != nil {
		rec = fmt.Sprintf("scheduled %s attempt %d job %s outcome %s finished %s retry %s",
			formatTime(cr.ScheduledTime), cr.Attempt, cr.Job.Name, cr.Outcome, formatTime(cr.FinishTime), formatTime(cr.RetryTime))
	}
	return fmt.Sprintf("phase %s, attempts %d, lastError %q, currentRun {%s}; Jobs %s",
		st.Phase, st.Attempts, st.LastError, rec, describeJobs(jobs))
}

// describeJobs lists a Task's Jobs as seen (name, attempt, outcome, deleted), oldest run first.
func describeJobs(jobs []jobSeen) string {
	var seen []string
	for _, run := range runsOf(jobs) {
		for _, j := range run {
			seen = append(seen, j.String())
		}
	}
	return strings.Join(seen, ", ")
}

func formatTime(t *metav1.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
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
