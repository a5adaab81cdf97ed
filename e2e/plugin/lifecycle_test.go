package plugin_test

import (
	"testing"
)

// TestVersionsStatusAndMigrateRunAsTyped: the version lifecycle commands of task-operator
// (packages versions and migrate) answer through the plugin, with kubectl's kubeconfig.
func TestVersionsStatusAndMigrateRunAsTyped(t *testing.T) {
	setUp(t)
	contains(t, "kubectl task versions status", ok(t, "task", "versions", "status"),
		"CRD tasks.example.com: storage version v1, storedVersions [v1]",
		"\nv1: served, storage, in storedVersions\n", "\nv1alpha1: served", "\nv1beta1: served")
	r := kubectl(t, "", "task", "migrate", "--dry-run")
	if r.code != 0 || r.stdout != "" {
		t.Fatalf("kubectl task migrate --dry-run: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	contains(t, "kubectl task migrate --dry-run", r.stderr,
		"storedVersions is already [v1]: every Task is stored at v1, nothing to do", "storedVersions: [v1] (would stay)")
}
