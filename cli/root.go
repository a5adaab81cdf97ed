// Package cli is the `kubectl task` command line: everyday commands on Tasks (status, runs,
// logs, suspend, resume, convert, version, completion) and the version lifecycle (migrate,
// versions: packages migrate and versions), built on cobra and k8s.io/cli-runtime so that
// kubectl's --kubeconfig, --context and --namespace work, -o prints as kubectl's does, and the
// apiserver's warnings reach stderr. cmd/kubectl-task only wires it to a process; the
// operator binary can mount the same commands.
package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Options are what every command shares: the streams and the kubeconfig flags.
type Options struct {
	Streams genericiooptions.IOStreams
	Config  *genericclioptions.ConfigFlags
}

// NewRootCommand is `kubectl task` with every subcommand. displayName is how the user invokes
// it ("kubectl task" as a plugin), used in help and examples.
func NewRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{Streams: streams, Config: genericclioptions.NewConfigFlags(true)}
	root := &cobra.Command{
		Use:   "kubectl-task",
		Short: "Everyday commands for Tasks (example.com/v1)",
		Long: `Everyday commands for Tasks of the task-operator: see where a Task stands, list its
runs, read their logs, rerun, run now or cancel it, suspend and resume it, convert manifests
from old API versions, migrate stored Tasks to v1 and retire old versions.

It talks to the cluster of your kubeconfig, at example.com/v1, with kubectl's flags.`,
		Example: `  kubectl task status nightly-report
  kubectl task runs nightly-report -n reports -o yaml
  kubectl task logs nightly-report -f
  kubectl task rerun report
  kubectl task suspend nightly-report`,
		Annotations: map[string]string{
			// cobra shows the plugin as the user types it.
			cobra.CommandDisplayNameAnnotation: "kubectl task",
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		// The kubeconfig flags belong to every command, but a plain `kubectl task` only helps.
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	o.Config.AddFlags(root.PersistentFlags())
	root.AddCommand(
		newStatusCommand(o),
		newRunsCommand(o),
		newLogsCommand(o),
		newSuspendCommand(o, true),
		newSuspendCommand(o, false),
		newRerunCommand(o),
		newRunCommand(o),
		newCancelCommand(o),
		newConvertCommand(o),
		newMigrateCommand(o),
		newVersionsCommand(o),
		newVersionCommand(o),
		newCompletionCommand(o),
	)
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	// A wrong flag or argument count is a usage error: one line, then where help is.
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError(cmd, err.Error())
	})
	return root
}

// usageError is a one-line error that points at the command's help.
func usageError(cmd *cobra.Command, msg string) error {
	return fmt.Errorf("%s\nSee '%s --help' for usage", msg, cmd.CommandPath())
}

// exactlyOneTask is the Args check of the commands that take one Task name.
func exactlyOneTask(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return usageError(cmd, "a Task name is required, e.g. "+cmd.CommandPath()+" NAME")
	case len(args) > 1:
		return usageError(cmd, fmt.Sprintf("one Task name expected, got %d: %s", len(args), strings.Join(args, " ")))
	}
	return nil
}

// ErrorText is how main prints an error: kubectl's "error: " prefix and the message, never a
// stack.
func ErrorText(err error) string {
	return "error: " + err.Error()
}
