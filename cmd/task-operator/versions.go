package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"example.com/task-operator/versions"
)

// newVersionsCommand is the version lifecycle (package versions); the report, plans and
// progress go to stdout.
func newVersionsCommand(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "versions status|deprecate|retire|serve",
		Short: "Report, deprecate, retire or re-serve an API version of Task",
		Long: `The lifecycle of the Task CRD's API versions: status reports who still uses each one,
deprecate makes the apiserver warn on it, retire stops serving it once nothing needs it, and
serve serves it again.`,
		Example: `  task-operator versions status
  task-operator versions deprecate v1alpha1
  task-operator versions retire v1alpha1 --dry-run --migrate --rewrite-owner-refs
  task-operator versions serve v1alpha1`,
		Args: noArgs("subcommand", "status, deprecate, retire or serve"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return &usageError{msg: "a subcommand is required: status, deprecate, retire or serve", command: cmd.CommandPath()}
		},
	}
	for _, sub := range []struct{ use, short, example string }{
		{"status", "Report each version: served, stored, who still reads or writes it",
			"  task-operator versions status\n  task-operator versions status --audit-log /var/log/kube-apiserver/audit.log"},
		{"deprecate VERSION", "Mark VERSION deprecated: the apiserver warns on every request at it",
			"  task-operator versions deprecate v1alpha1"},
		{"retire VERSION", "Stop serving VERSION once no object, client or owner reference needs it",
			"  task-operator versions retire v1alpha1 --dry-run --migrate --rewrite-owner-refs\n  task-operator versions retire v1alpha1 --migrate --rewrite-owner-refs"},
		{"serve VERSION", "Serve a retired VERSION again",
			"  task-operator versions serve v1alpha1"},
	} {
		cmd.AddCommand(newVersionsSubcommand(stdout, sub.use, sub.short, sub.example))
	}
	return cmd
}

func newVersionsSubcommand(stdout io.Writer, use, short, example string) *cobra.Command {
	name := firstWord(use)
	fs := flag.NewFlagSet("versions "+name, flag.ContinueOnError)
	kubeconfigFlag(fs)
	opts := versions.BindFlags(fs)
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Example: example,
		// versions.Command checks the arguments: VERSION, or none for status.
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := versions.CheckArgs(name, args); err != nil {
				return &usageError{msg: err.Error(), command: cmd.CommandPath()}
			}
			cfg, err := restConfig("versions")
			if err != nil {
				return err
			}
			opts.Out = stdout
			return prefixed("versions", versions.Command(ctrl.SetupSignalHandler(), cfg, name, args, *opts))
		},
	}
	addGoFlags(cmd, fs)
	return cmd
}

func firstWord(s string) string {
	var w string
	fmt.Sscan(s, &w)
	return w
}

// prefixed names the command in err, as the commands' errors always have.
func prefixed(command string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", command, err)
}
