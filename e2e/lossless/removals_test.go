package lossless_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"example.com/task-operator/internal/testenv"
)

// Removals through apply (issue #27): an apply that drops a field its manager alone owns removes
// it, whatever was written at other versions before, exactly as the same applies do on a Task
// written at one version only.

var removalCases = flag.Int("lossless.removals", 96, "random apply removals the removal property test makes through the apiserver")

// A feature is one field a manifest may set, the same value at every version that expresses it.
type feature struct {
	name string
	// runner is the runner type the feature belongs to, "" for any.
	runner string
	// at is the field's path in a manifest at each version that expresses it.
	at map[string]string
	// hub is the v1 field it is stored at.
	hub string
	// value is the field's value at version (a schedule is a string at v1beta1).
	value func(version string) any
	// list: the value is a list keyed by name, of which an apply may drop one item.
	list bool
	// defaults are the values the field may take once removed, by the version of the apply
	// that removed it (absent: only absence).
	defaults map[string]any
}

func constant(v any) func(string) any { return func(string) any { return v } }

var features = []feature{
	{name: "image", runner: "Shell", at: map[string]string{beta: "spec.runner.shell.image", hubVersion: "spec.runner.shell.image"},
		hub: "spec.runner.shell.image", value: constant("alpine:3.21")},
	{name: "env", runner: "Shell", at: map[string]string{hubVersion: "spec.runner.shell.env"}, list: true,
		hub: "spec.runner.shell.env", value: constant([]any{obj{"name": "A", "value": "1"}, obj{"name": "B", "value": "2"}})},
	{name: "method", runner: "HTTP", at: map[string]string{beta: "spec.runner.http.method", hubVersion: "spec.runner.http.method"},
		hub: "spec.runner.http.method", value: constant("POST"), defaults: map[string]any{beta: "GET", hubVersion: "GET"}},
	{name: "headers", runner: "HTTP", at: map[string]string{beta: "spec.runner.http.headers", hubVersion: "spec.runner.http.headers"}, list: true,
		hub: "spec.runner.http.headers", value: constant([]any{obj{"name": "X-A", "value": "1"}, obj{"name": "X-B", "value": "2"}})},
	{name: "body", runner: "HTTP", at: map[string]string{hubVersion: "spec.runner.http.body"},
		hub: "spec.runner.http.body", value: constant(`{"full":true}`)},
	{name: "http timeout", runner: "HTTP", at: map[string]string{hubVersion: "spec.runner.http.timeout"},
		hub: "spec.runner.http.timeout", value: constant("45s"), defaults: map[string]any{hubVersion: "30s"}},
	{name: "accepted codes", runner: "HTTP", at: map[string]string{hubVersion: "spec.runner.http.acceptedStatusCodes"},
		hub: "spec.runner.http.acceptedStatusCodes", value: constant([]any{int64(200), int64(202)})},
	{name: "parallelism", at: map[string]string{alpha: "spec.replicas", beta: "spec.parallelism", hubVersion: "spec.parallelism"},
		hub: "spec.parallelism", value: constant(int64(4)), defaults: map[string]any{alpha: int64(1), beta: int64(1), hubVersion: int64(1)}},
	{name: "maxRetries", at: map[string]string{alpha: "spec.maxRetry", beta: "spec.maxRetries", hubVersion: "spec.retry.maxRetries"},
		hub: "spec.retry.maxRetries", value: constant(int64(7)), defaults: map[string]any{alpha: int64(0), beta: int64(3), hubVersion: int64(3)}},
	{name: "backoff", at: map[string]string{hubVersion: "spec.retry.backoff.initial"},
		hub: "spec.retry.backoff.initial", value: constant("20s"), defaults: map[string]any{hubVersion: "10s"}},
	{name: "timeout", at: map[string]string{hubVersion: "spec.timeout"}, hub: "spec.timeout", value: constant("9m")},
	{name: "ttl", at: map[string]string{hubVersion: "spec.ttlSecondsAfterFinished"}, hub: "spec.ttlSecondsAfterFinished", value: constant(int64(60))},
	{name: "suspend", at: map[string]string{beta: "spec.suspend", hubVersion: "spec.suspend"}, hub: "spec.suspend", value: constant(true)},
	{name: "schedule", at: map[string]string{beta: "spec.schedule", hubVersion: "spec.schedule"}, hub: "spec.schedule",
		value: func(version string) any {
			if version == beta {
				return "@daily"
			}
			return obj{"cron": "@daily"}
		}},
}

// A removal scenario: manager A applies a manifest at a version, others write (or not) at
// other versions, and A applies the manifest again without some of its fields.
type removalScenario struct {
	runner  string
	version string
	// applier is how A applies: its client, kubectl --server-side, or client-side kubectl.
	applier applier
	// has are the features A applies first; drop are those it drops (or, for a list, whose
	// last item it drops: trim).
	has, drop []feature
	trim      map[string]bool
	// others are the writes between A's two applies.
	others []otherWrite
}

// An applier is one way manager A applies its manifest.
type applier struct {
	name string
	// force: --force-conflicts (server-side only).
	serverSide, kubectl, force bool
}

var appliers = []applier{
	{name: "server-side apply", serverSide: true},
	{name: "server-side apply, force", serverSide: true, force: true},
	{name: "kubectl apply --server-side --force-conflicts", serverSide: true, kubectl: true, force: true},
	{name: "kubectl apply (client-side)", kubectl: true},
}

// An otherWrite is a write by another manager between A's applies.
type otherWrite struct {
	name string
	// twin: the write is made on the twin Task too (it is at A's version).
	twin bool
	do   func(ctx context.Context, ns, name string) error
}

func (f feature) expressedAt(version string) bool { _, ok := f.at[version]; return ok }

func (f feature) fits(runner string) bool { return f.runner == "" || f.runner == runner }

// manifest is the Task at version with features set (a list in trim with its first item only).
func manifestAt(version, runner, ns, name string, set []feature, trim map[string]bool) obj {
	spec := obj{}
	switch {
	case version == alpha && runner == "Shell":
		spec["type"], spec["shell"] = "shell", "echo removals"
	case version == alpha:
		spec["type"], spec["url"] = "http", "https://removals.example/"
	case runner == "Shell":
		spec["runner"] = obj{"type": "Shell", "shell": obj{"script": "echo removals"}}
	default:
		spec["runner"] = obj{"type": "HTTP", "http": obj{"url": "https://removals.example/"}}
	}
	o := obj{"apiVersion": "example.com/" + version, "kind": "Task", "metadata": obj{"name": name, "namespace": ns}, "spec": spec}
	for _, f := range set {
		v := clone(f.value(version))
		if trim[f.name] {
			v = v.([]any)[:1]
		}
		setField(o, f.at[version], v)
	}
	return o
}

func (a applier) apply(ctx context.Context, manager string, o obj) error {
	u := &unstructured.Unstructured{Object: o}
	if !a.kubectl {
		version := strings.TrimPrefix(u.GetAPIVersion(), "example.com/")
		_, err := tasks(version, u.GetNamespace()).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: manager, Force: a.force})
		return err
	}
	args := []string{"apply", "-f", "-"}
	if a.serverSide {
		args = append(args, "--server-side", "--field-manager="+manager)
		if a.force {
			args = append(args, "--force-conflicts")
		}
	}
	_, _, err := testenv.Kubectl(ctx, cluster.KubeconfigPath, mustJSON(o), args...)
	return err
}

// randomRemoval makes a scenario: A's features at its version, what it drops (at least one
// field), and up to two writes by others, each at another version or by a second manager.
func randomRemoval(rnd *rand.Rand) removalScenario {
	s := removalScenario{runner: pick(rnd, "Shell", "HTTP"), version: pick(rnd, alpha, beta, hubVersion), applier: pick(rnd, appliers...), trim: map[string]bool{}}
	for _, f := range features {
		if f.fits(s.runner) && f.expressedAt(s.version) && rnd.IntN(3) > 0 {
			s.has = append(s.has, f)
		}
	}
	if len(s.has) == 0 {
		for _, f := range features {
			if f.fits(s.runner) && f.expressedAt(s.version) {
				s.has = append(s.has, f)
				break
			}
		}
	}
	for _, f := range s.has {
		if rnd.IntN(2) == 0 {
			s.drop = append(s.drop, f)
			s.trim[f.name] = f.list && rnd.IntN(2) == 0
		}
	}
	if len(s.drop) == 0 {
		f := pick(rnd, s.has...)
		s.drop = append(s.drop, f)
	}
	for n := rnd.IntN(3); n > 0; n-- {
		if w, ok := s.randomOther(rnd); ok {
			s.others = append(s.others, w)
		}
	}
	return s
}

func (s removalScenario) drops(f feature) bool {
	return slices.ContainsFunc(s.drop, func(d feature) bool { return d.name == f.name })
}

// kept are the features A still applies in full.
// deletedWhole are the v1 objects a client-side apply deletes whole: kubectl's three-way merge
// patch sets to null an object its last apply had and its manifest no longer has, with what
// other managers wrote in it (as at one version: the twin then holds what that leaves).
// Server-side apply removes fields one by one.
func (s removalScenario) deletedWhole() []string {
	if s.applier.serverSide {
		return nil
	}
	second := manifestAt(s.version, s.runner, "", "", s.kept(), s.trim)
	var out []string
	for _, f := range s.drop {
		if s.trim[f.name] || f.at[s.version] != f.hub {
			continue // a list item goes alone; a path of an old version is not the hub's
		}
		// kubectl nulls the highest object the new manifest lacks.
		gone := ""
		for p := parentOf(f.hub); p != "spec" && field(second, p) == nil; p = parentOf(p) {
			gone = p
		}
		if gone != "" && !slices.Contains(out, gone) {
			out = append(out, gone)
		}
	}
	return out
}

func parentOf(path string) string {
	if i := strings.LastIndexByte(path, '.'); i > 0 {
		return path[:i]
	}
	return path
}

func (s removalScenario) kept() []feature {
	var out []feature
	for _, f := range s.has {
		if !s.drops(f) || s.trim[f.name] {
			out = append(out, f)
		}
	}
	return out
}

// randomOther is one write by someone else that leaves A the only owner of what it drops: a
// status write at v1 (as the operator's), a label or a field A never applied patched at
// another version, or a second manager applying some of what A keeps, at A's version or
// another.
func (s removalScenario) randomOther(rnd *rand.Rand) (otherWrite, bool) {
	other := pick(rnd, alpha, beta, hubVersion)
	switch rnd.IntN(4) {
	case 0:
		return otherWrite{name: "status at v1", do: func(ctx context.Context, ns, name string) error {
			u, err := tasks(hubVersion, ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			u.Object["status"] = randomStatus(rand.New(rand.NewPCG(1, 1)), name)
			_, err = tasks(hubVersion, ns).UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: "task-operator"})
			return err
		}}, s.version != hubVersion
	case 1:
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"touched-at":%q}}}`, other))
		return otherWrite{name: "label patched at " + other, twin: other == s.version, do: func(ctx context.Context, ns, name string) error {
			_, err := tasks(other, ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "labeller"})
			return err
		}}, true
	case 2:
		var free []feature
		for _, f := range features {
			if f.fits(s.runner) && f.expressedAt(other) && !slices.ContainsFunc(s.has, func(h feature) bool { return h.hub == f.hub }) && f.name != "schedule" {
				free = append(free, f)
			}
		}
		if len(free) == 0 {
			return otherWrite{}, false
		}
		f := pick(rnd, free...)
		patch := obj{}
		setField(patch, f.at[other], clone(f.value(other)))
		return otherWrite{name: f.name + " patched at " + other, twin: other == s.version, do: func(ctx context.Context, ns, name string) error {
			_, err := tasks(other, ns).Patch(ctx, name, types.MergePatchType, mustJSON(patch), metav1.PatchOptions{FieldManager: "patcher"})
			return err
		}}, true
	default:
		var shared []feature
		for _, f := range s.kept() {
			if f.expressedAt(other) && !s.trim[f.name] {
				shared = append(shared, f)
			}
		}
		return otherWrite{name: "second manager applies at " + other, twin: other == s.version, do: func(ctx context.Context, ns, name string) error {
			m := manifestAt(other, s.runner, ns, name, shared, nil)
			_, err := tasks(other, ns).Apply(ctx, name, &unstructured.Unstructured{Object: m}, metav1.ApplyOptions{FieldManager: "bob"})
			return err
		}}, s.applier.serverSide
	}
}

func (s removalScenario) String() string {
	names := func(fs []feature) []string {
		var out []string
		for _, f := range fs {
			n := f.name
			if s.trim[f.name] {
				n += " (one item)"
			}
			out = append(out, n)
		}
		return out
	}
	var others []string
	for _, w := range s.others {
		others = append(others, w.name)
	}
	return fmt.Sprintf("%s Task, %s at %s with %v, drops %v; between: %v", s.runner, s.applier.name, s.version, names(s.has), names(s.drop), others)
}

// run plays s on a Task and on its twin (the same applies, none of the writes at other
// versions), and checks A's second apply: each dropped field is what it is on the twin, a
// default of the apply's version or absent, and nothing else changed.
func (s removalScenario) run(ctx context.Context, ns, name string) error {
	const manager = "alice"
	twin := name + "-twin"
	for _, n := range []string{name, twin} {
		if err := s.applier.apply(ctx, manager, manifestAt(s.version, s.runner, ns, n, s.has, nil)); err != nil {
			return fmt.Errorf("first apply: %w", err)
		}
	}
	for _, w := range s.others {
		targets := []string{name}
		if w.twin {
			targets = append(targets, twin)
		}
		for _, n := range targets {
			if err := w.do(ctx, ns, n); err != nil {
				return fmt.Errorf("%s: %w", w.name, err)
			}
		}
	}
	before, err := tasks(hubVersion, ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, n := range []string{name, twin} {
		if err := s.applier.apply(ctx, manager, manifestAt(s.version, s.runner, ns, n, s.kept(), s.trim)); err != nil {
			return fmt.Errorf("second apply: %w", err)
		}
	}
	after, err := tasks(hubVersion, ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	reference, err := tasks(hubVersion, ns).Get(ctx, twin, metav1.GetOptions{})
	if err != nil {
		return err
	}
	want := clone(before.Object).(obj)
	for _, f := range s.drop {
		ref := field(reference.Object, f.hub)
		if !s.trim[f.name] && ref != nil && ref != f.defaults[s.version] {
			return fmt.Errorf("on the twin, written at %s only, dropped %s is %v: neither absent nor a default", s.version, f.name, ref)
		}
		setField(want, f.hub, clone(ref))
	}
	for _, parent := range s.deletedWhole() {
		setField(want, parent, clone(field(reference.Object, parent)))
	}
	for _, part := range []string{"spec", "status"} {
		if diff := cmp.Diff(want[part], after.Object[part]); diff != "" {
			return fmt.Errorf("stored %s after the apply that drops fields (-want +got):\n%s", part, diff)
		}
	}
	return nil
}

// TestApplyRemovesWhatItAloneOwns is the removal property test: random apply scenarios, each
// checked against its twin written at one version only.
func TestApplyRemovesWhatItAloneOwns(t *testing.T) {
	ns := setUp(t)
	seed := *propertySeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -lossless.seed=%d), %d cases", seed, seed, *removalCases)
	const workers = 6
	var next, failed atomic.Int64
	var mu sync.Mutex
	covered := map[string]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(seed, uint64(w)))
			for failed.Load() == 0 {
				i := next.Add(1)
				if i > int64(*removalCases) {
					return
				}
				s := randomRemoval(rnd)
				name := fmt.Sprintf("r-%d", i)
				if err := s.run(t.Context(), ns, name); err != nil {
					t.Errorf("%s: %s: %v", name, s, err)
					failed.Add(1)
					return
				}
				mu.Lock()
				covered[s.version+", "+s.applier.name]++
				covered[fmt.Sprintf("%d other writes", len(s.others))]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("covered: %v", covered)
}

// TestApplyRemovalsAfterWritesAtOtherVersions: the cases issue #27 reported, through kubectl.
// One patch at v1alpha1 must not stop a v1 apply from removing the env entry and the timeout it
// alone applied; dropping fields from an apply at v1beta1 or v1alpha1 after a status write at
// v1 (the operator writes one on every Task) must give their defaults back, not keep the
// values.
func TestApplyRemovalsAfterWritesAtOtherVersions(t *testing.T) {
	ns := setUp(t)
	apply := func(manager, manifest string) {
		kubectl(t, manifest, "apply", "--server-side", "--field-manager="+manager, "-f", "-")
	}
	statusAtV1 := func(name string) {
		kubectl(t, "", "patch", "-n", ns, "tasks.v1.example.com/"+name, "--subresource=status", "--type=merge", "-p",
			`{"status":{"phase":"Running","attempts":1,"lastJob":{"name":"`+name+`-0-1","uid":"uid-1"},"observedGeneration":1}}`)
	}
	tests := []struct {
		name, first, between, second string
		// want are fields of the stored spec after the second apply; nil: absent.
		want map[string]any
	}{{
		name:    "v1 apply after a patch at v1alpha1",
		first:   `{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"dan"},"spec":{"runner":{"type":"Shell","shell":{"script":"echo","env":[{"name":"A","value":"1"}]}},"timeout":"9m"}}`,
		between: "patch-alpha",
		second:  `{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"dan"},"spec":{"runner":{"type":"Shell","shell":{"script":"echo"}}}}`,
		want:    map[string]any{"spec.timeout": nil, "spec.runner.shell.env": nil, "spec.parallelism": int64(2)},
	}, {
		name:    "v1beta1 apply after a status write at v1",
		first:   `{"apiVersion":"example.com/v1beta1","kind":"Task","metadata":{"name":"erin"},"spec":{"runner":{"type":"HTTP","http":{"url":"https://a.example/","method":"POST"}},"maxRetries":7}}`,
		between: "status",
		second:  `{"apiVersion":"example.com/v1beta1","kind":"Task","metadata":{"name":"erin"},"spec":{"runner":{"type":"HTTP","http":{"url":"https://a.example/"}}}}`,
		want:    map[string]any{"spec.runner.http.method": "GET", "spec.retry.maxRetries": int64(3)},
	}, {
		name:    "v1alpha1 apply after a status write at v1",
		first:   `{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":{"name":"frank"},"spec":{"type":"shell","shell":"echo","replicas":4}}`,
		between: "status",
		second:  `{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":{"name":"frank"},"spec":{"type":"shell","shell":"echo"}}`,
		want:    map[string]any{"spec.parallelism": int64(1)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first := &unstructured.Unstructured{}
			if err := first.UnmarshalJSON([]byte(tt.first)); err != nil {
				t.Fatal(err)
			}
			name := first.GetName()
			apply(name, strings.Replace(tt.first, `"metadata":{`, `"metadata":{"namespace":"`+ns+`",`, 1))
			switch tt.between {
			case "patch-alpha":
				kubectl(t, "", "patch", "-n", ns, "tasks.v1alpha1.example.com/"+name, "--type=merge", "-p", `{"spec":{"replicas":2}}`)
			case "status":
				statusAtV1(name)
			}
			apply(name, strings.Replace(tt.second, `"metadata":{`, `"metadata":{"namespace":"`+ns+`",`, 1))
			stored, err := tasks(hubVersion, ns).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for path, want := range tt.want {
				if got := field(stored.Object, path); !cmp.Equal(want, got) {
					t.Errorf("%s is %v, want %v", path, got, want)
				}
			}
		})
	}
}
