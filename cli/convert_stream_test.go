package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// writeManifest writes text to a file named name in a new directory and returns its path.
func writeManifest(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// runConvertCommand runs kubectl task convert with args and returns what it printed.
func runConvertCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root, out, _ := newTestRoot()
	root.SetArgs(append([]string{"convert"}, args...))
	err := root.Execute()
	return out.String(), err
}

// TestConvertKeepsEveryTaskOfAJSONStream: kubectl apply -f reads a file of JSON objects one
// after another (a JSON stream) as that many objects. convert converts each of them, printed or
// written back, and keeps the file JSON; it loses none after the first.
func TestConvertKeepsEveryTaskOfAJSONStream(t *testing.T) {
	text := `{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":{"name":"j1"},"spec":{"type":"shell","shell":"echo 1"}}
{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"between"}}
{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":{"name":"j2"},"spec":{"type":"shell","shell":"echo 2"}}
`
	check := func(t *testing.T, got string) {
		t.Helper()
		for _, want := range []string{`"name": "j1"`, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"between"}}` + "\n", `"name": "j2"`} {
			if !strings.Contains(got, want) {
				t.Errorf("the result lacks %s:\n%s", want, got)
			}
		}
		if n := strings.Count(got, `"apiVersion": "example.com/v1"`); n != 2 {
			t.Errorf("%d Tasks at v1, want 2:\n%s", n, got)
		}
		if strings.Contains(got, "---") || strings.Contains(got, "apiVersion: ") {
			t.Errorf("the JSON stream is no longer JSON:\n%s", got)
		}
	}
	t.Run("printed", func(t *testing.T) {
		out, err := runConvertCommand(t, "-f", writeManifest(t, "tasks.json", text))
		if err != nil {
			t.Fatal(err)
		}
		check(t, out)
	})
	t.Run("in place", func(t *testing.T) {
		p := writeManifest(t, "tasks.json", text)
		if _, err := runConvertCommand(t, "-f", p, "--in-place"); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(p)
		check(t, string(got))
	})
}

// TestConvertReadsYAMLAfterASingleJSONObject: as kubectl does, a file that starts with one JSON
// object and goes on with YAML documents is read to its end.
func TestConvertReadsYAMLAfterASingleJSONObject(t *testing.T) {
	text := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"first"}}
---
apiVersion: example.com/v1alpha1
kind: Task
metadata: {name: second}
spec: {type: shell, shell: echo}
`
	out, err := runConvertCommand(t, "-f", writeManifest(t, "mixed.yaml", text))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"first"}}`+"\n---\n") ||
		!strings.Contains(out, "apiVersion: example.com/v1\n") || !strings.Contains(out, "name: second") {
		t.Errorf("got:\n%s", out)
	}
}

// TestConvertInPlaceLeavesAFileWithoutTasksAlone: a file with nothing to convert is not
// written: not its separators' comments, not its missing final newline.
func TestConvertInPlaceLeavesAFileWithoutTasksAlone(t *testing.T) {
	text := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n--- # the second one\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}"
	p := writeManifest(t, "cm.yaml", text)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := runConvertCommand(t, "-f", p, "--in-place"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	if string(got) != text {
		t.Fatalf("a file without Tasks was rewritten:\nbefore: %q\nafter:  %q", text, got)
	}
	if info, err := os.Stat(p); err != nil || !info.ModTime().Equal(old) {
		t.Errorf("a file without Tasks was written (modified %v, was %v)", info.ModTime(), old)
	}
}

// TestConvertKeepsWhatIsNotATaskByteForByte: around a converted Task, the other documents,
// the separators with their comments and a final document without a newline stay as written.
func TestConvertKeepsWhatIsNotATaskByteForByte(t *testing.T) {
	head := "# leading comment\n---   # first\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}   # trailing\n\n--- # before the Task\n"
	task := "apiVersion: example.com/v1alpha1\nkind: Task\nmetadata: {name: t}\nspec: {type: shell, shell: echo}\n"
	tail := "---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}"
	p := writeManifest(t, "mixed.yaml", head+task+tail)
	if _, err := runConvertCommand(t, "-f", p, "--in-place"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	got := string(b)
	if !strings.HasPrefix(got, head) || !strings.HasSuffix(got, tail) {
		t.Fatalf("what is not a Task changed:\n%q", got)
	}
	if mid := strings.TrimSuffix(strings.TrimPrefix(got, head), tail); !strings.Contains(mid, "apiVersion: example.com/v1\n") {
		t.Errorf("the Task was not converted:\n%s", mid)
	}
}

// TestConvertInPlaceLeavesATaskAlreadyConvertedAlone: a Task that is already what the cluster
// stores at the target version, defaults included, is nothing to change: its file, comments
// and key order included, is not rewritten.
func TestConvertInPlaceLeavesATaskAlreadyConvertedAlone(t *testing.T) {
	text := `# the nightly report
apiVersion: example.com/v1
kind: Task
metadata:
  name: done
spec:
  runner:
    type: Shell
    shell: {script: echo hi}   # the whole job
  parallelism: 1
  retry:
    maxRetries: 3
    backoff: {factor: 2, initial: 10s, max: 5m0s}
`
	p := writeManifest(t, "done.yaml", text)
	if _, err := runConvertCommand(t, "-f", p, "--in-place"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != text {
		t.Fatalf("a Task with nothing to convert was rewritten:\n%s", got)
	}
}

// TestSeveralPrintedFilesReadBackAsKubectlReadsThem: convert joins the files it prints with ---.
// kubectl apply -f - reads a stream that has had two JSON values as JSON to its end, so a JSON
// stream among the files, first or later, must come out one value per document for every
// object to be read back.
func TestSeveralPrintedFilesReadBackAsKubectlReadsThem(t *testing.T) {
	stream := `{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":{"name":"j1"},"spec":{"type":"shell","shell":"echo 1"}}
{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"between"}}
{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":{"name":"j2"},"spec":{"type":"shell","shell":"echo 2"}}
`
	single := `{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":{"name":"one"},"spec":{"type":"shell","shell":"echo"}}`
	yamlTasks := `apiVersion: example.com/v1alpha1
kind: Task
metadata: {name: y1}
spec: {type: shell, shell: echo}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: y2}
`
	tests := []struct {
		name  string
		files []string
		want  []string
	}{
		{"a JSON stream first", []string{stream, yamlTasks}, []string{"j1", "between", "j2", "y1", "y2"}},
		{"a JSON stream last", []string{yamlTasks, stream}, []string{"y1", "y2", "j1", "between", "j2"}},
		{"two JSON streams", []string{stream, stream}, []string{"j1", "between", "j2", "j1", "between", "j2"}},
		{"one JSON value, then a stream", []string{single, stream}, []string{"one", "j1", "between", "j2"}},
		{"a file of one JSON value, then YAML, last", []string{yamlTasks, single + "\n" + yamlTasks}, []string{"y1", "y2", "one", "y1", "y2"}},
		{"a file of one JSON value, then YAML, first", []string{single + "\n" + yamlTasks, stream}, []string{"one", "y1", "y2", "j1", "between", "j2"}},
		{"a file of one JSON value, then --- and YAML", []string{yamlTasks, single + "\n---\n" + yamlTasks}, []string{"y1", "y2", "one", "y1", "y2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args []string
			for i, text := range tt.files {
				name := fmt.Sprintf("%d.json", i)
				if !strings.HasPrefix(text, "{") {
					name = fmt.Sprintf("%d.yaml", i)
				}
				args = append(args, "-f", writeManifest(t, name, text))
			}
			out, err := runConvertCommand(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
			for {
				var obj struct {
					APIVersion string `json:"apiVersion"`
					Kind       string `json:"kind"`
					Metadata   struct {
						Name string `json:"name"`
					} `json:"metadata"`
				}
				err := dec.Decode(&obj)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("kubectl's reader failed after %v: %v\n%s", got, err, out)
				}
				if obj.Kind == "" {
					continue // an empty document, which kubectl skips
				}
				if obj.Kind == "Task" && obj.APIVersion != "example.com/v1" {
					t.Errorf("Task %s read back at %s, want example.com/v1", obj.Metadata.Name, obj.APIVersion)
				}
				got = append(got, obj.Metadata.Name)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("read back %v, want %v:\n%s", got, tt.want, out)
			}
		})
	}
}
