package cli

import (
	"flag"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"example.com/task-operator/migrate"
	"example.com/task-operator/versions"
)

// The storage-version migration and the version lifecycle are packages migrate and versions,
// the same code `task-operator migrate` and `task-operator versions` run; here they get the
// plugin's kubeconfig flags and streams.

// restConfig is the rest config of the kubeconfig flags, with the apiserver's warnings on
// stderr as kubectl prints them.
func (o *Options) restConfig() (*rest.Config, error) {
	cfg, err := o.Config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NewWarningWriter(o.Streams.ErrOut, rest.WarningWriterOptions{Deduplicate: true})
	return cfg, nil
}

// addGoFlags attaches the flags of a package flag FlagSet to cmd, but for those named in skip
// (flags the kubeconfig flags already define).
func addGoFlags(cmd *cobra.Command, fs *flag.FlagSet, skip ...string) {
	fs.VisitAll(func(f *flag.Flag) {
		for _, s := range skip {
			if f.Name == s {
				return
			}
		}
		cmd.Flags().AddGoFlag(f)
	})
}

func newMigrateCommand(o *Options) *cobra.Command {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	opts := migrate.BindFlags(fs)
	cmd := &cobra.Command{
		Use:   "migrate [flags]",
		Short: "Rewrite the stored Tasks at v1 and trim the CRD's storedVersions",
		Long: `Rewrite every stored Task at the storage version (v1), then set the CRD's
status.storedVersions to [v1], as task-operator migrate does. All namespaces unless -n names
one (storedVersions is then left alone). An interrupted run resumes from --checkpoint.
Progress and the summary go to stderr.`,
		Example: `  kubectl task migrate --dry-run
  kubectl task migrate --checkpoint /tmp/tasks-migrate.json --qps 50 --concurrency 4`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.CheckFlags(); err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
			cfg, err := o.restConfig()
			if err != nil {
				return err
			}
			run := *opts
			// -n is kubectl's --namespace; migrate's default is every namespace, not the
			// context's, so only a namespace given on the command line narrows it.
			if cmd.Flags().Changed("namespace") {
				run.Namespace = *o.Config.Namespace
			}
			run.Progress = o.Streams.ErrOut
			if _, err := migrate.Run(cmd.Context(), cfg, run); err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
			return nil
		},
	}
	addGoFlags(cmd, fs, "namespace")
	return cmd
}

func newVersionsCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "versions status|deprecate|retire|serve",
		Short: "Report, deprecate, retire or re-serve an API version of Task",
		Long: `The lifecycle of the Task CRD's API versions, as task-operator versions runs it: status
reports who still uses each one, deprecate makes the apiserver warn on it, retire stops
serving it once nothing needs it, and serve serves it again.`,
		Example: `  kubectl task versions status
  kubectl task versions deprecate v1alpha1
  kubectl task versions retire v1alpha1 --dry-run --migrate --rewrite-owner-refs
  kubectl task versions serve v1alpha1`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError(cmd, fmt.Sprintf("unknown subcommand %q (want status, deprecate, retire or serve)", args[0]))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError(cmd, "a subcommand is required: status, deprecate, retire or serve")
		},
	}
	for _, sub := range []struct{ name, use, short, example string }{
		{"status", "status", "Report each version: served, stored, who still reads or writes it",
			"  kubectl task versions status"},
		{"deprecate", "deprecate VERSION", "Mark VERSION deprecated: the apiserver warns on every request at it",
			"  kubectl task versions deprecate v1alpha1"},
		{"retire", "retire VERSION", "Stop serving VERSION once no object, client or owner reference needs it",
			"  kubectl task versions retire v1alpha1 --dry-run --migrate --rewrite-owner-refs"},
		{"serve", "serve VERSION", "Serve a retired VERSION again",
			"  kubectl task versions serve v1alpha1"},
	} {
		cmd.AddCommand(newVersionsSubcommand(o, sub.name, sub.use, sub.short, sub.example))
	}
	return cmd
}

func newVersionsSubcommand(o *Options, name, use, short, example string) *cobra.Command {
	fs := flag.NewFlagSet("versions "+name, flag.ContinueOnError)
	opts := versions.BindFlags(fs)
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Example: example,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := versions.CheckArgs(name, args); err != nil {
				return usageError(cmd, err.Error())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := o.restConfig()
			if err != nil {
				return err
			}
			run := *opts
			run.Out = o.Streams.Out
			return versions.Command(cmd.Context(), cfg, name, args, run)
		},
	}
	addGoFlags(cmd, fs)
	return cmd
}

// noArgs is the Args check of a command that takes no arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError(cmd, fmt.Sprintf("unexpected arguments: %v", args))
	}
	return nil
}
