package lossless_test

import (
	"strings"
	"testing"

	"example.com/task-operator/internal/testenv"
)

// TestOldVersionRefusalsNameTheFieldAsTheClientWroteIt: a write at v1beta1 that the admission
// webhook refuses names the field as v1beta1 spells it (spec.schedule, a cron string), not the
// v1 field it is checked as (spec.schedule.cron).
func TestOldVersionRefusalsNameTheFieldAsTheClientWroteIt(t *testing.T) {
	ns := setUp(t)
	for _, tc := range []struct{ name, schedule string }{
		{"bad-cron", "61 * * * *"},
		{"never-comes", "0 0 30 2 *"},
		{"tz-prefix", "TZ=Europe/Paris 0 2 * * *"},
	} {
		m := "apiVersion: example.com/v1beta1\nkind: Task\nmetadata: {name: " + tc.name + "}\nspec:\n  runner: {type: Shell, shell: {script: echo}}\n  schedule: \"" + tc.schedule + "\"\n"
		_, stderr, err := testenv.Kubectl(t.Context(), cluster.KubeconfigPath, []byte(m), "create", "-n", ns, "-f", "-")
		if err == nil {
			t.Errorf("%s: created", tc.name)
			continue
		}
		t.Logf("%s: %s", tc.name, strings.TrimSpace(stderr))
		if strings.Contains(stderr, "spec.schedule.cron") || !strings.Contains(stderr, "spec.schedule: Invalid value") {
			t.Errorf("%s: a v1beta1 write refused naming a v1 field v1beta1 does not have, not spec.schedule: %s", tc.name, strings.TrimSpace(stderr))
		}
	}
}
