package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	taskv1 "example.com/task-operator/apis/v1"
)

// The request commands set one annotation on the Task (a merge patch at v1) whose value, the
// current second, identifies the request; the operator honours each request once (see the
// README's "Run semantics"). Repeating a command within the same second is the same request:
// sent again while the operator has not seen it, refused once it answered it.

// requestKind is one of the request commands.
type requestKind int

const (
	rerunRequest requestKind = iota
	runRequest
	cancelRequest
)

func newRerunCommand(o *Options) *cobra.Command {
	return requestCommand(o, rerunRequest, &cobra.Command{
		Use:   "rerun NAME",
		Short: "Run a finished Task again: a new run, with its retries, recorded in status and Events",
		Long: `Ask for a new run of a Task that finished (Succeeded or Failed), by setting the annotation
task.example.com/run-requested to the current time. The operator starts one run for the request
(a Job named <task>-<request unix time>-1, retried as spec.retry says), records it in
status.runRequest and tells it in a RunRequested Event. A Task still running, retrying, queued
or pending is refused. For a scheduled Task, rerun is run.`,
		Example: `  kubectl task rerun report
  kubectl task rerun report -n reports`,
	})
}

func newRunCommand(o *Options) *cobra.Command {
	return requestCommand(o, runRequest, &cobra.Command{
		Use:   "run NAME",
		Short: "Start a run of a scheduled Task now, like kubectl create job --from=cronjob/NAME",
		Long: `Ask for a run of a scheduled Task now, by setting the annotation task.example.com/run-requested
to the current time. The operator starts it once nothing of the Task is active (a run in
progress finishes first), as a run of its own: the schedule, lastScheduleTime and the count of
missed runs are unchanged. A Task without a schedule is refused: use rerun.`,
		Example: `  kubectl task run nightly-report
  kubectl task run nightly-report -n reports`,
	})
}

func newCancelCommand(o *Options) *cobra.Command {
	return requestCommand(o, cancelRequest, &cobra.Command{
		Use:   "cancel NAME",
		Short: "Stop a Task's active run: its Jobs are deleted and the run ends Failed, without a retry",
		Long: `Ask the operator to stop the Task's current run, by setting the annotation
task.example.com/cancel-requested to the current time. It deletes the run's active Jobs (or
drops the retry it waits for); the run ends Failed with lastError "cancelled at <time> by
request", without a retry, and a RunCancelled Event says so. A Task with nothing running or
retrying has nothing to cancel: it is left alone.`,
		Example: `  kubectl task cancel report
  kubectl task cancel report -n reports`,
	})
}

func requestCommand(o *Options, kind requestKind, cmd *cobra.Command) *cobra.Command {
	cmd.Args = exactlyOneTask
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := o.connect()
		if err != nil {
			return err
		}
		return runRequestCommand(cmd.Context(), c, args[0], kind, time.Now(), o.Streams.Out)
	}
	return cmd
}

func runRequestCommand(ctx context.Context, c *clients, name string, kind requestKind, now time.Time, out io.Writer) error {
	task, err := c.getTask(ctx, name)
	if err != nil {
		return err
	}
	at := now.UTC().Truncate(time.Second)
	if err := refuseDeleting(task, c.namespace); err != nil {
		return err
	}
	if err := refuseRequest(task, kind, c.namespace); err != nil {
		return err
	}
	if kind == cancelRequest && !cancellable(task) {
		fmt.Fprintf(out, "task.example.com/%s is %s: nothing to cancel\n", name, phaseText(task))
		return nil
	}
	if kind == cancelRequest {
		at = cancelRequestTime(task, at)
		if err := refuseIgnoredCancel(task, at, c.namespace); err != nil {
			return err
		}
	}
	key := taskv1.AnnotationRunRequested
	if kind == cancelRequest {
		key = taskv1.AnnotationCancelRequested
	} else {
		at = runRequestTime(task, at)
		if err := refuseAnswered(task, at, c.namespace); err != nil {
			return err
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: at.Format(time.RFC3339)}}})
	if err != nil {
		return err
	}
	if _, err := c.tasks.Namespace(c.namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return c.taskError(name, err)
	}
	stamp := at.Format(time.RFC3339)
	switch kind {
	case cancelRequest:
		if !active(task) && task.Status.Phase != taskv1.PhaseRetrying && task.Status.Phase != taskv1.PhaseQueued {
			fmt.Fprintf(out, "task.example.com/%s: cancel requested at %s (the pending run request is dropped: that run does not start)\n", name, stamp)
			return nil
		}
		fmt.Fprintf(out, "task.example.com/%s: cancel requested at %s (the active run's Jobs are deleted; it ends Failed without a retry)\n", name, stamp)
	default:
		job := taskv1.JobName(name, at.Unix(), 1) // the request's run, keyed by its time
		when := "now"
		switch {
		case task.Spec.Suspend:
			when = "once the Task is resumed"
		case active(task):
			when = "once the active run ends"
		}
		unless := ""
		if task.Spec.Schedule != nil {
			// The operator lets a schedule time later than the request, due when the run
			// could start, answer it instead (docs/guarantees.md, run requests).
			unless = " (unless a later schedule time is due by then: that run answers it)"
		}
		fmt.Fprintf(out, "task.example.com/%s: run requested at %s%s; it starts %s as Job %s\n", name, stamp, unless, when, job)
	}
	return nil
}

// refuseRequest is why a request makes no sense for the Task as it stands, or nil.
func refuseRequest(task *taskv1.Task, kind requestKind, namespace string) error {
	oneShot := task.Spec.Schedule == nil
	switch {
	case kind == runRequest && oneShot:
		return fmt.Errorf("task %q in namespace %q has no schedule: use rerun to run it again", task.Name, namespace)
	case kind == rerunRequest && oneShot && !finished(task):
		return fmt.Errorf("task %q in namespace %q is %s, not finished: rerun it once it Succeeded or Failed (or cancel it first)", task.Name, namespace, phaseText(task))
	}
	return nil
}

// refuseDeleting says a Task being deleted takes no request nor edit: no run of it starts any
// more, and its active run is stopped with it.
func refuseDeleting(task *taskv1.Task, namespace string) error {
	if task.DeletionTimestamp == nil {
		return nil
	}
	return fmt.Errorf("task %q in namespace %q is being deleted (since %s): no run of it starts any more",
		task.Name, namespace, task.DeletionTimestamp.UTC().Format(time.RFC3339))
}

func finished(task *taskv1.Task) bool {
	return task.Status.Phase == taskv1.PhaseSucceeded || task.Status.Phase == taskv1.PhaseFailed
}

// active says a run of the Task is in progress as far as its status tells.
func active(task *taskv1.Task) bool {
	return len(task.Status.ActiveJobs) > 0 || (task.Status.CurrentRun != nil && task.Status.CurrentRun.Outcome == taskv1.RunActive)
}

// cancellable says a cancel has something to stop: an active run, a retry due, or a run
// request the operator has not started yet (it drops a pending run request that a cancel at or
// after it covers, so the cancel must be sent even while the status still says finished).
func cancellable(task *taskv1.Task) bool {
	return active(task) || task.Status.Phase == taskv1.PhaseRetrying || task.Status.Phase == taskv1.PhaseQueued ||
		runRequestPending(task)
}

// runRequestPending says the Task's run-requested annotation is a request the operator has not
// answered yet: later than status.runRequest, and no current run is of its time or later (a
// schedule time at or after it answers it too), as the reconciler reads it.
func runRequestPending(task *taskv1.Task) bool {
	r, ok := annotationTime(task, taskv1.AnnotationRunRequested)
	if !ok || !r.After(timeOf(task.Status.RunRequest)) {
		return false
	}
	run := task.Status.CurrentRun
	return run == nil || run.ScheduledTime == nil || run.ScheduledTime.Time.Before(r)
}

// cancelRequestTime is the time a cancel made at now is sent with: now, or one second after a
// pending run request of this second or a little later (a run asked for one second after an
// earlier cancel), since the operator drops only a run request strictly before the cancel, or
// one second after a cancel the operator honoured for a time a little ahead.
func cancelRequestTime(task *taskv1.Task, now time.Time) time.Time {
	at := now
	if r, ok := annotationTime(task, taskv1.AnnotationRunRequested); ok && runRequestPending(task) && !now.After(r) && !r.After(now.Add(taskv1.RequestClockSkew)) {
		at = r.Add(time.Second)
	}
	// The operator honours a cancel up to taskv1.RequestClockSkew ahead at once: one another client sent
	// from a clock ahead may be recorded later than now, and a cancel not after it is ignored.
	if h := timeOf(task.Status.CancelRequest).UTC().Truncate(time.Second); !now.After(h) && !h.After(now.Add(taskv1.RequestClockSkew)) && !at.After(h) {
		at = h.Add(time.Second)
	}
	return at
}

// runRequestTime is the time a run or rerun request made at now is sent with: now, unless a
// cancel request is pending (set at or after now, or later than status.cancelRequest), which the
// operator would apply to a run request before it and drop it: then one second after that
// cancel, so the run the user asks for after cancelling is not cancelled with it.
func runRequestTime(task *taskv1.Task, now time.Time) time.Time {
	cancel, ok := annotationTime(task, taskv1.AnnotationCancelRequested)
	if !ok {
		return now
	}
	pending := !cancel.Before(now) || cancel.After(timeOf(task.Status.CancelRequest))
	if pending && !now.After(cancel) && !cancel.After(now.Add(taskv1.RequestClockSkew)) {
		return cancel.Add(time.Second)
	}
	return now
}

// refuseAnswered says why a run request at is not sent: the operator takes a request at or
// before status.runRequest or the current run's schedule time as answered already, so nothing
// would start. That is a repeat within the second of a request already honoured, or a clock
// behind the operator's.
func refuseAnswered(task *taskv1.Task, at time.Time, namespace string) error {
	answered := answeredThrough(task)
	if at.After(answered) {
		return nil
	}
	pending := ""
	if r, ok := annotationTime(task, taskv1.AnnotationRunRequested); ok && runRequestPending(task) {
		pending = fmt.Sprintf("; the request of %s, not started yet, stands", r.Format(time.RFC3339))
	}
	return fmt.Errorf("task %q in namespace %q: a run requested at %s is answered already by the run of %s: it would start nothing%s (if this machine's clock is behind the operator's, ask again after %s)",
		task.Name, namespace, at.Format(time.RFC3339), answered.Format(time.RFC3339), pending, answered.Format(time.RFC3339))
}

// refuseIgnoredCancel says why a cancel at is not sent: the operator applies only a cancel
// later than status.cancelRequest (a clock behind the operator's sends an earlier one).
func refuseIgnoredCancel(task *taskv1.Task, at time.Time, namespace string) error {
	honoured := timeOf(task.Status.CancelRequest)
	if at.After(honoured) {
		return nil
	}
	return fmt.Errorf("task %q in namespace %q: a cancel requested at %s is not later than the cancel of %s the operator honoured, so it would be ignored (if this machine's clock is behind the operator's, ask again after %s)",
		task.Name, namespace, at.Format(time.RFC3339), honoured.Format(time.RFC3339), honoured.Format(time.RFC3339))
}

// answeredThrough is the latest request time the operator takes as answered: status.runRequest,
// or the current run's schedule time (a run of that time or later answers any request before).
func answeredThrough(task *taskv1.Task) time.Time {
	answered := timeOf(task.Status.RunRequest)
	if run := task.Status.CurrentRun; run != nil && run.ScheduledTime != nil && run.ScheduledTime.After(answered) {
		answered = run.ScheduledTime.Time
	}
	return answered.UTC().Truncate(time.Second)
}

// annotationTime is the time of request annotation key, truncated to the second as the
// operator reads it; false if it is unset or not an RFC 3339 time (the operator ignores it).
func annotationTime(task *taskv1.Task, key string) (time.Time, bool) {
	value := task.Annotations[key]
	if value == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, value)
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC().Truncate(time.Second), true
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

func phaseText(task *taskv1.Task) string {
	if task.Status.Phase == "" {
		return "not started yet"
	}
	return string(task.Status.Phase)
}
