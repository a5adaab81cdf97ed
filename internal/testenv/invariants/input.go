package invariants

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "example.com/task-operator/apis/v1"
)

// Input is what Check judges.
type Input struct {
	// Tasks are the scenario's Tasks at the end.
	Tasks []v1.Task
	// Jobs are the operator's Jobs (those with the Task label) at the end.
	Jobs []batchv1.Job
	// Seen is every Job seen over the scenario, deleted ones included, as a watch reported
	// them. Nil judges the Jobs listed at the end instead (FromJob), which cannot show a Job
	// deleted before the end.
	Seen []Job
}

// Outcomes of a Job: its terminal condition.
const (
	Complete = string(batchv1.JobComplete)
	Failed   = string(batchv1.JobFailed)
)

// Job is what was seen of one Job over its life.
type Job struct {
	Name string
	UID  types.UID
	// Task is the name of the Task that controls the Job. TaskUID is its UID, when known: a
	// Job whose TaskUID is not among the Tasks' is an orphan and judged as such only.
	Task    string
	TaskUID types.UID
	// Run and Attempt are the Job's labels, Scheduled its scheduled-time annotation.
	Run, Attempt, Scheduled string
	// Outcome is Complete or Failed once a terminal condition was seen, else "".
	Outcome string
	// Deleted says the Job is gone or being deleted.
	Deleted bool
	// Pods is how many pods ran for it; PodSucceeded says one of them ended Succeeded.
	Pods         int
	PodSucceeded bool
	// ReplacedBy is the replaced-by annotation: the Job that concurrency policy Replace
	// deleted it for.
	ReplacedBy string
}

func (j Job) String() string {
	outcome := j.Outcome
	if outcome == "" {
		outcome = "no outcome"
	}
	s := fmt.Sprintf("%s(attempt %s, %s, deleted %v, %d pods", j.Name, j.Attempt, outcome, j.Deleted, j.Pods)
	if j.ReplacedBy != "" {
		s += ", replaced by " + j.ReplacedBy
	}
	return s + ")"
}

// attemptKey names an attempt of a run of a Task: what must never have two Jobs. The run
// label identifies the run (a scheduled run's label is its scheduled time), so two Jobs of one
// run label and attempt are one attempt run twice whatever their scheduled-time annotations.
func (j Job) attemptKey() string {
	return j.Task + " run=" + j.Run + " attempt=" + j.Attempt
}

// FromJob is what a Job as listed shows of its life: the pods its status counts, its terminal
// condition, its deletion.
func FromJob(job *batchv1.Job) Job {
	j := Job{
		Name: job.Name, UID: job.UID,
		Run: job.Labels[v1.LabelRun], Attempt: job.Labels[v1.LabelAttempt],
		Scheduled: job.Annotations[v1.AnnotationScheduledTime], ReplacedBy: job.Annotations[v1.AnnotationReplacedBy],
		Deleted:      job.DeletionTimestamp != nil,
		Pods:         int(job.Status.Active + job.Status.Succeeded + job.Status.Failed),
		PodSucceeded: job.Status.Succeeded > 0,
	}
	if owner := metav1.GetControllerOf(job); owner != nil && owner.Kind == v1.Kind {
		j.Task, j.TaskUID = owner.Name, owner.UID
	}
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			j.Outcome = string(c.Type)
			break
		}
	}
	return j
}

// Collect lists the Tasks of ns and the operator's Jobs in it.
func Collect(ctx context.Context, c client.Reader, ns string) (Input, error) {
	var in Input
	var tasks v1.TaskList
	if err := c.List(ctx, &tasks, client.InNamespace(ns)); err != nil {
		return in, fmt.Errorf("list the Tasks in %s: %w", ns, err)
	}
	var jobs batchv1.JobList
	if err := c.List(ctx, &jobs, client.InNamespace(ns), client.HasLabels{v1.LabelTaskName}); err != nil {
		return in, fmt.Errorf("list the Jobs in %s: %w", ns, err)
	}
	in.Tasks, in.Jobs = tasks.Items, jobs.Items
	return in, nil
}

// Unsettled lists what still moves: Tasks neither Succeeded nor Failed or holding a
// finalizer, Jobs holding the run-outcome finalizer. A scenario waits until it is empty
// before Check, so that a finalizer about to be released is not counted as left.
func Unsettled(in Input) []string {
	var open []string
	for _, task := range in.Tasks {
		if !terminal(&task) || len(task.Finalizers) > 0 {
			open = append(open, fmt.Sprintf("%s(%s, attempts %d, finalizers %v)", task.Name, task.Status.Phase, task.Status.Attempts, task.Finalizers))
		}
	}
	for i := range in.Jobs {
		if controllerutil.ContainsFinalizer(&in.Jobs[i], v1.FinalizerRunOutcome) {
			open = append(open, "job "+in.Jobs[i].Name+" holds its finalizer")
		}
	}
	return open
}

func terminal(task *v1.Task) bool {
	return task.Status.Phase == v1.PhaseSucceeded || task.Status.Phase == v1.PhaseFailed
}

// runsOf groups a Task's Jobs by run, oldest run first, attempts in order.
func runsOf(jobs []Job) [][]Job {
	byRun := map[string][]Job{}
	var keys []string
	for _, j := range jobs {
		if _, ok := byRun[j.Scheduled]; !ok {
			keys = append(keys, j.Scheduled)
		}
		byRun[j.Scheduled] = append(byRun[j.Scheduled], j)
	}
	sort.Strings(keys) // RFC 3339 UTC sorts by time; "" (one-shot) first
	out := make([][]Job, 0, len(keys))
	for _, k := range keys {
		run := byRun[k]
		sort.SliceStable(run, func(a, b int) bool { return atoi(run[a].Attempt) < atoi(run[b].Attempt) })
		out = append(out, run)
	}
	return out
}

// describeJobs lists Jobs as seen, oldest run first.
func describeJobs(jobs []Job) string {
	var seen []string
	for _, run := range runsOf(jobs) {
		for _, j := range run {
			seen = append(seen, j.String())
		}
	}
	return strings.Join(seen, ", ")
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
