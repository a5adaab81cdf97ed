package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"example.com/task-operator/internal/version"
	httprunner "example.com/task-operator/runner/http"
)

// newRootCommand is task-operator with every command; stdout and stderr are the process's.
func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "task-operator",
		Short: "The Task operator (example.com Tasks) and its helpers",
		Long: `The Task operator: its controller and webhooks (manager), the storage-version migration
(migrate), the API version lifecycle (versions) and the runner of HTTP Tasks (http).

With no command, or with flags first, task-operator runs the manager. --version prints the
version after any command too.`,
		Example: `  task-operator manager --leader-elect=false --webhook-local-url=https://localhost:9443 --install-crd
  task-operator migrate --dry-run
  task-operator versions status
  task-operator versions retire v1alpha1 --dry-run --migrate --rewrite-owner-refs
  task-operator http --url=https://example.com/hook --method=POST --accept=200,204
  task-operator --version`,
		Args:          noArgs("command", "manager, migrate, versions, http, version or completion"),
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newManagerCommand(), newMigrateCommand(), newVersionsCommand(stdout),
		newHTTPCommand(stdout, stderr), newVersionCommand(stdout), newCompletionCommand(stdout))
	root.SetOut(stdout)
	root.SetErr(stderr)
	// Unknown flags and bad values are one line naming the command; cobra's own help
	// (--help, -h) still goes to stdout.
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &usageError{msg: err.Error(), command: cmd.CommandPath()}
	})
	root.CompletionOptions.DisableDefaultCmd = true
	return root
}

// noArgs is the Args check of a command that takes no arguments (or whose arguments are
// commands, named by what and listed in want).
func noArgs(what, want string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		if what == "" {
			return &usageError{msg: fmt.Sprintf("unexpected arguments: %s", strings.Join(args, " ")), command: cmd.CommandPath()}
		}
		return &usageError{msg: fmt.Sprintf("unknown %s %q (want %s)", what, args[0], want), command: cmd.CommandPath()}
	}
}

// addGoFlags attaches a package flag FlagSet to cmd: the flags keep their names, defaults and
// help, and are written --name (pflag's style; commandLine accepts -name too).
func addGoFlags(cmd *cobra.Command, fs *flag.FlagSet) {
	cmd.Flags().AddGoFlagSet(fs)
	cmd.Flags().SortFlags = false
}

func newManagerCommand() *cobra.Command {
	f, fs := newManagerFlags()
	cmd := &cobra.Command{
		Use:   "manager [flags]",
		Short: "Run the controller and the webhooks (the default command)",
		Long: `Run the Task controller, the conversion, defaulting and validating webhooks, the metrics
endpoint and the health probes until SIGTERM or SIGINT.

In the cluster the Deployment of config/manager runs it; outside the cluster
--webhook-local-url points the apiserver at this process.`,
		Example: `  # What the Deployment runs:
  task-operator manager --leader-elect --metrics-bind-address=:8443 --webhook-port=9443
  # Outside the cluster, against the cluster of $KUBECONFIG:
  task-operator manager --install-crd --leader-elect=false --webhook-local-url=https://localhost:9443`,
		Args: noArgs("", ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.completeFlags(cmd.Flags()); err != nil {
				return &usageError{msg: err.Error(), command: cmd.CommandPath()}
			}
			return runManager(f)
		},
	}
	addGoFlags(cmd, fs)
	return cmd
}

func newHTTPCommand(stdout, stderr io.Writer) *cobra.Command {
	fs := flag.NewFlagSet("http", flag.ContinueOnError)
	f := httprunner.BindFlags(fs)
	cmd := &cobra.Command{
		Use:   "http --url=URL [flags]",
		Short: "Perform one HTTP call (the runner inside the pods of HTTP Tasks)",
		Long: `Perform one HTTP request and exit 0 when its status code is accepted, 1 when the request
failed or the status was not accepted, 2 when the flags are wrong. Redirects are not followed.
The operator runs it in the Jobs of Tasks of runner type HTTP.`,
		Example: `  task-operator http --url=https://example.com/hook --method=POST \
    --header=Content-Type:application/json --body='{"a":1}' --timeout=30s --accept=200,204`,
		RunE: func(_ *cobra.Command, args []string) error {
			if code := f.Run(args, stdout, stderr); code != httprunner.ExitOK {
				return exitCode(code)
			}
			return nil
		},
	}
	addGoFlags(cmd, fs)
	return cmd
}

// exitCode is a failure already reported whose exit code is given (the HTTP runner's).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

func newVersionCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version (also --version after any command)",
		Example: "  task-operator version\n  task-operator manager --version",
		Args:    noArgs("", ""),
		Run:     func(*cobra.Command, []string) { fmt.Fprintln(stdout, version.Get()) },
	}
}

func newCompletionCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script",
		Long:  "Print cobra's completion script of task-operator for bash, zsh or fish, to source or to install where the shell loads completions.",
		Example: `  source <(task-operator completion bash)
  task-operator completion zsh > "${fpath[1]}/_task-operator"
  task-operator completion fish > ~/.config/fish/completions/task-operator.fish`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || (args[0] != "bash" && args[0] != "zsh" && args[0] != "fish") {
				return &usageError{msg: fmt.Sprintf("want one shell, bash, zsh or fish, got %q", strings.Join(args, " ")), command: cmd.CommandPath()}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(stdout, true)
			case "zsh":
				return root.GenZshCompletion(stdout)
			default:
				return root.GenFishCompletion(stdout, true)
			}
		},
	}
}

// kubeconfigFlag is --kubeconfig of the commands that talk to the apiserver; controller-runtime's
// loader reads it from $KUBECONFIG.
func kubeconfigFlag(fs *flag.FlagSet) {
	fs.Func("kubeconfig", "kubeconfig file; default $KUBECONFIG, then in-cluster", setKubeconfig)
}

// restConfig loads the kubeconfig of --kubeconfig, $KUBECONFIG or the pod.
func restConfig(command string) (*rest.Config, error) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: load kubeconfig: %w", command, err)
	}
	return cfg, nil
}
