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

// TestConvertToAnOldVersionKeepsATaskWhoseOnlyLossIsADefault: a Task with only a cron schedule
// gets the history limits' defaults, which v1beta1 cannot say; the cluster serves it at v1beta1
// and gives them back when it is written there, so convert --to v1beta1 does not refuse them,
// and carries no preserved annotation (the webhook removes it from a client's write). A limit
// that is not the default is still refused, naming the field.
func TestConvertToAnOldVersionKeepsATaskWhoseOnlyLossIsADefault(t *testing.T) {
	for name, doc := range map[string]string{
		"v1beta1":                    "apiVersion: example.com/v1beta1\nkind: Task\nmetadata: {name: b}\nspec:\n  runner: {type: Shell, shell: {script: echo}}\n  schedule: \"0 1 * * *\"\n",
		"v1":                         "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: b}\nspec:\n  runner: {type: Shell, shell: {script: echo}}\n  schedule: {cron: \"0 1 * * *\"}\n",
		"v1 spelling the defaults":   "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: b}\nspec:\n  runner: {type: Shell, shell: {script: echo}}\n  schedule: {cron: \"0 1 * * *\", concurrencyPolicy: Allow}\n  successfulJobsHistoryLimit: 3\n  failedJobsHistoryLimit: 1\n",
		"v1 with a retry of its own": "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: b}\nspec:\n  runner: {type: Shell, shell: {script: echo}}\n  schedule: {cron: \"0 1 * * *\"}\n  retry: {maxRetries: 5}\n",
	} {
		t.Run(name, func(t *testing.T) {
			got, err := convertDocument([]byte(doc), "v1beta1")
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !strings.Contains(string(got), "apiVersion: example.com/v1beta1\n") || strings.Contains(string(got), "preserved") {
				t.Errorf("got:\n%s", got)
			}
		})
	}
	doc := "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: b}\nspec:\n  runner: {type: Shell, shell: {script: echo}}\n  schedule: {cron: \"0 1 * * *\"}\n  successfulJobsHistoryLimit: 7\n"
	if _, err := convertDocument([]byte(doc), "v1beta1"); err == nil || !strings.Contains(err.Error(), "v1beta1 cannot express spec.successfulJobsHistoryLimit:") {
		t.Errorf("a history limit that is not the default, to v1beta1: error %v, want one naming spec.successfulJobsHistoryLimit alone", err)
	}
}
