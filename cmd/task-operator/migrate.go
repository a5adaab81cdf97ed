package main

import (
	"flag"
	"os"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"example.com/task-operator/migrate"
)

// newMigrateCommand rewrites every stored Task at the storage version and then trims the
// CRD's storedVersions; progress and the summary go to stderr.
func newMigrateCommand() *cobra.Command {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	kubeconfigFlag(fs)
	opts := migrate.BindFlags(fs)
	cmd := &cobra.Command{
		Use:   "migrate [flags]",
		Short: "Rewrite the stored Tasks at v1 and trim the CRD's storedVersions",
		Long: `Rewrite every stored Task at the storage version (v1), then set the CRD's
status.storedVersions to [v1]. An interrupted run resumes from --checkpoint. Progress and
the summary go to stderr.`,
		Example: `  task-operator migrate --dry-run
  task-operator migrate --checkpoint /tmp/tasks-migrate.json --qps 50 --concurrency 4`,
		Args: noArgs("", ""),
		RunE: func(*cobra.Command, []string) error {
			if err := opts.CheckFlags(); err != nil {
				return prefixed("migrate", err)
			}
			cfg, err := restConfig("migrate")
			if err != nil {
				return err
			}
			opts.Progress = os.Stderr
			_, err = migrate.Run(ctrl.SetupSignalHandler(), cfg, *opts)
			return prefixed("migrate", err)
		},
	}
	addGoFlags(cmd, fs)
	return cmd
}
