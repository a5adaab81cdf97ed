package plugin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestBadInputIsOneLineNamingTheObject: every mistake a user makes is one line on stderr that
// names the object, and a non-zero exit; never a stack trace or a usage dump.
func TestBadInputIsOneLineNamingTheObject(t *testing.T) {
	ns := setUp(t)
	other := setUp(t)
	// Suspended from its creation, a one-shot Task never runs: it has no runs yet.
	apply(t, ns, task("idle", "", "  suspend: true\n"))
	ok(t, "wait", "-n", ns, "--for=jsonpath={.status.phase}=Suspended", "task/idle", "--timeout=90s")
	for _, tc := range []struct {
		args []string
		want string // the whole of stderr's first line
	}{
		{[]string{"status", "nope", "-n", ns}, `error: task "nope" not found in namespace "` + ns + `"`},
		{[]string{"runs", "nope", "-n", ns}, `error: task "nope" not found in namespace "` + ns + `"`},
		{[]string{"logs", "nope", "-n", ns}, `error: task "nope" not found in namespace "` + ns + `"`},
		{[]string{"suspend", "nope", "-n", ns}, `error: task "nope" not found in namespace "` + ns + `"`},
		{[]string{"resume", "nope", "-n", ns}, `error: task "nope" not found in namespace "` + ns + `"`},
		{[]string{"rerun", "nope", "-n", ns}, `error: task "nope" not found in namespace "` + ns + `"`},
		{[]string{"run", "nope", "-n", ns}, `error: task "nope" not found in namespace "` + ns + `"`},
		{[]string{"cancel", "nope", "-n", ns}, `error: task "nope" not found in namespace "` + ns + `"`},
		{[]string{"run", "idle", "-n", ns}, `error: task "idle" in namespace "` + ns + `" has no schedule: use rerun to run it again`},
		{[]string{"rerun", "idle", "-n", ns}, `error: task "idle" in namespace "` + ns + `" is Suspended, not finished: rerun it once it Succeeded or Failed (or cancel it first)`},
		{[]string{"status", "idle", "-n", other}, `error: task "idle" not found in namespace "` + other + `"`},
		{[]string{"status", "idle", "-n", "no-such-namespace"}, `error: task "idle" not found in namespace "no-such-namespace"`},
		{[]string{"runs", "idle", "-n", ns}, `error: task "idle" in namespace "` + ns + `" has no runs yet (phase Suspended)`},
		{[]string{"logs", "idle", "-n", ns}, `error: task "idle" in namespace "` + ns + `" has no runs yet (phase Suspended)`},
		{[]string{"logs", "idle", "-n", ns, "--attempt", "0"}, `error: --attempt must be 1 or more, got 0`},
		{[]string{"runs", "idle", "-n", ns, "-o", "xml"}, `error: -o xml: unknown output format (want one of json, yaml, kyaml, name, go-template, go-template-file, template, templatefile, jsonpath, jsonpath-as-json, jsonpath-file, custom-columns, custom-columns-file)`},
		{[]string{"status", "-n", ns}, `error: a Task name is required, e.g. kubectl task status NAME`},
		{[]string{"status", "a", "b", "-n", ns}, `error: one Task name expected, got 2: a b`},
		{[]string{"status", "idle", "--bogus"}, `error: unknown flag: --bogus`},
		{[]string{"convert", "-f", "no-such-file.yaml"}, `error: stat no-such-file.yaml: no such file or directory`},
		{[]string{"completion", "powershell"}, `error: invalid argument "powershell" for "kubectl task completion"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := kubectl(t, "", append([]string{"task"}, tc.args...)...)
			if r.code == 0 {
				t.Fatalf("exit 0, want an error; stdout: %s", r.stdout)
			}
			first, rest, _ := strings.Cut(strings.TrimRight(r.stderr, "\n"), "\n")
			if first != tc.want {
				t.Errorf("stderr %q, want %q", first, tc.want)
			}
			// At most a pointer to --help follows a usage error.
			if rest != "" && !strings.HasPrefix(rest, "See 'kubectl task") {
				t.Errorf("more than one line on stderr:\n%s", r.stderr)
			}
			if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") || r.stdout != "" {
				t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
			}
		})
	}
	// The Task that exists but has no runs still has a status to show, and -o json an empty
	// list of runs, as kubectl get does.
	contains(t, "status of a Task with no runs", ok(t, "task", "status", "idle", "-n", ns),
		"Suspended:", "yes", "Current run:", "<none yet>")
	var none struct {
		Kind  string
		Items []any
	}
	if err := json.Unmarshal([]byte(ok(t, "task", "runs", "idle", "-n", ns, "-o", "json")), &none); err != nil || none.Kind != "List" || len(none.Items) != 0 {
		t.Errorf("runs -o json of a Task with no runs: %+v, %v; want an empty List", none, err)
	}
}

// TestATaskBeingDeletedTakesNoRequestAndSaysSo: a Task that another finalizer keeps in its
// deletion refuses every request and edit the plugin makes (none would run: the operator starts
// nothing for it any more), one line naming it; status shows the deletion.
func TestATaskBeingDeletedTakesNoRequestAndSaysSo(t *testing.T) {
	ns := setUp(t)
	apply(t, ns, task("leaving", "", "")+"---\n")
	ok(t, "wait", "-n", ns, "--for=jsonpath={.status.phase}=Succeeded", "task/leaving", "--timeout=90s")
	ok(t, "patch", "task", "leaving", "-n", ns, "--type=merge", "-p", `{"metadata":{"finalizers":["e2e.example.com/hold"]}}`)
	defer kubectl(t, "", "patch", "task", "leaving", "-n", ns, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	ok(t, "delete", "task", "leaving", "-n", ns, "--wait=false")
	want := `error: task "leaving" in namespace "` + ns + `" is being deleted (since `
	for _, cmd := range []string{"rerun", "cancel", "suspend", "resume"} {
		r := kubectl(t, "", "task", cmd, "leaving", "-n", ns)
		if r.code == 0 || !strings.HasPrefix(r.stderr, want) || strings.Count(strings.TrimRight(r.stderr, "\n"), "\n") != 0 {
			t.Errorf("%s of a Task being deleted: exit %d, stdout %q, stderr %q; want one line starting %q", cmd, r.code, r.stdout, r.stderr, want)
		}
	}
	requests := `jsonpath={.spec.suspend}|{.metadata.annotations.task\.example\.com/run-requested}|{.metadata.annotations.task\.example\.com/cancel-requested}`
	if got := ok(t, "get", "task", "leaving", "-n", ns, "-o", requests); got != "||" {
		t.Errorf("a refused request still changed the Task: spec.suspend|run-requested|cancel-requested = %q", got)
	}
	contains(t, "status of a Task being deleted", ok(t, "task", "status", "leaving", "-n", ns),
		"Deleting:", "(waiting for e2e.example.com/hold; no run starts any more)")
}

// TestHelpOfEveryCommandShowsAnExample: --help of the plugin and of each command, as kubectl
// passes it on, shows how the command is typed.
func TestHelpOfEveryCommandShowsAnExample(t *testing.T) {
	setUp(t)
	for _, cmd := range []string{"", "status", "runs", "logs", "suspend", "resume", "rerun", "run", "cancel", "convert", "migrate", "versions", "version", "completion"} {
		t.Run("help "+cmd, func(t *testing.T) {
			args := []string{"task"}
			if cmd != "" {
				args = append(args, cmd)
			}
			out := ok(t, append(args, "--help")...)
			contains(t, "kubectl task "+cmd+" --help", out, "Usage:\n  kubectl task "+cmd, "Examples:\n  ")
			_, examples, _ := strings.Cut(out, "Examples:\n")
			examples, _, _ = strings.Cut(examples, "\n\n")
			contains(t, "the examples of kubectl task "+cmd, examples, "kubectl task "+cmd)
		})
	}
}

// TestCompletionScripts: cobra's scripts for each shell, named after the plugin.
func TestCompletionScripts(t *testing.T) {
	setUp(t)
	for shell, want := range map[string]string{"bash": "__start_kubectl-task", "zsh": "#compdef kubectl-task", "fish": "complete -c kubectl-task"} {
		contains(t, "completion "+shell, ok(t, "task", "completion", shell), want)
	}
}

// TestRunsWatchPrintsARunAsItChanges: `runs --watch` started before the Task runs prints its
// attempt when the Job appears and again when it succeeds.
func TestRunsWatchPrintsARunAsItChanges(t *testing.T) {
	ns := setUp(t)
	apply(t, ns, task("slow", `e2e.example.com/run-seconds: "3"`, "  suspend: true\n"))
	cmd, stdout, stderr := startWatch(t, 2*time.Minute, "slow", ns)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	// The header comes first: nothing ran yet.
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "ATTEMPT") {
		t.Fatalf("first line %q, want the header; stderr: %s", lines.Text(), stderr.String())
	}
	ok(t, "task", "resume", "slow", "-n", ns)
	var seen []string
	for lines.Scan() {
		seen = append(seen, lines.Text())
		if strings.Contains(lines.Text(), "slow-0-1") && strings.Contains(lines.Text(), "Succeeded") {
			break
		}
	}
	if len(seen) == 0 || !strings.Contains(seen[len(seen)-1], "Succeeded") {
		t.Fatalf("runs --watch never showed slow-0-1 Succeeded; it printed:\n%s\nstderr: %s", strings.Join(seen, "\n"), stderr.String())
	}
	if !strings.Contains(seen[0], "Active") {
		t.Errorf("runs --watch: the first row is not the active attempt: %q", seen[0])
	}
}

// TestRunsWatchPrintsEachExistingRunOnce: `runs --watch` on a Task that already ran prints
// the header and each existing attempt once, then only what changes: the watch starts where the
// list ended, so the Jobs listed do not come again as new.
func TestRunsWatchPrintsEachExistingRunOnce(t *testing.T) {
	ns := setUp(t)
	apply(t, ns, task("done", "", ""))
	waitFor(t, ns, "done", "Succeeded")
	cmd, stdout, stderr := startWatch(t, time.Minute, "done", ns)
	lines := make(chan string)
	go func() {
		defer close(lines)
		scan := bufio.NewScanner(stdout)
		for scan.Scan() {
			lines <- scan.Text()
		}
	}()
	var seen []string
	// Whatever the watch would repeat comes at once; five quiet seconds are enough to see it.
	quiet := time.After(5 * time.Second)
read:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				break read
			}
			seen = append(seen, l)
		case <-quiet:
			break read
		}
	}
	_ = cmd.Process.Kill()
	for range lines {
	}
	_ = cmd.Wait()
	if len(seen) != 2 || !strings.HasPrefix(seen[0], "ATTEMPT") || !strings.Contains(seen[1], "done-0-1") || !strings.Contains(seen[1], "Succeeded") {
		t.Errorf("runs --watch of a finished Task: want the header and done-0-1 Succeeded once, got:\n%s\nstderr: %s", strings.Join(seen, "\n"), stderr.String())
	}
}

// startWatch starts `kubectl task runs TASK -n NS --watch`, ended within timeout; the caller
// reads stdout and stops the command.
func startWatch(t *testing.T, timeout time.Duration, task, ns string) (*exec.Cmd, io.Reader, *strings.Builder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, "kubectl", "task", "runs", task, "-n", ns, "--watch")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.KubeconfigPath)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdout, stderr
}
