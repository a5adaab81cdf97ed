package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestEveryCommandsHelpShowsAnExample(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"help"}, {"-h"},
		{"manager", "--help"}, {"migrate", "--help"}, {"http", "--help"}, {"version", "--help"},
		{"completion", "--help"}, {"versions", "--help"}, {"versions", "status", "--help"},
		{"versions", "deprecate", "--help"}, {"versions", "retire", "-h"}, {"versions", "serve", "--help"},
		{"manager", "-help"},
	} {
		var out, errOut bytes.Buffer
		code := execute(args, &out, &errOut)
		_, examples, found := strings.Cut(out.String(), "Examples:\n")
		if code != 0 || !found || !strings.Contains(examples, "task-operator ") {
			t.Errorf("task-operator %v: exit %d, stdout %q, stderr %q; want 0 and help with an example", args, code, out.String(), errOut.String())
		}
	}
}

func TestTopLevelHelpListsTheCommands(t *testing.T) {
	var out bytes.Buffer
	execute([]string{"--help"}, &out, &out)
	for _, cmd := range []string{"manager", "migrate", "versions", "http", "version", "completion"} {
		if !strings.Contains(out.String(), "\n  "+cmd+" ") {
			t.Errorf("task-operator --help does not list %s:\n%s", cmd, out.String())
		}
	}
}

func TestAWrongCommandLineIsAOneLineUsageError(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mangaer"}, `unknown command "mangaer"`},
		{[]string{"manager", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"manager", "--leader-elect=maybe"}, "--leader-elect"},
		{[]string{"manager", "--cert-management=x"}, `--cert-management="x": want self or external`},
		{[]string{"migrate", "--qps=fast"}, "--qps"},
		{[]string{"migrate", "extra"}, "unexpected arguments: extra"},
		{[]string{"versions"}, "a subcommand is required"},
		{[]string{"versions", "drop"}, `unknown subcommand "drop"`},
		{[]string{"versions", "retire"}, "want one VERSION argument"},
		{[]string{"versions", "status", "--nope"}, "unknown flag: --nope"},
		{[]string{"completion", "tcsh"}, "want one shell"},
	} {
		var out, errOut bytes.Buffer
		code := execute(tc.args, &out, &errOut)
		msg := errOut.String()
		if code != 2 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.want) || !strings.Contains(msg, "--help') ") && !strings.HasSuffix(msg, "--help')\n") {
			t.Errorf("task-operator %v: exit %d, stderr %q; want 2 and one line with %q and where help is", tc.args, code, msg, tc.want)
		}
	}
}

func TestTheHTTPRunnersBadFlagsExitTwoWithItsOwnLine(t *testing.T) {
	var out, errOut bytes.Buffer
	code := execute([]string{"http", "--url=ftp://example.com"}, &out, &errOut)
	if code != 2 || !strings.HasPrefix(errOut.String(), "http runner: --url") || strings.Count(errOut.String(), "\n") != 1 {
		t.Errorf("http --url=ftp://…: exit %d, stderr %q; want 2 and the runner's one line", code, errOut.String())
	}
}

func TestCommandLinesOfThePackageFlagDaysStillParse(t *testing.T) {
	root := newRootCommand(&bytes.Buffer{}, &bytes.Buffer{})
	for _, tc := range []struct{ args, want []string }{
		{nil, []string{"manager"}},
		{[]string{"--leader-elect=false"}, []string{"manager", "--leader-elect=false"}},
		{[]string{"manager", "-leader-elect=false", "-zap-devel"}, []string{"manager", "--leader-elect=false", "--zap-devel"}},
		{[]string{"migrate", "-dry-run", "-qps", "5"}, []string{"migrate", "--dry-run", "--qps", "5"}},
		{[]string{"versions", "retire", "v1alpha1", "-force"}, []string{"versions", "retire", "v1alpha1", "--force"}},
		{[]string{"http", "-url=http://x", "--", "-url"}, []string{"http", "--url=http://x", "--", "-url"}},
		{[]string{"versions", "deprecate", "v1alpha1", "--warning", "-not-a-flag"}, []string{"versions", "deprecate", "v1alpha1", "--warning", "-not-a-flag"}},
	} {
		if got := commandLine(root, tc.args); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("commandLine(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestCompletionScriptsAreWritten(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		var out, errOut bytes.Buffer
		if code := execute([]string{"completion", shell}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "task-operator") {
			t.Errorf("completion %s: exit %d, stderr %q, %d bytes", shell, code, errOut.String(), out.Len())
		}
	}
}

// TestCompletionCompletesCommandsAndFlags: the scripts call the binary's __complete, which
// knows the commands and each command's flags.
func TestCompletionCompletesCommandsAndFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "ma"}, "manager\t"},
		{[]string{"__complete", "versions", "re"}, "retire\t"},
		{[]string{"__complete", "manager", "--leader-el"}, "--leader-election-namespace\t"},
		{[]string{"__complete", "migrate", "--check"}, "--checkpoint\t"},
	} {
		var out, errOut bytes.Buffer
		if code := execute(tc.args, &out, &errOut); code != 0 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("task-operator %v: exit %d, stdout %q; want %q", tc.args, code, out.String(), tc.want)
		}
	}
}
