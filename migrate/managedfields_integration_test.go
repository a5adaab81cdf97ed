package migrate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/migrate"
)

// The Tasks of TestRunMovesManagedFieldsAndKeepsOwnership, beside the fixture's.
const (
	mfNamespace      = "migrate-a"
	owned            = "owned"          // applied by three managers at v1alpha1, updated at v1beta1
	mixed            = "mixed"          // one manager: Apply at v1alpha1, Update at v1beta1 and at v1
	untranslatable   = "untranslatable" // an entry at v1alpha1 with a field v1alpha1 does not have
	bare             = "bare"           // no managedFields at all
	fresh            = "fresh"          // created at v1 after the upgrade: the control
	forgedManager    = "forger"
	v1alpha1Version  = "example.com/v1alpha1"
	v1Version        = "example.com/v1"
	conversionMetric = "apiserver_crd_conversion_webhook_duration_seconds_count"
)

// TestRunMovesManagedFieldsAndKeepsOwnership (#13, goal 2): managers apply at v1alpha1 and
// update at v1beta1; migrate.Run moves every managedFields entry to v1 with its fields
// translated; server-side apply then answers exactly as before (the same conflicts, naming the
// same managers; re-applies without a field remove it; shared ownership holds), and a status
// patch at v1 no longer makes the apiserver call the conversion webhook.
func TestRunMovesManagedFieldsAndKeepsOwnership(t *testing.T) {
	env := cluster(t)
	ctx := t.Context()
	began := time.Now()
	// Fixture Tasks: created (Update entries at v1alpha1), a third with a status written
	// through /status (Update entries of the status subresource at v1alpha1).
	fixtureKeys := env.installPreviousRelease(ctx, t, 12)
	alphaTasks := env.upgrade.Tasks("v1alpha1", mfNamespace)

	// At v1alpha1, before the upgrade: three appliers on "owned", sharing replicas.
	mustApply(ctx, t, alphaTasks, "alpha-applier", v1alpha1Object(owned, map[string]any{"team": "a", "tier": "b"},
		map[string]any{"type": "shell", "shell": "echo a", "replicas": int64(2), "maxRetry": int64(1)}))
	mustApply(ctx, t, alphaTasks, "shared-applier", v1alpha1Object(owned, nil, map[string]any{"type": "shell", "replicas": int64(2)}))
	status := v1alpha1Object(owned, nil, nil)
	status.Object["status"] = map[string]any{"state": "Running", "lastJobName": "owned-run-1", "retryCount": int64(1)}
	if _, err := alphaTasks.ApplyStatus(ctx, owned, status, metav1.ApplyOptions{FieldManager: "alpha-status"}); err != nil {
		t.Fatalf("apply the status of %s at v1alpha1: %v", owned, err)
	}
	mustApply(ctx, t, alphaTasks, "mixed-manager", v1alpha1Object(mixed, nil, map[string]any{"type": "shell", "shell": "echo m", "replicas": int64(1)}))
	mustApply(ctx, t, alphaTasks, "kubectl", v1alpha1Object(untranslatable, nil, map[string]any{"type": "http", "url": "https://example.com/u"}))
	mustApply(ctx, t, alphaTasks, "kubectl", v1alpha1Object(bare, nil, map[string]any{"type": "shell", "shell": "true"}))
	resetManagedFields(ctx, t, alphaTasks, bare)

	env.upgradeToCurrentRelease(ctx, t)

	// At v1beta1 and v1: plain updates.
	betaTasks := env.upgrade.Tasks("v1beta1", mfNamespace)
	v1Tasks := env.upgrade.Tasks("v1", mfNamespace)
	mustApply(ctx, t, v1Tasks, "fresh-applier", &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1Version, "kind": taskv1.Kind,
		"metadata": map[string]any{"name": fresh, "namespace": mfNamespace},
		"spec":     map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}}},
	}})
	mustUpdate(ctx, t, betaTasks, owned, "beta-updater", func(o *unstructured.Unstructured) {
		must(t, unstructured.SetNestedField(o.Object, true, "spec", "suspend"))
		must(t, unstructured.SetNestedField(o.Object, "*/5 * * * *", "spec", "schedule"))
	})
	mustUpdate(ctx, t, betaTasks, mixed, "mixed-manager", func(o *unstructured.Unstructured) {
		must(t, unstructured.SetNestedField(o.Object, true, "spec", "suspend"))
	})
	mustUpdate(ctx, t, v1Tasks, mixed, "mixed-manager", func(o *unstructured.Unstructured) {
		must(t, unstructured.SetNestedField(o.Object, "5m", "spec", "timeout"))
	})
	// A client may send any managedFields on an update: one names a field v1alpha1 lacks.
	mustUpdate(ctx, t, v1Tasks, untranslatable, "forge-writer", func(o *unstructured.Unstructured) {
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		o.SetManagedFields(append(o.GetManagedFields(), metav1.ManagedFieldsEntry{
			Manager: forgedManager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: v1alpha1Version, Time: &now,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:bogus":{}}}`)},
		}))
	})

	// The starting point the rest is judged against.
	ownedBefore := managedFieldsOf(ctx, t, v1Tasks, owned)
	requireVersions(t, owned, ownedBefore, map[string]string{
		"alpha-applier": v1alpha1Version, "shared-applier": v1alpha1Version, "alpha-status": v1alpha1Version, "beta-updater": "example.com/v1beta1",
	})
	if !slices.ContainsFunc(managedFieldsOf(ctx, t, v1Tasks, untranslatable), func(e metav1.ManagedFieldsEntry) bool { return e.Manager == forgedManager }) {
		t.Fatalf("the apiserver did not keep the forged entry of %s", untranslatable)
	}
	if mf := managedFieldsOf(ctx, t, v1Tasks, bare); len(mf) != 0 {
		t.Fatalf("%s has managedFields: %v", bare, mf)
	}

	callsBefore := statusPatchCalls(ctx, t, env, v1Tasks, owned, "before")
	controlBefore := statusPatchCalls(ctx, t, env, v1Tasks, fresh, "before")

	// Who conflicts with whom, before: the paths at the owner's version.
	probes := ownershipProbes()
	for _, p := range probes {
		got := p.run(ctx, t, v1Tasks)
		if d := cmp.Diff(p.before, got); d != "" {
			t.Errorf("before the migration, %s: conflicts (-want +got):\n%s", p.name, d)
		}
	}
	// What re-applies without a field would do (dry runs), before.
	removals := removalProbes()
	removedBefore := map[string]string{}
	for _, r := range removals {
		removedBefore[r.name] = r.run(ctx, t, alphaTasks)
	}

	before := env.allManagedFields(ctx, t)
	var out bytes.Buffer
	sum, err := migrate.Run(ctx, env.cfg, migrate.Options{PageSize: 5, Progress: &out})
	t.Logf("summary:\n%s", sum)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	n := len(fixtureKeys) + 5
	// Every Task had entries at old versions but bare and fresh; untranslatable is the one kept.
	if sum.Total != n || sum.Rewritten != n || sum.Failed != 0 || !sum.Trimmed || sum.ManagedFieldsMoved != n-3 || sum.ManagedFieldsKept != 1 {
		t.Errorf("summary = %+v", sum)
	}
	if len(sum.ManagedFieldsKeptSamples) != 1 || !strings.Contains(sum.ManagedFieldsKeptSamples[0], mfNamespace+"/"+untranslatable+`: the entry of manager "forger"`) ||
		!strings.Contains(sum.ManagedFieldsKeptSamples[0], ".spec.bogus") {
		t.Errorf("kept samples = %q", sum.ManagedFieldsKeptSamples)
	}
	if !strings.Contains(out.String(), "the managedFields of "+mfNamespace+"/"+untranslatable+" stay as they were") {
		t.Errorf("the progress output does not name %s:\n%s", untranslatable, out.String())
	}

	after := env.allManagedFields(ctx, t)
	for key, entries := range after {
		if key == mfNamespace+"/"+untranslatable {
			if d := cmp.Diff(before[key], entries); d != "" {
				t.Errorf("%s: managedFields changed although they could not be moved (-before +after):\n%s", key, d)
			}
			continue
		}
		for _, e := range entries {
			if e.APIVersion != v1Version {
				t.Errorf("%s: the entry of %s (%s) is at %s", key, e.Manager, e.Operation, e.APIVersion)
			}
		}
		// The translation is the one the apiserver keeps: times included.
		requireSameEntries(t, key, expectedMove(t, before[key]), entries)
	}
	if len(after[mfNamespace+"/"+bare]) != 0 {
		t.Errorf("%s gained managedFields: %v", bare, after[mfNamespace+"/"+bare])
	}
	// Written out by hand for the Tasks built above, rather than by the code under test.
	requireSets(t, owned, after[mfNamespace+"/"+owned], map[string]string{
		"alpha-applier/Apply/":           `{"f:metadata":{"f:labels":{"f:team":{},"f:tier":{}}},"f:spec":{"f:runner":{"f:type":{},"f:shell":{"f:script":{}}},"f:parallelism":{},"f:retry":{"f:maxRetries":{}}}}`,
		"shared-applier/Apply/":          `{"f:spec":{"f:runner":{"f:type":{}},"f:parallelism":{}}}`,
		"alpha-status/Apply/status":      `{"f:status":{"f:phase":{},"f:lastJob":{"f:name":{}},"f:attempts":{}}}`,
		"beta-updater/Update/":           `{"f:spec":{"f:suspend":{},"f:schedule":{"f:cron":{}}}}`,
		"conversion-probe/Update/status": `{"f:status":{"f:lastError":{}}}`,
	})
	requireSets(t, mixed, after[mfNamespace+"/"+mixed], map[string]string{
		"mixed-manager/Apply/": `{"f:spec":{"f:runner":{"f:type":{},"f:shell":{"f:script":{}}},"f:parallelism":{}}}`,
		// The Update entries at v1beta1 and at v1 are one manager for the apiserver once both
		// are at v1: merged.
		"mixed-manager/Update/": `{"f:spec":{"f:suspend":{},"f:timeout":{}}}`,
	})
	env.requireEncodings(ctx, t, append(slices.Clone(fixtureKeys), keysOf(owned, mixed, untranslatable, bare, fresh)...), atV1)

	// A rerun moves nothing and changes no managedFields; the untranslatable Task is reported again.
	sum, err = migrate.Run(ctx, env.cfg, migrate.Options{Force: true})
	if err != nil || sum.ManagedFieldsMoved != 0 || sum.ManagedFieldsKept != 1 || sum.Failed != 0 {
		t.Errorf("rerun: %v\n%s", err, sum)
	}
	if d := cmp.Diff(after, env.allManagedFields(ctx, t)); d != "" {
		t.Errorf("the rerun changed managedFields (-before +after):\n%s", d)
	}

	callsAfter := statusPatchCalls(ctx, t, env, v1Tasks, owned, "after")
	controlAfter := statusPatchCalls(ctx, t, env, v1Tasks, fresh, "after")
	t.Logf("conversion webhook calls for one status patch at v1 (apiserver metric / ConversionReviews served):\n"+
		"  %s (entries at v1alpha1 and v1beta1): %d / %d before the migration, %d / %d after; by label before %v, after %v\n"+
		"  %s (created at v1, the control):      %d / %d before the migration, %d / %d after; by label before %v, after %v",
		owned, callsBefore.apiserver, callsBefore.served, callsAfter.apiserver, callsAfter.served, callsBefore.byLabel, callsAfter.byLabel,
		fresh, controlBefore.apiserver, controlBefore.served, controlAfter.apiserver, controlAfter.served, controlBefore.byLabel, controlAfter.byLabel)
	if callsAfter.apiserver >= callsBefore.apiserver || callsAfter.served >= callsBefore.served {
		t.Errorf("conversion calls for a status patch at v1 did not drop: %+v before, %+v after", callsBefore, callsAfter)
	}
	// What is left is what any Task costs, one that never had an entry at an old version:
	// the watch caches of the old versions.
	if callsAfter.apiserver > controlAfter.apiserver {
		t.Errorf("after the migration a status patch of %s costs %d conversion calls, one of %s %d", owned, callsAfter.apiserver, fresh, controlAfter.apiserver)
	}

	// Re-applies without a field (dry runs) do what they did before.
	for _, r := range removals {
		if got := r.run(ctx, t, alphaTasks); got != removedBefore[r.name] {
			t.Errorf("%s: after the migration the re-apply leaves\n %s\nbefore it left\n %s", r.name, got, removedBefore[r.name])
		} else {
			t.Logf("%s: %s (before and after)", r.name, got)
		}
	}

	// Who conflicts with whom, after: the same managers, the paths now at v1.
	for _, p := range probes {
		got := p.run(ctx, t, v1Tasks)
		if d := cmp.Diff(p.after, got); d != "" {
			t.Errorf("after the migration, %s: conflicts (-want +got):\n%s", p.name, d)
		}
	}

	// Ownership kept: alpha-applier re-applies at v1alpha1 without the tier label, and
	// alpha-status without lastJobName; both go, because their managers still own them.
	mustApply(ctx, t, alphaTasks, "alpha-applier", v1alpha1Object(owned, map[string]any{"team": "a"},
		map[string]any{"type": "shell", "shell": "echo a", "replicas": int64(2), "maxRetry": int64(1)}))
	status = v1alpha1Object(owned, nil, nil)
	status.Object["status"] = map[string]any{"state": "Running", "retryCount": int64(1)}
	if _, err := alphaTasks.ApplyStatus(ctx, owned, status, metav1.ApplyOptions{FieldManager: "alpha-status"}); err != nil {
		t.Fatalf("re-apply the status of %s at v1alpha1: %v", owned, err)
	}
	task := getV1(ctx, t, v1Tasks, owned)
	if _, has := task.Labels["tier"]; has || task.Labels["team"] != "a" {
		t.Errorf("after alpha-applier re-applied without it, labels = %v; want tier removed", task.Labels)
	}
	if task.Status.LastJob != nil || task.Status.Attempts != 2 || task.Status.Phase != "Running" {
		t.Errorf("after alpha-status re-applied without lastJobName: lastJob %+v, attempts %d, phase %q; want no lastJob, 2, Running",
			task.Status.LastJob, task.Status.Attempts, task.Status.Phase)
	}
	// ... and at v1 (the same Apply manager for the apiserver), without parallelism: it stays,
	// because shared-applier owns it too; alpha-applier owns it no more.
	v1Apply := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1Version, "kind": taskv1.Kind,
		"metadata": map[string]any{"name": owned, "namespace": mfNamespace, "labels": map[string]any{"team": "a"}},
		"spec":     map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "echo a"}}},
	}}
	mustApply(ctx, t, v1Tasks, "alpha-applier", v1Apply)
	task = getV1(ctx, t, v1Tasks, owned)
	if task.Spec.Parallelism != 2 {
		t.Errorf("after alpha-applier re-applied at v1 without it, parallelism = %d; want 2 (shared-applier owns it)", task.Spec.Parallelism)
	}
	final := managedFieldsOf(ctx, t, v1Tasks, owned)
	if !setHas(t, final, "alpha-applier", metav1.ManagedFieldsOperationApply, "", ".spec.runner.shell.script") ||
		setHas(t, final, "alpha-applier", metav1.ManagedFieldsOperationApply, "", ".spec.parallelism") ||
		!setHas(t, final, "shared-applier", metav1.ManagedFieldsOperationApply, "", ".spec.parallelism") {
		t.Errorf("ownership after the re-applies:\n%s", entriesDump(final))
	}
	// The shared field still conflicts with the remaining owner.
	got := (&ownershipProbe{name: "parallelism", obj: v1Object(map[string]any{"parallelism": int64(5)})}).run(ctx, t, v1Tasks)
	if d := cmp.Diff([]string{`"shared-applier" .spec.parallelism`}, got); d != "" {
		t.Errorf("parallelism after the re-applies: conflicts (-want +got):\n%s", d)
	}

	// alpha-status's re-apply at v1alpha1 recorded its entry at v1alpha1 again: a forced rerun
	// moves that one (storedVersions is [v1] already, so only --force rewrites).
	sum, err = migrate.Run(ctx, env.cfg, migrate.Options{Force: true})
	if err != nil || sum.ManagedFieldsMoved != 1 || sum.ManagedFieldsKept != 1 || sum.Failed != 0 {
		t.Errorf("rerun after the re-applies: %v\n%s", err, sum)
	}
	requireSets(t, owned, managedFieldsOf(ctx, t, v1Tasks, owned), map[string]string{
		"alpha-applier/Apply/":           `{"f:metadata":{"f:labels":{"f:team":{}}},"f:spec":{"f:runner":{"f:type":{},"f:shell":{"f:script":{}}}}}`,
		"shared-applier/Apply/":          `{"f:spec":{"f:runner":{"f:type":{}},"f:parallelism":{}}}`,
		"alpha-status/Apply/status":      `{"f:status":{"f:phase":{},"f:attempts":{}}}`,
		"beta-updater/Update/":           `{"f:spec":{"f:suspend":{},"f:schedule":{"f:cron":{}}}}`,
		"conversion-probe/Update/status": `{"f:status":{"f:lastError":{}}}`,
	})
	t.Logf("test body took %s", time.Since(began).Round(time.Millisecond))
}

// removalProbe is a dry-run re-apply at v1alpha1 by an owner, without one of its fields: what it
// would leave of the Task, as text.
type removalProbe struct {
	name    string
	manager string
	obj     *unstructured.Unstructured
	status  bool
}

func removalProbes() []*removalProbe {
	statusWithout := v1alpha1Object(owned, nil, nil)
	statusWithout.Object["status"] = map[string]any{"state": "Running", "retryCount": int64(1)}
	return []*removalProbe{{
		name: "alpha-applier without the tier label", manager: "alpha-applier",
		obj: v1alpha1Object(owned, map[string]any{"team": "a"}, map[string]any{"type": "shell", "shell": "echo a", "replicas": int64(2), "maxRetry": int64(1)}),
	}, {
		// maxRetry is always written at v1alpha1 (and maxRetries at v1), 0 included: the
		// converter gives the pruned field back, whoever owns it.
		name: "alpha-applier without maxRetry", manager: "alpha-applier",
		obj: v1alpha1Object(owned, map[string]any{"team": "a", "tier": "b"}, map[string]any{"type": "shell", "shell": "echo a", "replicas": int64(2)}),
	}, {
		name: "alpha-status without lastJobName", manager: "alpha-status", status: true, obj: statusWithout,
	}}
}

func (r *removalProbe) run(ctx context.Context, t *testing.T, tasks dynamicTasks) string {
	t.Helper()
	opts := metav1.ApplyOptions{FieldManager: r.manager, DryRun: []string{metav1.DryRunAll}}
	var got *unstructured.Unstructured
	var err error
	if r.status {
		got, err = tasks.ApplyStatus(ctx, owned, r.obj.DeepCopy(), opts)
	} else {
		got, err = tasks.Apply(ctx, owned, r.obj.DeepCopy(), opts)
	}
	if err != nil {
		t.Errorf("%s: %v", r.name, err)
		return ""
	}
	status, _, _ := unstructured.NestedMap(got.Object, "status")
	delete(status, "lastError") // the conversion probe's
	return fmt.Sprintf("labels %v, spec %v, status %v", got.GetLabels(), got.Object["spec"], status)
}

// ownershipProbe is a dry-run apply at v1 by a manager that owns nothing, of values that differ
// from the Task's: the conflicts it meets say who owns what.
type ownershipProbe struct {
	name          string
	obj           *unstructured.Unstructured
	status        bool
	before, after []string // `"manager" field`, sorted
}

func ownershipProbes() []*ownershipProbe {
	return []*ownershipProbe{{
		name: "script", obj: v1Object(map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "echo intruder"}}}),
		before: []string{`"alpha-applier" .spec.shell`},
		after:  []string{`"alpha-applier" .spec.runner.shell.script`},
	}, {
		name: "parallelism", obj: v1Object(map[string]any{"parallelism": int64(5)}),
		before: []string{`"alpha-applier" .spec.replicas`, `"shared-applier" .spec.replicas`},
		after:  []string{`"alpha-applier" .spec.parallelism`, `"shared-applier" .spec.parallelism`},
	}, {
		name: "maxRetries", obj: v1Object(map[string]any{"retry": map[string]any{"maxRetries": int64(7)}}),
		before: []string{`"alpha-applier" .spec.maxRetry`},
		after:  []string{`"alpha-applier" .spec.retry.maxRetries`},
	}, {
		name: "schedule", obj: v1Object(map[string]any{"schedule": map[string]any{"cron": "@hourly"}}),
		before: []string{`"beta-updater" .spec.schedule`},
		after:  []string{`"beta-updater" .spec.schedule.cron`},
	}, {
		name: "suspend", obj: v1Object(map[string]any{"suspend": false}),
		// v1beta1 omits suspend: false, so at v1beta1 this apply removes the field, and a
		// removal is no conflict: before the migration the owner silently loses it. At v1 it
		// is a change of value, and conflicts: the recorded ownership is the same, v1 is the
		// representation that tells false from unset.
		before: nil,
		after:  []string{`"beta-updater" .spec.suspend`},
	}, {
		name: "status", status: true, obj: v1StatusObject(map[string]any{"phase": "Failed", "lastJob": map[string]any{"name": "other"}}),
		before: []string{`"alpha-status" .status.lastJobName`, `"alpha-status" .status.state`},
		after:  []string{`"alpha-status" .status.lastJob.name`, `"alpha-status" .status.phase`},
	}}
}

var conflictManager = regexp.MustCompile(`^conflict with ("[^"]*")`)

func (p *ownershipProbe) run(ctx context.Context, t *testing.T, tasks dynamicTasks) []string {
	t.Helper()
	opts := metav1.ApplyOptions{FieldManager: "intruder", DryRun: []string{metav1.DryRunAll}}
	var err error
	if p.status {
		_, err = tasks.ApplyStatus(ctx, owned, p.obj.DeepCopy(), opts)
	} else {
		_, err = tasks.Apply(ctx, owned, p.obj.DeepCopy(), opts)
	}
	if err == nil {
		return nil
	}
	var status apierrors.APIStatus
	if !apierrors.IsConflict(err) || !errors.As(err, &status) || status.Status().Details == nil {
		t.Errorf("probe %s: err = %v, want a conflict or none", p.name, err)
		return nil
	}
	var out []string
	for _, c := range status.Status().Details.Causes {
		m := conflictManager.FindStringSubmatch(c.Message)
		if c.Type != metav1.CauseTypeFieldManagerConflict || m == nil {
			t.Errorf("probe %s: unexpected cause %+v", p.name, c)
			continue
		}
		out = append(out, m[1]+" "+c.Field)
	}
	slices.Sort(out)
	return out
}

// webhookCalls are conversion calls for one write, synchronous and not, counted on both sides: the apiserver's
// apiserver_crd_conversion_webhook_duration_seconds_count for the Task CRD, summed over its
// labels (byLabel: "from->to"), and the ConversionReviews the webhook (in this process) served.
type webhookCalls struct {
	apiserver, served int
	byLabel           map[string]int
}

// statusPatchCalls patches the status of the Task name at v1, as the operator does, and returns
// the conversion calls it cost.
func statusPatchCalls(ctx context.Context, t *testing.T, env *testEnv, tasks dynamicTasks, name, value string) webhookCalls {
	t.Helper()
	count := func() webhookCalls {
		raw, err := env.kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			t.Fatalf("scrape the apiserver: %v", err)
		}
		samples, err := testenv.ParseMetrics(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		c := webhookCalls{byLabel: map[string]int{}}
		for _, s := range samples {
			if s.Name == conversionMetric && s.Labels["crd_name"] == taskv1.CRDName {
				c.apiserver += int(s.Value)
				c.byLabel[s.Labels["from_version"]+"->"+s.Labels["to_version"]] += int(s.Value)
			}
		}
		families, err := crmetrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "taskoperator_conversion_requests_total" {
				for _, m := range f.GetMetric() {
					c.served += int(m.GetCounter().GetValue())
				}
			}
		}
		return c
	}
	start := count()
	patch := fmt.Appendf(nil, `{"status":{"lastError":%q}}`, "status patch "+value)
	if _, err := tasks.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "conversion-probe"}, "status"); err != nil {
		t.Fatalf("patch the status of %s at v1: %v", name, err)
	}
	// Each served version's watch cache decodes every event into its version, through the
	// webhook, after the write has returned: wait until the counts settle.
	end := count()
	for range 20 {
		time.Sleep(250 * time.Millisecond)
		next := count()
		if next.apiserver == end.apiserver && next.served == end.served {
			break
		}
		end = next
	}
	delta := webhookCalls{apiserver: end.apiserver - start.apiserver, served: end.served - start.served, byLabel: map[string]int{}}
	for k, v := range end.byLabel {
		if d := v - start.byLabel[k]; d != 0 {
			delta.byLabel[k] = d
		}
	}
	return delta
}

type dynamicTasks interface {
	Apply(ctx context.Context, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions, subresources ...string) (*unstructured.Unstructured, error)
	ApplyStatus(ctx context.Context, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions) (*unstructured.Unstructured, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions, subresources ...string) (*unstructured.Unstructured, error)
	Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions, subresources ...string) (*unstructured.Unstructured, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*unstructured.Unstructured, error)
}

func v1alpha1Object(name string, labels, spec map[string]any) *unstructured.Unstructured {
	meta := map[string]any{"name": name, "namespace": mfNamespace}
	if labels != nil {
		meta["labels"] = labels
	}
	obj := map[string]any{"apiVersion": v1alpha1Version, "kind": taskv1.Kind, "metadata": meta}
	if spec != nil {
		obj["spec"] = spec
	}
	return &unstructured.Unstructured{Object: obj}
}

func v1Object(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1Version, "kind": taskv1.Kind,
		"metadata": map[string]any{"name": owned, "namespace": mfNamespace},
		"spec":     spec,
	}}
}

func v1StatusObject(status map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1Version, "kind": taskv1.Kind,
		"metadata": map[string]any{"name": owned, "namespace": mfNamespace},
		"status":   status,
	}}
}

func mustApply(ctx context.Context, t *testing.T, tasks dynamicTasks, manager string, obj *unstructured.Unstructured) {
	t.Helper()
	if _, err := tasks.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: manager}); err != nil {
		t.Fatalf("%s applies %s at %s: %v", manager, obj.GetName(), obj.GetAPIVersion(), err)
	}
}

func mustUpdate(ctx context.Context, t *testing.T, tasks dynamicTasks, name, manager string, change func(*unstructured.Unstructured)) {
	t.Helper()
	obj, err := tasks.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change(obj)
	if _, err := tasks.Update(ctx, obj, metav1.UpdateOptions{FieldManager: manager}); err != nil {
		t.Fatalf("%s updates %s at %s: %v", manager, name, obj.GetAPIVersion(), err)
	}
}

// resetManagedFields clears a Task's managedFields: an update with a single empty entry.
func resetManagedFields(ctx context.Context, t *testing.T, tasks dynamicTasks, name string) {
	t.Helper()
	mustUpdate(ctx, t, tasks, name, "reset", func(o *unstructured.Unstructured) {
		o.SetManagedFields([]metav1.ManagedFieldsEntry{{}})
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func managedFieldsOf(ctx context.Context, t *testing.T, tasks dynamicTasks, name string) []metav1.ManagedFieldsEntry {
	t.Helper()
	obj, err := tasks.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj.GetManagedFields()
}

func getV1(ctx context.Context, t *testing.T, tasks dynamicTasks, name string) *taskv1.Task {
	t.Helper()
	obj, err := tasks.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	task := &taskv1.Task{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, task); err != nil {
		t.Fatal(err)
	}
	return task
}

// allManagedFields reads every Task's managedFields at v1, by "namespace/name".
func (env *testEnv) allManagedFields(ctx context.Context, t *testing.T) map[string][]metav1.ManagedFieldsEntry {
	t.Helper()
	list, err := env.upgrade.Tasks("v1", metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]metav1.ManagedFieldsEntry{}
	for _, item := range list.Items {
		out[item.GetNamespace()+"/"+item.GetName()] = item.GetManagedFields()
	}
	return out
}

func keysOf(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, mfNamespace+"/"+n)
	}
	return out
}

func entryKey(e metav1.ManagedFieldsEntry) string {
	return e.Manager + "/" + string(e.Operation) + "/" + e.Subresource
}

func fieldSet(t *testing.T, raw []byte) *fieldpath.Set {
	t.Helper()
	s := &fieldpath.Set{}
	if err := s.FromJSON(bytes.NewReader(raw)); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return s
}

// requireVersions checks the apiVersion of each manager's entries.
func requireVersions(t *testing.T, name string, entries []metav1.ManagedFieldsEntry, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, e := range entries {
		got[e.Manager] = e.APIVersion
	}
	for m, v := range want {
		if got[m] != v {
			t.Fatalf("%s: the entry of %s is at %q, want %s:\n%s", name, m, got[m], v, entriesDump(entries))
		}
	}
}

// requireSets checks that entries are exactly want: sets by "manager/operation/subresource".
func requireSets(t *testing.T, name string, entries []metav1.ManagedFieldsEntry, want map[string]string) {
	t.Helper()
	got := map[string]metav1.ManagedFieldsEntry{}
	for _, e := range entries {
		got[entryKey(e)] = e
	}
	if d := cmp.Diff(slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got))); d != "" {
		t.Errorf("%s: managers (-want +got):\n%s\n%s", name, d, entriesDump(entries))
		return
	}
	for k, w := range want {
		if !fieldSet(t, got[k].FieldsV1.Raw).Equals(fieldSet(t, []byte(w))) {
			t.Errorf("%s: %s owns\n %s\nwant\n %s", name, k, got[k].FieldsV1.Raw, w)
		}
	}
}

// expectedMove is what the apiserver should keep of entries moved to v1: moved by the same
// rules as migrate (checked by hand above for the Tasks this test builds), in its order.
func expectedMove(t *testing.T, before []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	t.Helper()
	moved, _, err := migrate.MovedManagedFields(before)
	if err != nil {
		t.Fatal(err)
	}
	return moved
}

// requireSameEntries compares two lists of entries by identity, sets as sets, times exactly.
func requireSameEntries(t *testing.T, key string, want, got []metav1.ManagedFieldsEntry) {
	t.Helper()
	index := func(es []metav1.ManagedFieldsEntry) map[string]metav1.ManagedFieldsEntry {
		m := map[string]metav1.ManagedFieldsEntry{}
		for _, e := range es {
			m[entryKey(e)+"/"+e.APIVersion] = e
		}
		return m
	}
	w, g := index(want), index(got)
	if d := cmp.Diff(slices.Sorted(maps.Keys(w)), slices.Sorted(maps.Keys(g))); d != "" {
		t.Errorf("%s: entries (-want +got):\n%s", key, d)
		return
	}
	for k, we := range w {
		ge := g[k]
		if !fieldSet(t, we.FieldsV1.Raw).Equals(fieldSet(t, ge.FieldsV1.Raw)) {
			t.Errorf("%s: %s owns %s, want %s", key, k, ge.FieldsV1.Raw, we.FieldsV1.Raw)
		}
		if !we.Time.Equal(ge.Time) {
			t.Errorf("%s: %s time %v, want %v", key, k, ge.Time, we.Time)
		}
	}
}

func setHas(t *testing.T, entries []metav1.ManagedFieldsEntry, manager string, op metav1.ManagedFieldsOperationType, subresource, field string) bool {
	t.Helper()
	for _, e := range entries {
		if e.Manager != manager || e.Operation != op || e.Subresource != subresource {
			continue
		}
		found := false
		fieldSet(t, e.FieldsV1.Raw).Iterate(func(p fieldpath.Path) {
			found = found || p.String() == field
		})
		return found
	}
	return false
}

func entriesDump(entries []metav1.ManagedFieldsEntry) string {
	var b strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&b, "  %s %s %s %q %s\n", e.Manager, e.Operation, e.APIVersion, e.Subresource, e.FieldsV1.Raw)
	}
	return b.String()
}

const ownershipNamespace = "migrate-b"

// TestContainerOwnershipSurvivesTheMove: at an old version, owning a field that decides
// whether a v1 object exists (v1beta1's schedule string, v1alpha1's shell script) is owning
// that object: a re-apply without the field removes the object, its defaulted and hidden
// fields included. After the move the manager owns only the one v1 leaf; a re-apply at v1 (the
// same Apply manager for the apiserver) must still remove the object, as it did before (it
// does: server-side apply drops what the prune leaves empty, and the old versions' appliers
// re-apply through the conversion's container rules).
func TestContainerOwnershipSurvivesTheMove(t *testing.T) {
	env := cluster(t)
	ctx := t.Context()
	env.installPreviousRelease(ctx, t, 0)
	env.upgradeToCurrentRelease(ctx, t)
	alpha := env.upgrade.Tasks("v1alpha1", ownershipNamespace)
	beta := env.upgrade.Tasks("v1beta1", ownershipNamespace)
	v1 := env.upgrade.Tasks("v1", ownershipNamespace)

	obj := func(version, name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/" + version, "kind": taskv1.Kind,
			"metadata": map[string]any{"name": name, "namespace": ownershipNamespace}, "spec": spec,
		}}
	}
	mustApply(ctx, t, beta, "beta-applier", obj("v1beta1", "sched", map[string]any{
		"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}}, "schedule": "*/5 * * * *"}))
	mustApply(ctx, t, alpha, "alpha-applier", obj("v1alpha1", "switch", map[string]any{"type": "shell", "shell": "echo"}))

	type probe struct {
		name, manager, task string
		tasks               dynamicTasks
		obj                 *unstructured.Unstructured
	}
	probes := []probe{
		{"v1beta1 applier drops the schedule at v1", "beta-applier", "sched", v1,
			obj("v1", "sched", map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}}})},
		{"v1beta1 applier drops the schedule at v1beta1", "beta-applier", "sched", beta,
			obj("v1beta1", "sched", map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}}})},
		{"v1alpha1 applier switches to HTTP at v1", "alpha-applier", "switch", v1,
			obj("v1", "switch", map[string]any{"runner": map[string]any{"type": "HTTP", "http": map[string]any{"url": "https://x.example"}}})},
		{"v1alpha1 applier switches to HTTP at v1alpha1", "alpha-applier", "switch", alpha,
			obj("v1alpha1", "switch", map[string]any{"type": "http", "url": "https://x.example"})},
	}
	run := func(p probe) string {
		got, err := p.tasks.Apply(ctx, p.task, p.obj.DeepCopy(), metav1.ApplyOptions{FieldManager: p.manager, DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return "error: " + err.Error()
		}
		// What decides the shape: the runner's members and the schedule. Values the admission
		// webhook would default (not installed here) differ: before the move the prune went
		// through the conversion, which defaults the HTTP timeout; after it, nothing does.
		runner, _, _ := unstructured.NestedMap(got.Object, "spec", "runner")
		members := slices.Sorted(maps.Keys(runner))
		url, _, _ := unstructured.NestedString(got.Object, "spec", "runner", "http", "url")
		shell, hasShell, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "runner", "shell")
		if p.tasks != v1 {
			members = slices.Sorted(maps.Keys(got.Object["spec"].(map[string]any)))
			url, _, _ = unstructured.NestedString(got.Object, "spec", "url")
			shell, hasShell, _ = unstructured.NestedFieldNoCopy(got.Object, "spec", "shell")
		}
		_, hasSchedule, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "schedule")
		return fmt.Sprintf("spec/runner keys %v, url %q, shell %v (%v), schedule %v", members, url, shell, hasShell, hasSchedule)
	}
	before := map[string]string{}
	for _, p := range probes {
		before[p.name] = run(p)
	}
	if _, err := migrate.Run(ctx, env.cfg, migrate.Options{Namespace: ownershipNamespace, Force: true}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, name := range []string{"sched", "switch"} {
		for _, e := range managedFieldsOf(ctx, t, v1, name) {
			if e.APIVersion != v1Version {
				t.Errorf("%s: the entry of %s is at %s", name, e.Manager, e.APIVersion)
			}
		}
	}
	for _, p := range probes {
		if got := run(p); got != before[p.name] {
			t.Errorf("%s: after the migration\n %s\nbefore\n %s", p.name, got, before[p.name])
		} else {
			t.Logf("%s: %s (before and after)", p.name, got)
		}
	}
}
