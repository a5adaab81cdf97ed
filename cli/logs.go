package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	taskv1 "example.com/task-operator/apis/v1"
)

type logsOptions struct {
	attempt int32
	follow  bool
	allPods bool
}

func newLogsCommand(o *Options) *cobra.Command {
	var lo logsOptions
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Print the logs of a Task's current run (or of one attempt of it)",
		Long: `Print the logs of the current run's latest attempt (the Job the Task's status names), read
through the apiserver's pods/log subresource, as kubectl logs does. --attempt N picks another
attempt of the same run, --all-pods prints every pod of the attempt (parallelism > 1, or pods
the Job controller replaced), each line prefixed with [pod/NAME], and -f follows them.

Logs live as long as the pods: once the Job is deleted (its TTL, a history limit) they are gone.`,
		Example: `  kubectl task logs nightly-report
  kubectl task logs nightly-report --attempt 1
  kubectl task logs nightly-report -f --all-pods`,
		Args: exactlyOneTask,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("attempt") && lo.attempt < 1 {
				return usageError(cmd, fmt.Sprintf("--attempt must be 1 or more, got %d", lo.attempt))
			}
			c, err := o.connect()
			if err != nil {
				return err
			}
			return runLogs(cmd.Context(), c, args[0], lo, o.Streams.Out)
		},
	}
	cmd.Flags().Int32Var(&lo.attempt, "attempt", 0, "Attempt of the current run to show (default: its latest)")
	cmd.Flags().BoolVarP(&lo.follow, "follow", "f", false, "Follow the logs until the pods end")
	cmd.Flags().BoolVar(&lo.allPods, "all-pods", false, "Print every pod of the attempt, not only the latest; lines are prefixed with [pod/NAME]")
	return cmd
}

func runLogs(ctx context.Context, c *clients, name string, lo logsOptions, out io.Writer) error {
	task, err := c.getTask(ctx, name)
	if err != nil {
		return err
	}
	job, err := c.attemptJob(ctx, task, lo.attempt)
	if err != nil {
		return err
	}
	pods, err := c.podsOf(ctx, task.Namespace, job)
	if err != nil {
		return err
	}
	if len(pods) == 0 {
		return fmt.Errorf("job %q of task %q has no pods left: its logs are gone", job, task.Name)
	}
	if !lo.allPods {
		return c.podLogs(ctx, task, job, pods[len(pods)-1], lo.follow, out, "")
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs = make([]error, len(pods))
	)
	locked := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return out.Write(p)
	})
	for i, pod := range pods {
		wg.Go(func() { errs[i] = c.podLogs(ctx, task, job, pod, lo.follow, locked, "[pod/"+pod.Name+"] ") })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// attemptJob is the name of the Job of the current run's attempt (0: its latest).
func (c *clients) attemptJob(ctx context.Context, task *taskv1.Task, attempt int32) (string, error) {
	cur := task.Status.CurrentRun
	if cur == nil {
		return "", fmt.Errorf("task %q in namespace %q has no runs yet (phase %s)", task.Name, task.Namespace, phaseOr(task))
	}
	if attempt == 0 || attempt == cur.Attempt {
		return cur.Job.Name, c.jobExists(ctx, task, cur.Job.Name)
	}
	if attempt > cur.Attempt {
		return "", fmt.Errorf("task %q: the current run has %d attempt(s), not %d", task.Name, cur.Attempt, attempt)
	}
	jobs, err := c.jobsOf(ctx, task)
	if err != nil {
		return "", err
	}
	for _, j := range jobs {
		if j.Labels[taskv1.LabelAttempt] == strconv.Itoa(int(attempt)) && ofRun(j, cur) {
			return j.Name, nil
		}
	}
	return "", fmt.Errorf("task %q: the Job of attempt %d no longer exists (its TTL, a history limit or a user deleted it): its logs are gone", task.Name, attempt)
}

// ofRun says whether j is an attempt of the current run: the same schedule time, or none for
// a one-shot run. (task.example.com/run cannot say: a one-shot run's is the attempt.)
func ofRun(j batchv1.Job, cur *taskv1.RunRecord) bool {
	if cur.ScheduledTime == nil {
		return j.Annotations[taskv1.AnnotationScheduledTime] == ""
	}
	return j.Annotations[taskv1.AnnotationScheduledTime] == cur.ScheduledTime.UTC().Format(time.RFC3339)
}

func (c *clients) jobExists(ctx context.Context, task *taskv1.Task, job string) error {
	if _, err := c.kube.BatchV1().Jobs(task.Namespace).Get(ctx, job, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("job %q of task %q no longer exists (its TTL, a history limit or a user deleted it): its logs are gone", job, task.Name)
		}
		return fmt.Errorf("job %q of task %q: %w", job, task.Name, err)
	}
	return nil
}

// podLogs copies one pod's log (its first container: a run's pod has one) to out, each line
// after prefix.
func (c *clients) podLogs(ctx context.Context, task *taskv1.Task, job string, pod corev1.Pod, follow bool, out io.Writer, prefix string) error {
	// A finished pod's log is complete: following it would add nothing (and a node that
	// follows anyway, as KWOK's does, would never end the stream).
	finished := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	opts := &corev1.PodLogOptions{Follow: follow && !finished}
	if len(pod.Spec.Containers) > 0 {
		opts.Container = pod.Spec.Containers[0].Name
	}
	stream, err := c.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, opts).Stream(ctx)
	if err != nil {
		return fmt.Errorf("logs of pod %q (job %q of task %q): %s", pod.Name, job, task.Name, logsErrorText(err))
	}
	defer stream.Close()
	if prefix == "" {
		_, err = io.Copy(out, stream)
	} else {
		err = copyLines(out, stream, prefix)
	}
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("logs of pod %q (job %q of task %q): %w", pod.Name, job, task.Name, err)
	}
	return nil
}

// logsErrorText is the apiserver's message; one that says the node could not be reached
// adds what that means.
func logsErrorText(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return err.Error()
	}
	msg := status.Status().Message
	if status.Status().Code >= 500 {
		msg += " (the pod's node did not serve its log: is its kubelet reachable from the apiserver?)"
	}
	return msg
}

func copyLines(out io.Writer, in io.Reader, prefix string) error {
	r := bufio.NewReader(in)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			if line[len(line)-1] != '\n' {
				line += "\n"
			}
			if _, werr := io.WriteString(out, prefix+line); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
