package cli

import (
	"strings"
	"testing"
)

// TestConvertRefusalNamesOnlyWhatTheManifestLoses: a Task refused for --to v1alpha1 because of
// its schedule is refused naming the schedule, not defaults the cluster would give it (history
// limits, concurrencyPolicy) that the manifest never wrote and the user cannot "remove".
func TestConvertRefusalNamesOnlyWhatTheManifestLoses(t *testing.T) {
	for name, doc := range map[string]string{
		"v1beta1": "apiVersion: example.com/v1beta1\nkind: Task\nmetadata: {name: b}\nspec:\n  runner: {type: Shell, shell: {script: echo}}\n  schedule: \"0 1 * * *\"\n",
		"v1":      "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: b}\nspec:\n  runner: {type: Shell, shell: {script: echo}}\n  schedule: {cron: \"0 1 * * *\"}\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := convertDocument([]byte(doc), "v1alpha1")
			if err == nil {
				t.Fatal("converted a scheduled Task to v1alpha1")
			}
			for _, unwritten := range []string{"successfulJobsHistoryLimit", "failedJobsHistoryLimit", "concurrencyPolicy"} {
				if strings.Contains(err.Error(), unwritten) {
					t.Errorf("the refusal names %s, which the manifest does not set: %v", unwritten, err)
				}
			}
		})
	}
}
