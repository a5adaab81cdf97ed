package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"example.com/task-operator/internal/testenv"
)

// TestAFinishedTaskWhoseStatusIsClearedAtAnOldVersionDoesNotRunAgain: a user clears a finished
// one-shot Task's status through the v1alpha1 status subresource, its Job already gone (TTL 0)
// and its transition time written at v1 with a fraction of a second, which v1alpha1 respells.
// The old version shows no current run, so clearing its status must keep v1's: the record of
// the run is what stops it from running again.
func TestAFinishedTaskWhoseStatusIsClearedAtAnOldVersionDoesNotRunAgain(t *testing.T) {
	ns := setUp(t)
	mustKubectl(t, "apiVersion: example.com/v1\nkind: Task\nmetadata: {name: once}\nspec: {runner: {type: Shell, shell: {script: x}}, ttlSecondsAfterFinished: 0}\n", "apply", "-n", ns, "-f", "-")
	mustKubectl(t, "", "wait", "-n", ns, "--for=condition=Succeeded", "--timeout=90s", "task/once")
	testenv.Eventually(t, 60*time.Second, "the Job is gone (TTL 0)", func(context.Context) (bool, error) {
		out, err := kubectl("", "get", "jobs", "-n", ns, "-o", "name")
		return err == nil && strings.TrimSpace(out) == "", nil
	})
	mustKubectl(t, "", "patch", "-n", ns, "tasks.v1.example.com/once", "--subresource=status", "--type=merge", "-p", `{"status":{"lastPhaseTransitionTime":"2026-12-07T10:00:00.5Z"}}`)
	mustKubectl(t, "", "patch", "-n", ns, "tasks.v1alpha1.example.com/once", "--subresource=status", "--type=merge", "-p", `{"status":null}`)

	// The operator sees the write at once; a new Job would be created within a reconcile.
	time.Sleep(10 * time.Second)
	if after := mustKubectl(t, "", "get", "-n", ns, "tasks.v1.example.com/once", "-o", "jsonpath={.status.currentRun}"); !strings.Contains(after, `"outcome":"Succeeded"`) {
		t.Errorf("status.currentRun after the v1alpha1 status write: %q, want the succeeded run kept", after)
	}
	reasons := mustKubectl(t, "", "get", "events", "-n", ns, "--field-selector", "involvedObject.name=once", "-o", "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}")
	if n := strings.Count(reasons, "JobCreated"); n != 1 {
		t.Errorf("%d JobCreated events, want 1: the finished Task ran again\n%s", n, reasons)
	}
}
