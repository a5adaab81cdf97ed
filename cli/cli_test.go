package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func newTestRoot() (*cobra.Command, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	root := NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return root, &out, &errOut
}

// TestEveryCommandsHelpShowsAnExample walks the command tree: a user reading --help of any
// command sees how it is typed.
func TestEveryCommandsHelpShowsAnExample(t *testing.T) {
	root, _, _ := newTestRoot()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "help" || c.Hidden {
			return
		}
		t.Run(c.CommandPath(), func(t *testing.T) {
			if !strings.Contains(c.Example, "kubectl task") {
				t.Errorf("%s: no example typed as `kubectl task ...`: %q", c.CommandPath(), c.Example)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func TestConvert(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	alpha := write("alpha.yaml", `# kept in Git
apiVersion: example.com/v1alpha1
kind: Task
metadata: {name: report}
spec: {type: shell, replicas: 2, maxRetry: 1, shell: echo hi}
---
apiVersion: v1
kind: ConfigMap
metadata:   {name: untouched}   # spacing and comments kept
`)
	withEnv := write("env.yaml", `apiVersion: example.com/v1
kind: Task
metadata: {name: with-env}
spec:
  runner: {type: Shell, shell: {script: echo, env: [{name: A, value: b}]}}
`)
	badCron := write("cron.yaml", `apiVersion: example.com/v1beta1
kind: Task
metadata: {name: bad-cron}
spec: {runner: {type: Shell, shell: {script: echo}}, schedule: "every day"}
`)
	plainV1 := write("plain.yaml", `apiVersion: example.com/v1
kind: Task
metadata: {name: plain}
spec:
  runner: {type: Shell, shell: {script: echo}}
`)
	for _, tc := range []struct {
		name    string
		args    []string
		want    []string // substrings of stdout
		wantErr string
	}{
		{name: "v1alpha1 to v1", args: []string{"-f", alpha},
			want: []string{"apiVersion: example.com/v1\n", "parallelism: 2", "maxRetries: 1", "script: echo hi", "type: Shell",
				"---\napiVersion: v1\nkind: ConfigMap\nmetadata:   {name: untouched}   # spacing and comments kept\n"}},
		{name: "v1 plain to v1alpha1", args: []string{"-f", plainV1, "--to", "v1alpha1"},
			want: []string{"apiVersion: example.com/v1alpha1\n", "shell: echo", "type: shell"}},
		{name: "env has no v1alpha1 field", args: []string{"-f", withEnv, "--to", "v1alpha1"},
			wantErr: `task "with-env": v1alpha1 cannot express spec.runner.shell.env`},
		{name: "a cron that does not parse", args: []string{"-f", badCron},
			wantErr: `task "bad-cron": spec.schedule.cron`},
		{name: "unknown target version", args: []string{"-f", alpha, "--to", "v2"},
			wantErr: "--to v2: not a served version"},
		{name: "no file", args: nil, wantErr: "-f FILE|DIR is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, out, _ := newTestRoot()
			root.SetArgs(append([]string{"convert"}, tc.args...))
			err := root.Execute()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestConvertInPlaceRewritesOnlyTasks converts a directory in place: Task files change, others
// keep their bytes.
func TestConvertInPlaceRewritesOnlyTasks(t *testing.T) {
	dir := t.TempDir()
	task := filepath.Join(dir, "a", "task.yml")
	other := filepath.Join(dir, "other.yaml")
	if err := os.MkdirAll(filepath.Dir(task), 0o755); err != nil {
		t.Fatal(err)
	}
	otherText := "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}  # mine\n"
	for p, text := range map[string]string{
		task:  "apiVersion: example.com/v1alpha1\nkind: Task\nmetadata: {name: t}\nspec: {type: http, url: 'https://example.com/'}\n",
		other: otherText,
	} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, out, _ := newTestRoot()
	root.SetArgs([]string{"convert", "-f", dir, "--in-place"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("--in-place printed %q", out)
	}
	got, _ := os.ReadFile(task)
	if !strings.Contains(string(got), "apiVersion: example.com/v1\n") || !strings.Contains(string(got), "url: https://example.com/") {
		t.Errorf("task not converted:\n%s", got)
	}
	if got, _ := os.ReadFile(other); string(got) != otherText {
		t.Errorf("a file without Tasks changed:\n%s", got)
	}
}
