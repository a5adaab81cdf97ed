package cli

import (
	"strings"
	"testing"
)

func TestConvertDocumentKeepsWhatIsNotATaskAndConvertsWhatIs(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      string // a substring of the result; "" for the document unchanged
	}{
		{name: "a List without Tasks is left byte for byte", doc: "kind: List\napiVersion: v1\nitems:\n- {kind: ConfigMap, apiVersion: v1, metadata: {name: c}}\n"},
		{name: "a document that is not YAML and not a Task is left", doc: "kind: ConfigMap\ndata: {a: [\n"},
		{name: "a TaskList takes the target version", doc: "apiVersion: example.com/v1alpha1\nkind: TaskList\nitems:\n- apiVersion: example.com/v1alpha1\n  kind: Task\n  metadata: {name: r}\n  spec: {type: shell, shell: echo hi}\n",
			want: "apiVersion: example.com/v1\nitems:\n- apiVersion: example.com/v1\n"},
		{name: "a JSON Task stays JSON", doc: `{"apiVersion": "example.com/v1alpha1", "kind": "Task", "metadata": {"name": "j"}, "spec": {"type": "shell", "shell": "echo hi"}}`,
			want: `"apiVersion": "example.com/v1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := convertDocument([]byte(tc.doc), "v1")
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" && string(got) != tc.doc {
				t.Errorf("rewritten:\n%s", got)
			}
			if tc.want != "" && !strings.Contains(string(got), tc.want) {
				t.Errorf("got:\n%s\nwant it to hold %q", got, tc.want)
			}
		})
	}
}
