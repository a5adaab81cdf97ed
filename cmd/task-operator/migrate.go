package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"example.com/task-operator/migrate"
)

// runMigrate rewrites every stored Task at the storage version and then trims the CRD's
// storedVersions; progress and the summary go to stderr.
func runMigrate(args []string) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.Func("kubeconfig", "kubeconfig file; default $KUBECONFIG, then in-cluster", setKubeconfig)
	opts := migrate.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	opts.Progress = os.Stderr
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "migrate: load kubeconfig:", err)
		return 1
	}
	if _, err := migrate.Run(ctrl.SetupSignalHandler(), cfg, *opts); err != nil {
		fmt.Fprintln(os.Stderr, "migrate:", err)
		return 1
	}
	return 0
}
