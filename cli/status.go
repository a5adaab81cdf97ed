package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/spf13/cobra"

	taskv1 "example.com/task-operator/apis/v1"
)

func newStatusCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "status NAME",
		Short: "Show where a Task stands: phase, conditions, the current run and its pods, what comes next",
		Long: `Show where a Task stands, for humans: its phase and since when, its conditions, the
current run (attempt, Job, outcome, pods), the next retry or scheduled run, the last error,
the queue admission of a Task with spec.queueName, and its recent Events.

Automation should read the Task's conditions (kubectl get task NAME -o yaml) instead.`,
		Example: `  kubectl task status nightly-report
  kubectl task status nightly-report -n reports --context prod`,
		Args: exactlyOneTask,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.connect()
			if err != nil {
				return err
			}
			return runStatus(cmd.Context(), c, args[0], o.Streams.Out, time.Now())
		},
	}
}

func runStatus(ctx context.Context, c *clients, name string, out io.Writer, now time.Time) error {
	task, err := c.getTask(ctx, name)
	if err != nil {
		return err
	}
	var (
		pods []corev1.Pod
		job  *batchv1.Job
	)
	if run := task.Status.CurrentRun; run != nil {
		if job, err = c.kube.BatchV1().Jobs(task.Namespace).Get(ctx, run.Job.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			job = nil
		} else if err != nil {
			return fmt.Errorf("job %q of task %q: %w", run.Job.Name, name, err)
		}
		if pods, err = c.podsOf(ctx, task.Namespace, run.Job.Name); err != nil {
			return err
		}
	}
	events, err := c.kube.CoreV1().Events(task.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(task.UID)).String(),
	})
	if err != nil {
		return fmt.Errorf("events of task %q: %w", name, err)
	}
	s := statusPrinter{w: tabwriter.NewWriter(out, 0, 4, 2, ' ', 0), now: now}
	s.print(task, job, pods, events.Items)
	return s.w.Flush()
}

// statusPrinter writes the status report, times as RFC 3339 with how long ago they were.
type statusPrinter struct {
	w   *tabwriter.Writer
	now time.Time
}

func (s statusPrinter) line(indent int, format string, args ...any) {
	fmt.Fprintf(s.w, strings.Repeat("  ", indent)+format+"\n", args...)
}

// when is "2026-01-02T03:04:05Z (5m ago)", or "in 5m" for a time to come.
func (s statusPrinter) when(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "<none>"
	}
	d := s.now.Sub(t.Time)
	rel := duration.HumanDuration(d) + " ago"
	if d < 0 {
		rel = "in " + duration.HumanDuration(-d)
	}
	return fmt.Sprintf("%s (%s)", t.UTC().Format(time.RFC3339), rel)
}

func (s statusPrinter) print(task *taskv1.Task, job *batchv1.Job, pods []corev1.Pod, events []corev1.Event) {
	st := task.Status
	s.line(0, "Name:\t%s", task.Name)
	s.line(0, "Namespace:\t%s", task.Namespace)
	s.line(0, "Created:\t%s", s.when(&task.CreationTimestamp))
	s.line(0, "Runner:\t%s", task.Spec.Runner.Type)
	s.schedule(task)
	if task.DeletionTimestamp != nil {
		s.line(0, "Deleting:\tsince %s (waiting for %s; no run starts any more)", s.when(task.DeletionTimestamp), strings.Join(task.Finalizers, ", "))
	}
	if task.Spec.Suspend {
		s.line(0, "Suspended:\tyes (no new run or retry starts; kubectl task resume %s)", task.Name)
	}
	phase := string(st.Phase)
	if phase == "" {
		phase = "<none yet: the operator has not reconciled it>"
	}
	s.line(0, "Phase:\t%s, since %s", phase, s.when(st.LastPhaseTransitionTime))
	if st.ObservedGeneration != 0 && st.ObservedGeneration != task.Generation {
		s.line(0, "\t(the status is of generation %d; the spec is at %d)", st.ObservedGeneration, task.Generation)
	}
	s.conditions(st.Conditions)
	s.currentRun(task, job, pods)
	_ = s.w.Flush() // the run's nested lines align among themselves
	s.line(0, "Next run:\t%s", s.when(st.NextRunTime))
	lastError := st.LastError
	if lastError == "" {
		lastError = "<none>"
	}
	s.line(0, "Last error:\t%s", lastError)
	s.request("Run request", st.RunRequest, task.Annotations[taskv1.AnnotationRunRequested])
	s.request("Cancel request", st.CancelRequest, task.Annotations[taskv1.AnnotationCancelRequested])
	s.queue(task)
	s.events(events)
}

// request shows a run or cancel request: the latest one the operator honoured
// (status.runRequest, status.cancelRequest), and the annotation's when it asks for a later one
// the operator has not honoured yet. Nothing when neither is set.
func (s statusPrinter) request(label string, honoured *metav1.Time, annotation string) {
	if honoured != nil {
		s.line(0, "%s:\t%s, honoured", label, s.when(honoured))
	}
	asked, err := time.Parse(time.RFC3339, annotation)
	switch {
	case annotation == "":
	case err != nil:
		s.line(0, "%s:\t%q asked (not an RFC 3339 time: the operator ignores it)", label, annotation)
	case honoured == nil || asked.Truncate(time.Second).After(honoured.Time):
		s.line(0, "%s:\t%s asked, not honoured yet", label, s.when(&metav1.Time{Time: asked}))
	}
}

func (s statusPrinter) schedule(task *taskv1.Task) {
	sch := task.Spec.Schedule
	if sch == nil {
		s.line(0, "Schedule:\t<none: runs once>")
		return
	}
	tz := sch.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	s.line(0, "Schedule:\t%s (%s), concurrency %s", sch.Cron, tz, sch.ConcurrencyPolicy)
	if t := task.Status.LastScheduleTime; t != nil {
		s.line(0, "Last schedule:\t%s", s.when(t))
	}
	if n := task.Status.MissedRuns; n > 0 {
		s.line(0, "Missed runs:\t%d", n)
	}
}

func (s statusPrinter) conditions(conds []metav1.Condition) {
	if len(conds) == 0 {
		s.line(0, "Conditions:\t<none>")
		return
	}
	s.line(0, "Conditions:")
	for _, c := range conds {
		msg := c.Message
		if msg != "" {
			msg = ": " + msg
		}
		s.line(1, "%s\t%s, %s%s", c.Type, c.Status, c.Reason, msg)
	}
}

func (s statusPrinter) currentRun(task *taskv1.Task, job *batchv1.Job, pods []corev1.Pod) {
	run := task.Status.CurrentRun
	if run == nil {
		s.line(0, "Current run:\t<none yet>")
		return
	}
	s.line(0, "Current run:")
	s.line(1, "Attempt:\t%d of at most %d", run.Attempt, taskv1.MaxRetriesOf(task)+1)
	if run.ScheduledTime != nil {
		s.line(1, "Scheduled for:\t%s", s.when(run.ScheduledTime))
	}
	if job == nil {
		s.line(1, "Job:\t%s (gone: its TTL, a history limit or a user deleted it)", run.Job.Name)
	} else {
		s.line(1, "Job:\t%s", run.Job.Name)
		started := job.Status.StartTime
		if started == nil {
			started = &job.CreationTimestamp
		}
		s.line(1, "Started:\t%s", s.when(started))
	}
	s.line(1, "Outcome:\t%s", run.Outcome)
	if run.AdmittedTime != nil {
		s.line(1, "Admitted:\t%s", s.when(run.AdmittedTime))
	}
	if run.FinishTime != nil {
		s.line(1, "Finished:\t%s", s.when(run.FinishTime))
	}
	if run.RetryTime != nil {
		s.line(1, "Retry at:\t%s", s.when(run.RetryTime))
	}
	if len(pods) == 0 {
		s.line(1, "Pods:\t<none left>")
		return
	}
	s.line(1, "Pods:")
	for _, p := range pods {
		s.line(2, "%s\t%s, since %s", p.Name, p.Status.Phase, s.when(podSince(p)))
	}
}

// podSince is when the pod's phase began, as near as the status tells: its start, or when it
// last changed a condition.
func podSince(p corev1.Pod) *metav1.Time {
	since := p.Status.StartTime
	for _, c := range p.Status.Conditions {
		if since == nil || c.LastTransitionTime.After(since.Time) {
			since = c.LastTransitionTime.DeepCopy()
		}
	}
	if since == nil {
		return &p.CreationTimestamp
	}
	return since
}

func (s statusPrinter) queue(task *taskv1.Task) {
	if task.Spec.QueueName == "" {
		return
	}
	q := task.Spec.QueueName
	if pc := task.Spec.PriorityClassName; pc != "" {
		q += ", priority " + pc
	}
	s.line(0, "Queue:\t%s", q)
	i := slices.IndexFunc(task.Status.Conditions, func(c metav1.Condition) bool { return c.Type == taskv1.ConditionAdmitted })
	if i < 0 {
		s.line(1, "Admitted:\t<not known yet>")
		return
	}
	c := task.Status.Conditions[i]
	s.line(1, "Admitted:\t%s, %s since %s", c.Status, c.Reason, s.when(&c.LastTransitionTime))
	if c.Message != "" {
		s.line(1, "Message:\t%s", c.Message)
	}
}

// events shows the Task's latest ten Events, oldest first.
func (s statusPrinter) events(events []corev1.Event) {
	if len(events) == 0 {
		s.line(0, "Events:\t<none>")
		return
	}
	slices.SortFunc(events, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	if len(events) > 10 {
		events = events[len(events)-10:]
	}
	s.line(0, "Events:")
	for _, e := range events {
		t := metav1.NewTime(eventTime(e))
		s.line(1, "%s\t%s\t%s\t%s", duration.HumanDuration(s.now.Sub(t.Time))+" ago", e.Type, e.Reason, e.Message)
	}
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
