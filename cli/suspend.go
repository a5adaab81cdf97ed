package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// newSuspendCommand is `suspend` (suspend true) or `resume` (false): one merge patch of
// spec.suspend at v1, only when it changes something, so either is safe to repeat.
func newSuspendCommand(o *Options, suspend bool) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "suspend NAME",
		Short: "Suspend a Task: no new run or retry starts, and its active Jobs are suspended",
		Long: `Suspend a Task by setting spec.suspend to true (a merge patch at example.com/v1). No new
run or retry starts, and active Jobs are suspended: their pods stop, and run again on resume.
A run queued in Kueue (spec.queueName) is Kueue's to hold: see the README's Queues section.
Suspending a suspended Task changes nothing and says so.`,
		Example: `  kubectl task suspend nightly-report
  kubectl task suspend nightly-report -n reports`,
	}
	if !suspend {
		cmd.Use = "resume NAME"
		cmd.Short = "Resume a suspended Task: runs and retries start again"
		cmd.Long = `Resume a Task by setting spec.suspend to false (a merge patch at example.com/v1): suspended
Jobs start again and due runs and retries start. Resuming a Task that is not suspended changes
nothing and says so.`
		cmd.Example = `  kubectl task resume nightly-report
  kubectl task resume nightly-report -n reports`
	}
	cmd.Args = exactlyOneTask
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := o.connect()
		if err != nil {
			return err
		}
		return runSuspend(cmd.Context(), c, args[0], suspend, o.Streams.Out)
	}
	return cmd
}

// runSuspend reads the Task and patches it on condition that it did not change meanwhile; on a
// conflict it reads it again.
func runSuspend(ctx context.Context, c *clients, name string, suspend bool, out io.Writer) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { return trySuspend(ctx, c, name, suspend, out) })
}

func trySuspend(ctx context.Context, c *clients, name string, suspend bool, out io.Writer) error {
	task, err := c.getTask(ctx, name)
	if err != nil {
		return err
	}
	if err := refuseDeleting(task, c.namespace); err != nil {
		return err
	}
	verb := map[bool]string{true: "suspended", false: "resumed"}[suspend]
	if task.Spec.Suspend == suspend {
		state := map[bool]string{true: "already suspended", false: "not suspended"}[suspend]
		fmt.Fprintf(out, "task.example.com/%s %s: nothing to do\n", name, state)
		return nil
	}
	// resourceVersion in the patch makes it conditional: a concurrent edit of spec.suspend is
	// not overwritten blindly. The merge patch carries false explicitly for resume.
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": task.ResourceVersion},
		"spec":     map[string]any{"suspend": suspend},
	})
	if err != nil {
		return err
	}
	if _, err := c.tasks.Namespace(c.namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return err // RetryOnConflict reads it again
		}
		return c.taskError(name, err)
	}
	fmt.Fprintf(out, "task.example.com/%s %s\n", name, verb)
	return nil
}
