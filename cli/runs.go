package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/printers"

	taskv1 "example.com/task-operator/apis/v1"
)

// RunGroupVersion is the apiVersion of the Run objects `runs -o json|yaml` prints: the
// plugin's own output shape, made from a Task's Jobs and status, not a resource the API serves.
const RunGroupVersion = "cli.task.example.com/v1"

// Run is one attempt of one run of a Task, as the cluster still knows it.
type Run struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	// Task is the Task's name.
	Task string `json:"task"`
	// Attempt is the attempt within its run, from 1.
	Attempt int32 `json:"attempt"`
	// ScheduledTime is the schedule time of a scheduled Task's run.
	ScheduledTime *metav1.Time `json:"scheduledTime,omitempty"`
	// Job is the attempt's Job (its name is also the Run's).
	Job string `json:"job"`
	// StartTime is when the Job started (or was created, before it started).
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// FinishTime is when it succeeded or failed.
	FinishTime *metav1.Time `json:"finishTime,omitempty"`
	// Outcome is Active, Succeeded, Failed or Replaced; Suspended while its Job is suspended.
	Outcome string `json:"outcome"`
	// Reason says why it failed or what replaced it.
	Reason string `json:"reason,omitempty"`
	// JobExists is false for the current run's Job when it is gone and only the Task's status
	// remembers the attempt.
	JobExists bool `json:"jobExists"`
}

func newRunsCommand(o *Options) *cobra.Command {
	print := newPrintFlags()
	var watchFlag bool
	cmd := &cobra.Command{
		Use:   "runs NAME",
		Short: "List every run of a Task the cluster still knows: attempt, Job, start, finish, outcome, reason",
		Long: `List the runs of a Task, oldest first: one row per attempt whose Job still exists
(Jobs labelled task.example.com/name and owned by the Task), and the current run the Task's
status records even when its Job was deleted (by its TTL, a history limit or a user).

-o json|yaml|name|jsonpath=...|custom-columns=... prints Run objects (apiVersion ` + RunGroupVersion + `),
the plugin's own shape, not a resource the API serves. --watch prints a run again each time
its Job changes, until interrupted.`,
		Example: `  kubectl task runs nightly-report
  kubectl task runs nightly-report --watch
  kubectl task runs nightly-report -o jsonpath='{range .items[*]}{.job} {.outcome}{"\n"}{end}'
  kubectl task runs nightly-report -o custom-columns=JOB:.job,OUTCOME:.outcome`,
		Args: exactlyOneTask,
		RunE: func(cmd *cobra.Command, args []string) error {
			printer, err := print.toPrinter()
			if err != nil {
				return usageError(cmd, err.Error())
			}
			c, err := o.connect()
			if err != nil {
				return err
			}
			return runRuns(cmd.Context(), c, args[0], printer, watchFlag, o.Streams.Out)
		},
	}
	print.addFlags(cmd)
	cmd.Flags().BoolVarP(&watchFlag, "watch", "w", false, "After listing, print each run again as its Job changes, until interrupted")
	return cmd
}

func runRuns(ctx context.Context, c *clients, name string, printer printers.ResourcePrinter, watchFlag bool, out io.Writer) error {
	task, err := c.getTask(ctx, name)
	if err != nil {
		return err
	}
	jobs, listed, err := c.listJobs(ctx, task)
	if err != nil {
		return err
	}
	runs := runsOf(task, jobs)
	// A person reading the table is told why it is empty; a script asking for -o json or the
	// like gets an empty list, as kubectl get gives one.
	if len(runs) == 0 && !watchFlag && printer == nil {
		return fmt.Errorf("task %q in namespace %q has no runs yet (phase %s)", task.Name, task.Namespace, phaseOr(task))
	}
	if printer == nil {
		tw := printers.GetNewTabWriter(out)
		printRunTable(tw, runs, true, time.Now())
		if err := tw.Flush(); err != nil {
			return err
		}
	} else if err := printer.PrintObj(runList(runs), out); err != nil {
		return err
	}
	if !watchFlag {
		return nil
	}
	return watchRuns(ctx, c, task, jobs, listed, printer, out)
}

func phaseOr(task *taskv1.Task) string {
	if task.Status.Phase == "" {
		return "not reconciled yet"
	}
	return string(task.Status.Phase)
}

// watchRuns prints a run each time its Job is added or changes, until ctx ends. As kubectl
// get --watch does, it watches from the resourceVersion of the list just printed (jobs at rv), so
// the Jobs listed do not come again as ADDED. A watch the apiserver ends is resumed from its last
// event; one whose version is too old (410 Gone) lists again and prints only the runs that changed
// since they were last printed.
func watchRuns(ctx context.Context, c *clients, task *taskv1.Task, jobs []batchv1.Job, rv string, printer printers.ResourcePrinter, out io.Writer) error {
	seen := map[string]Run{}
	for _, j := range jobs {
		seen[j.Name] = runOfJob(task, j)
	}
	show := func(job *batchv1.Job) error {
		if !controlledBy(job.OwnerReferences, task.UID) {
			return nil
		}
		run := runOfJob(task, *job)
		if prev, ok := seen[run.Name]; ok && sameRow(prev, run) {
			return nil
		}
		seen[run.Name] = run
		return printRun(printer, run, out)
	}
	for {
		next, events, err := watchJobs(ctx, c, task, rv, show)
		switch {
		case ctx.Err() != nil:
			return nil
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			relisted, at, err := c.listJobs(ctx, task)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			for i := range relisted {
				if err := show(&relisted[i]); err != nil {
					return err
				}
			}
			rv = at
		case err != nil:
			return err
		default:
			rv = next
			if events == 0 { // ended at once: do not hammer the apiserver
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(time.Second):
				}
			}
		}
	}
}

// watchJobs watches the Task's Jobs from rv and hands each added or changed one to show, until
// the watch ends or ctx does. It returns the resourceVersion to resume from, how many events
// came, and the watch's error: an Error event's status (410 Gone when rv is too old) included.
func watchJobs(ctx context.Context, c *clients, task *taskv1.Task, rv string, show func(*batchv1.Job) error) (string, int, error) {
	w, err := c.kube.BatchV1().Jobs(task.Namespace).Watch(ctx, metav1.ListOptions{
		LabelSelector: jobSelector(task), ResourceVersion: rv, AllowWatchBookmarks: true,
	})
	if err != nil {
		return rv, 0, fmt.Errorf("watch jobs of task %q: %w", task.Name, err)
	}
	defer w.Stop()
	events := 0
	for {
		select {
		case <-ctx.Done():
			return rv, events, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv, events, nil
			}
			events++
			if ev.Type == watch.Error {
				return rv, events, fmt.Errorf("watch jobs of task %q: %w", task.Name, apierrors.FromObject(ev.Object))
			}
			job, isJob := ev.Object.(*batchv1.Job)
			if !isJob {
				continue
			}
			rv = job.ResourceVersion
			if ev.Type == watch.Bookmark || ev.Type == watch.Deleted {
				continue
			}
			if err := show(job); err != nil {
				return rv, events, err
			}
		}
	}
}

func sameRow(a, b Run) bool {
	return a.Outcome == b.Outcome && a.Reason == b.Reason && a.StartTime.Equal(b.StartTime) && a.FinishTime.Equal(b.FinishTime)
}

func printRun(printer printers.ResourcePrinter, run Run, out io.Writer) error {
	if printer != nil {
		return printer.PrintObj(runObject(run), out)
	}
	tw := printers.GetNewTabWriter(out)
	printRunTable(tw, []Run{run}, false, time.Now())
	return tw.Flush()
}

// runsOf is every attempt the cluster still knows, oldest first: the Jobs, then the current
// run from the status when its Job is gone. The status's outcome wins over the Job's: the
// operator records it, a Job only evidences it (a Job deleted while active is Failed even
// while it terminates).
func runsOf(task *taskv1.Task, jobs []batchv1.Job) []Run {
	cur := task.Status.CurrentRun
	runs := make([]Run, 0, len(jobs)+1)
	found := false
	for _, j := range jobs {
		run := runOfJob(task, j)
		if cur != nil && j.Name == cur.Job.Name {
			found = true
			applyRecord(&run, cur)
		}
		runs = append(runs, run)
	}
	if cur != nil && !found {
		run := Run{Task: task.Name, Attempt: cur.Attempt, Job: cur.Job.Name, ScheduledTime: cur.ScheduledTime}
		run.Name = cur.Job.Name
		applyRecord(&run, cur)
		if run.Reason == "" {
			run.Reason = "Job gone; the Task's status records this attempt"
		}
		runs = append(runs, run)
	}
	return runs
}

// applyRecord lays the Task's durable record of its current run over what the Job says.
// While the record says Active, a Job's own Suspended or Replaced says more.
func applyRecord(run *Run, cur *taskv1.RunRecord) {
	jobSaysMore := run.Outcome == "Replaced" || run.Outcome == "Suspended"
	if cur.Outcome != taskv1.RunActive || !jobSaysMore {
		run.Outcome = string(cur.Outcome)
	}
	if cur.FinishTime != nil {
		run.FinishTime = cur.FinishTime
	}
}

// runOfJob reads a run from one Job.
func runOfJob(task *taskv1.Task, j batchv1.Job) Run {
	run := Run{Task: task.Name, Job: j.Name, JobExists: true, Outcome: string(taskv1.RunActive)}
	run.Name = j.Name
	run.Namespace = j.Namespace
	if a, err := strconv.ParseInt(j.Labels[taskv1.LabelAttempt], 10, 32); err == nil {
		run.Attempt = int32(a)
	}
	if s := j.Annotations[taskv1.AnnotationScheduledTime]; s != "" {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			run.ScheduledTime = &metav1.Time{Time: t}
		}
	}
	run.StartTime = j.Status.StartTime
	if run.StartTime == nil {
		run.StartTime = j.CreationTimestamp.DeepCopy()
	}
	if j.Spec.Suspend != nil && *j.Spec.Suspend {
		run.Outcome = "Suspended"
	}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			run.Outcome = string(taskv1.RunSucceeded)
			run.FinishTime = j.Status.CompletionTime
			if run.FinishTime == nil {
				run.FinishTime = c.LastTransitionTime.DeepCopy()
			}
		case batchv1.JobFailed:
			run.Outcome = string(taskv1.RunFailed)
			run.FinishTime = c.LastTransitionTime.DeepCopy()
			run.Reason = c.Reason
			if c.Message != "" {
				run.Reason += ": " + c.Message
			}
		}
	}
	if by := j.Annotations[taskv1.AnnotationReplacedBy]; by != "" {
		run.Outcome = "Replaced"
		run.Reason = "replaced by " + by
	}
	if j.DeletionTimestamp != nil && run.Reason == "" && run.Outcome == string(taskv1.RunActive) {
		run.Reason = "Job being deleted"
	}
	return run
}

func runObject(r Run) *unstructured.Unstructured {
	r.APIVersion, r.Kind = RunGroupVersion, "Run"
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&r)
	if err != nil {
		panic(fmt.Sprintf("run %s to unstructured: %v", r.Name, err)) // plain struct: cannot fail
	}
	return &unstructured.Unstructured{Object: obj}
}

func runList(runs []Run) *unstructured.UnstructuredList {
	list := &unstructured.UnstructuredList{Object: map[string]any{}}
	list.SetAPIVersion("v1")
	list.SetKind("List")
	for _, r := range runs {
		list.Items = append(list.Items, *runObject(r))
	}
	return list
}

func printRunTable(w io.Writer, runs []Run, header bool, now time.Time) {
	if header {
		fmt.Fprintln(w, "ATTEMPT\tJOB\tSCHEDULED\tSTART\tFINISH\tOUTCOME\tREASON")
	}
	for _, r := range runs {
		scheduled := "-"
		if r.ScheduledTime != nil {
			scheduled = r.ScheduledTime.UTC().Format(time.RFC3339)
		}
		reason := r.Reason
		if reason == "" {
			reason = "-"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Attempt, r.Job, scheduled, ago(r.StartTime, now), ago(r.FinishTime, now), r.Outcome, reason)
	}
}

func ago(t *metav1.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t.Time)) + " ago"
}
