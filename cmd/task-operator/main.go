// Command task-operator runs the Task operator and its helpers:
//
//	task-operator [manager] [flags]  run the controller and webhooks (the default)
//	task-operator migrate [flags]    rewrite stored Tasks at v1 and trim storedVersions
//	task-operator versions SUB ...   report, deprecate, retire or re-serve an API version
//	task-operator http [flags]       perform one HTTP call (the runner inside HTTP Task pods)
//	task-operator version            print the version (also --version)
//	task-operator completion SHELL   print a bash, zsh or fish completion script
//
// The command line is cobra's (root.go); each command's flags are a package flag FlagSet
// attached to it, so a flag's name, default and meaning are those the manifests pass.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	_ "time/tzdata" // schedules name IANA time zones; distroless images have no zoneinfo

	"example.com/task-operator/internal/version"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	return execute(args, os.Stdout, os.Stderr)
}

// execute runs the command line args and returns the exit code: 0, 1 when the command failed,
// 2 when the command line is wrong (one line on stderr naming the mistake and the help).
func execute(args []string, stdout, stderr io.Writer) int {
	// --version answers after any command too (task-operator manager --version), as users of
	// an image whose entrypoint names the command expect.
	if slices.ContainsFunc(args, func(a string) bool { return a == "--version" || a == "-version" }) {
		fmt.Fprintln(stdout, version.Get())
		return 0
	}
	root := newRootCommand(stdout, stderr)
	root.SetArgs(commandLine(root, args))
	err := root.Execute()
	var usage *usageError
	var code exitCode
	switch {
	case errors.As(err, &code):
		return int(code)
	case err == nil:
		return 0
	case errors.As(err, &usage):
		fmt.Fprintln(stderr, "task-operator:", usage.Error())
		return 2
	case errors.Is(err, errAlreadyReported):
		return 1
	default:
		fmt.Fprintln(stderr, "task-operator:", err)
		return 1
	}
}

// commandLine makes args what cobra expects of the command line the operator has always
// taken: no command, or flags first, means the manager (task-operator --leader-elect=false);
// and package flag's single-dash long flags (-leader-elect=false) are pflag's --leader-elect.
func commandLine(root *cobra.Command, args []string) []string {
	if len(args) == 0 || (strings.HasPrefix(args[0], "-") && !isHelp(args[0])) {
		args = append([]string{"manager"}, args...)
	}
	cmd, _, err := root.Find(args)
	if err != nil {
		return args
	}
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		out = append(out, doubleDash(cmd, a))
	}
	return out
}

// doubleDash turns -name or -name=value into --name... when name is one of cmd's flags.
func doubleDash(cmd *cobra.Command, arg string) string {
	if len(arg) <= 2 || arg[0] != '-' || arg[1] == '-' {
		return arg
	}
	name, _, _ := strings.Cut(arg[1:], "=")
	if name != "help" && cmd.Flags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil {
		return arg
	}
	return "-" + arg
}

// errAlreadyReported is a failure whose reason the command has logged already.
var errAlreadyReported = errors.New("already reported")

// usageError is a wrong command line: an unknown command or flag, a missing argument.
type usageError struct {
	msg, command string
}

func (e *usageError) Error() string {
	return fmt.Sprintf("%s (see '%s --help')", e.msg, e.command)
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help"
}
