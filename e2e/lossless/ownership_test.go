package lossless_test

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"example.com/task-operator/internal/testenv"
)

// What an apply's removal must never touch: fields it did not drop, and fields another manager
// still owns (README Lossless rule 6, "a field another manager still owns stays").

// specAt reads the stored spec from etcd, as JSON with sorted keys.
func specAt(t *testing.T, ns, name string) string {
	t.Helper()
	history := storedSince(t, ns, name, 0)
	return string(mustJSON(history[len(history)-1]["spec"]))
}

// TestClearingManagedFieldsKeepsSpec: clearing a Task's managedFields (the documented
// `managedFields: [{}]` patch), named with the field manager that applied the spec, at any
// version, is accepted and changes no field of the spec: the apply's entry going away is not the
// apply dropping its fields. Neither when that manager applied the whole spec, nor when it
// applied only optional fields beside another manager's runner (where a removal would pass
// validation and lose them silently).
func TestClearingManagedFieldsKeepsSpec(t *testing.T) {
	ns := setUp(t)
	const (
		runner   = `"runner":{"type":"Shell","shell":{"script":"echo"}}`
		optional = `"timeout":"9m","parallelism":4,"retry":{"maxRetries":7}`
	)
	apply := func(manager, name, spec string) {
		kubectl(t, fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":%q,"namespace":%q},"spec":{%s}}`, name, ns, spec),
			"apply", "--server-side", "--field-manager="+manager, "-f", "-")
	}
	for _, version := range []string{hubVersion, beta, alpha} {
		for _, c := range []struct {
			name string
			// applies are the (manager, spec) applies made first.
			applies [][2]string
		}{
			{"dan applied the whole spec", [][2]string{{"dan", runner + "," + optional}}},
			{"dan applied optional fields beside base's runner", [][2]string{{"base", runner}, {"dan", optional}}},
		} {
			name := fmt.Sprintf("cleared-%s-%d", version, len(c.applies))
			for _, a := range c.applies {
				apply(a[0], name, a[1])
			}
			before := specAt(t, ns, name)
			_, stderr, err := testenv.Kubectl(t.Context(), cluster.KubeconfigPath, nil, "patch", "-n", ns, "tasks."+version+".example.com/"+name,
				"--field-manager=dan", "--type=merge", "-p", `{"metadata":{"managedFields":[{}]}}`)
			if err != nil {
				t.Errorf("%s, managedFields cleared at %s by dan: %v: %s", c.name, version, err, stderr)
				continue
			}
			if after := specAt(t, ns, name); after != before {
				t.Errorf("%s, managedFields cleared at %s by dan: spec %s, want %s", c.name, version, after, before)
			}
		}
	}
}

// TestOldVersionApplyKeepsWhatAnotherManagerOwns: an apply that drops a field keeps, under it,
// what another manager still owns, at an old version as at v1: dan applies a schedule (at
// v1beta1, or at v1 for the twin), ops sets its time zone at v1 (apply or patch), dan applies
// again without the schedule. The time zone ops owns must not vanish: the apply is refused (a
// schedule needs a cron), or the time zone is kept.
func TestOldVersionApplyKeepsWhatAnotherManagerOwns(t *testing.T) {
	ns := setUp(t)
	for _, version := range []string{hubVersion, beta} {
		for _, c := range []struct {
			name string
			ops  []string
		}{
			{"time zone applied by ops", []string{"apply", "--server-side", "--field-manager=ops", "-f", "-"}},
			{"time zone patched by ops", nil},
		} {
			name := fmt.Sprintf("zone-%s-%d", version, len(c.ops))
			schedule := `,"schedule":"@daily"`
			if version == hubVersion {
				schedule = `,"schedule":{"cron":"@daily"}`
			}
			manifest := func(schedule string) string {
				return fmt.Sprintf(`{"apiVersion":"example.com/%s","kind":"Task","metadata":{"name":%q,"namespace":%q},"spec":{"runner":{"type":"Shell","shell":{"script":"echo"}}%s}}`, version, name, ns, schedule)
			}
			kubectl(t, manifest(schedule), "apply", "--server-side", "--field-manager=dan", "-f", "-")
			if c.ops != nil {
				kubectl(t, fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":%q,"namespace":%q},"spec":{"schedule":{"cron":"@daily","timeZone":"Europe/Paris"}}}`, name, ns), c.ops...)
			} else {
				kubectl(t, "", "patch", "-n", ns, "tasks.v1.example.com/"+name, "--field-manager=ops", "--type=merge", "-p", `{"spec":{"schedule":{"timeZone":"Europe/Paris"}}}`)
			}
			_, _, err := testenv.Kubectl(t.Context(), cluster.KubeconfigPath, []byte(manifest("")), "apply", "--server-side", "--field-manager=dan", "-f", "-")
			if err != nil {
				continue // refused
			}
			stored, err := tasks(hubVersion, ns).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := field(stored.Object, "spec.schedule.timeZone"); got != "Europe/Paris" {
				t.Errorf("%s: dan's %s apply without the schedule was accepted and left spec.schedule.timeZone %v, want Europe/Paris (ops owns it)", c.name, version, got)
			}
		}
	}
}
