package plugin_test

import (
	"fmt"
	"testing"
)

// A Task stored with many quantities out of bounds (300 extended resources, each
// "1e3000000000", straight into etcd) still gets its Stalled condition naming them, as one with
// a single such quantity does: the operator's status write must not be refused.
func TestATaskStoredWithManyUnreadableQuantitiesStillSaysWhyItDoesNotRun(t *testing.T) {
	ns := setUp(t)
	apply(t, ns, task("spoiled-many", "", "  suspend: true\n  resources: {limits: {cpu: \"1\"}}\n"))
	limits := map[string]any{}
	for i := range 300 {
		limits[fmt.Sprintf("example.com/gpu-%03d", i)] = "1e3000000000"
	}
	spoil(t, ns, "spoiled-many", limits)
	defer removeSpoiled(t, ns, "spoiled-many")

	r := kubectl(t, "", "wait", "-n", ns, "--for=condition=Stalled", "task/spoiled-many", "--timeout=60s")
	if r.code != 0 {
		t.Errorf("no Stalled condition after 60s (the operator logs its status patch refused: conditions[].message Too long, over 32768 bytes): %s", r.stderr)
		conds := kubectl(t, "", "get", "-n", ns, "task/spoiled-many", "-o", "jsonpath={.status.conditions}")
		t.Logf("conditions: %s", conds.stdout)
	}
}
