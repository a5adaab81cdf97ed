// Command task-operator runs the Task operator and its helpers:
//
//	task-operator [manager] [flags]  run the controller and webhooks (the default)
//	task-operator migrate [flags]    rewrite stored Tasks at v1 and trim storedVersions
//	task-operator versions SUB ...   report, deprecate, retire or re-serve an API version
//	task-operator http [flags]       perform one HTTP call (the runner inside HTTP Task pods)
//	task-operator version            print the version (also --version)
package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	_ "time/tzdata" // schedules name IANA time zones; distroless images have no zoneinfo

	"example.com/task-operator/internal/version"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	command, rest := "manager", args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		command, rest = args[0], args[1:]
	}
	// --version answers after any command too (task-operator manager --version), as users of
	// an image whose entrypoint names the command expect.
	if slices.ContainsFunc(rest, func(a string) bool { return a == "--version" || a == "-version" }) {
		command = "version"
	}
	switch command {
	case "manager":
		return runManager(rest)
	case "migrate":
		return runMigrate(rest)
	case "versions":
		return runVersions(rest)
	case "http":
		return runHTTP(rest)
	case "version":
		fmt.Println(version.Get())
		return 0
	case "help":
		fmt.Println("usage: task-operator [manager|migrate|versions|http|version] [flags]; -h after a command lists its flags")
		return 0
	default:
		fmt.Fprintf(os.Stderr, "task-operator: unknown command %q (want manager, migrate, versions or http)\n", command)
		return 2
	}
}
