package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"

	"example.com/task-operator/versions"
)

const versionsUsage = "usage: task-operator versions status|deprecate VERSION|retire VERSION|serve VERSION [flags]"

// runVersions runs the version lifecycle commands (package versions); the report, plans and
// progress go to stdout, errors to stderr.
func runVersions(args []string) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(os.Stderr, versionsUsage)
		return 2
	}
	sub, rest := args[0], args[1:]
	// VERSION may come before the flags (retire v1alpha1 --force), as it reads best.
	var positional []string
	for len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		positional, rest = append(positional, rest[0]), rest[1:]
	}
	fs := flag.NewFlagSet("versions "+sub, flag.ContinueOnError)
	fs.Func("kubeconfig", "kubeconfig file; default $KUBECONFIG, then in-cluster", setKubeconfig)
	opts := versions.BindFlags(fs)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	positional = append(positional, fs.Args()...)
	opts.Out = os.Stdout
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "versions: load kubeconfig:", err)
		return 1
	}
	if err := versions.Command(ctrl.SetupSignalHandler(), cfg, sub, positional, *opts); err != nil {
		fmt.Fprintln(os.Stderr, "versions:", err)
		return 1
	}
	return 0
}
