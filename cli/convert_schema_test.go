package cli

import (
	"strings"
	"testing"
)

// TestConvertRefusesWhatTheClustersSchemaRefusesNamingTheField: a manifest the cluster would
// refuse on apply, by its OpenAPI schema or one of its rules, is refused by convert as well,
// naming the field as the manifest spells it, rather than converted into one that fails later.
func TestConvertRefusesWhatTheClustersSchemaRefusesNamingTheField(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string // each in the error; none means converted
	}{
		{"v1alpha1 valid", "apiVersion: example.com/v1alpha1\nkind: Task\nmetadata: {name: a}\nspec: {type: shell, shell: echo, replicas: 2}\n", nil},
		{"v1alpha1 type not in the enum", "apiVersion: example.com/v1alpha1\nkind: Task\nmetadata: {name: a}\nspec: {type: ftp, shell: echo}\n",
			[]string{`task "a"`, "spec.type", `"ftp"`}},
		{"v1alpha1 replicas below its minimum", "apiVersion: example.com/v1alpha1\nkind: Task\nmetadata: {name: a}\nspec: {type: shell, shell: echo, replicas: -3}\n",
			[]string{"spec.replicas", "-3"}},
		{"v1alpha1 replicas of the wrong type", "apiVersion: example.com/v1alpha1\nkind: Task\nmetadata: {name: a}\nspec: {type: shell, shell: echo, replicas: two}\n",
			[]string{"spec.replicas", "integer"}},
		{"v1beta1 runner type spelled as v1alpha1 spells it", "apiVersion: example.com/v1beta1\nkind: Task\nmetadata: {name: b}\nspec:\n  runner: {type: shell, shell: {script: echo}}\n",
			[]string{`task "b"`, "spec.runner.type", `"shell"`}},
		{"v1 valid", "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: c}\nspec:\n  runner: {type: Shell, shell: {script: echo}}\n  retry: {backoff: {initial: 5s, max: 1m}}\n", nil},
		{"v1 a rule: initial after max", "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: c}\nspec:\n  runner: {type: Shell, shell: {script: echo}}\n  retry: {backoff: {initial: 2m, max: 1m}}\n",
			[]string{`task "c"`, "spec.retry.backoff.initial", "must not exceed backoff.max"}},
		{"v1 a rule: an URL that is not http", "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: c}\nspec:\n  runner: {type: HTTP, http: {url: ftp://example.com/x}}\n",
			[]string{"spec.runner.http.url", "absolute http or https URL"}},
		{"v1 a required field left out", "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: c}\nspec:\n  parallelism: 1\n",
			[]string{"spec.runner", "Required"}},
		{"v1 a value of the wrong type", "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: c}\nspec:\n  runner: {type: Shell, shell: {script: echo}}\n  timeout: 5\n",
			[]string{`task "c"`, "spec.timeout", "string"}},
		{"v1 nulls the cluster drops", "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: c}\nspec:\n  runner: {type: Shell, shell: {script: echo, env: null}}\n  timeout: null\n  retry: null\n  queueName: null\n", nil},
		{"v1beta1 a null schedule the cluster drops", "apiVersion: example.com/v1beta1\nkind: Task\nmetadata: {name: b}\nspec:\n  runner: {type: Shell, shell: {script: echo}}\n  schedule: null\n", nil},
		{"v1 status is not checked, as a create does not keep it", "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: c}\nspec:\n  runner: {type: Shell, shell: {script: echo}}\nstatus: {phase: NotAPhase}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runConvertCommand(t, "-f", writeManifest(t, "task.yaml", tt.doc))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !strings.Contains(out, "apiVersion: example.com/v1\n") {
					t.Errorf("not converted to v1:\n%s", out)
				}
				return
			}
			if err == nil {
				t.Fatalf("converted, want an error naming %v:\n%s", tt.want, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error lacks %q: %v", w, err)
				}
			}
		})
	}
}
