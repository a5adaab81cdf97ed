package scenario

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"example.com/task-operator/bench/harness"
	"example.com/task-operator/conversion"
	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/migrate"
)

// The rewrite ceiling asks how fast this machine's apiserver and etcd rewrite n objects of a
// Task's size stored at v1alpha1 when conversion costs nothing: the bare client's rewrite of
// Floors with no conversion webhook at all (twice, in turn with migrate.Run: againstCeiling),
// then with the rename-only one. What the Tasks' migration can reach is bounded by the first.
// The same-calls floor is the migration's write with a webhook that costs nothing: Floors with
// the Task CRD's schemas (the apiserver validates a write at v1 against v1's schema and its CEL
// rules, as a Task's), stored and created at v1 from the fixture's bodies converted to v1, so
// that their managedFields are at v1 as migrate.Run leaves a Task's, and rewritten at v1 with a
// mark (an annotation). The mark matters: migrate.Run's write of a Task differs from the Task as
// read (its managedFields move to v1), and a write identical to the apiserver's cached copy
// makes it read the object again from etcd before storing it. Each write then makes the calls a
// Task's does under migrate.Run, one per other served version's watch cache; the rename-only
// webhook answers them.
const floorEtcdPrefix = "/registry/" + floorGroup + "/" + floorResource + "/"

// The ceilings' names.
const (
	noWebhookCeiling   = "no conversion webhook"
	renameOnlyCeiling  = "the rename-only webhook, HTTP/1.1"
	renameOnlyFloor    = "the same-calls floor: the Task's schemas, the rename-only webhook, HTTP/1.1"
	taskSchemasCeiling = "the Task's schemas, no conversion webhook"
	taskShapeCeiling   = "Task-shaped Floors without the Task's schemas, no conversion webhook"
	markedCeiling      = "no conversion webhook, each write marked"
)

// ceiling is one timing of a rewrite ceiling: name says which conversion conv is, label tells
// two timings of one apart, profile asks for CPU profiles meanwhile. A ceiling's Floors are
// stored at v1alpha1 with schemas that keep any field, then moved to storage version v1; with
// taskShaped, they are the same-calls floor's as described above, and sameCalls checks that
// each write made migrate.Run's two calls. The Task's-schemas ceiling is taskShaped without a
// webhook: the same-calls floor's work but the calls. The Task-shape ceiling is that again with
// schemas that keep any field (anySchema): the same Floors and writes, which the Task's schemas
// are all that tells apart from the Task's-schemas ceiling, and only the fixture from the
// no-webhook ceiling.
type ceiling struct {
	name, label string
	conv        *apix.CustomResourceConversion
	profile     bool
	taskShaped  bool
	anySchema   bool
	sameCalls   bool
	// marked adds the mark to the no-webhook ceiling's writes (taskShaped ones always have it).
	marked bool
}

// rewrittenMark is the annotation a marking rewrite sets.
const rewrittenMark = "bench.example.com/rewritten"

func (c ceiling) change() func(*unstructured.Unstructured) {
	if !c.taskShaped && !c.marked {
		return nil
	}
	return func(obj *unstructured.Unstructured) {
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[rewrittenMark] = "true"
		obj.SetAnnotations(annotations)
	}
}

func (c ceiling) String() string {
	if c.label == "" {
		return c.name
	}
	return c.name + ", " + c.label
}

// timeCeiling times the bare client's rewrite of n Floors under c's conversion, reports it beside the Tasks' bare client (bare objects/s) and deletes the Floors
// again; it returns the time.
func (f *floors) timeCeiling(ctx context.Context, e *harness.Env, c ceiling, n int, bare float64, r *Result) (d time.Duration, err error) {
	defer func() { err = errors.Join(err, f.uninstall(context.WithoutCancel(ctx))) }()
	e.Logf("rewriting %d Floors, %s", n, c)
	d, calls, err := f.rewrite(ctx, e, c, n, r)
	if err != nil {
		return 0, fmt.Errorf("rewrite ceiling, %s: %w", c, err)
	}
	r.Addf("rewrite ceiling, bare client: "+c.String(), fmt.Sprintf("%d Floors of a Task's size %s, %.0f objects/s; %.2f conversion calls per object; the Tasks' bare client ÷ this: %.2f",
		n, c.fixture(), rate(n, d), calls, bare/rate(n, d)), "%s", secs(d))
	return d, nil
}

// rewrite stores n Floors under c's conversion (at v1alpha1, then moves the storage version to
// v1; the same-calls floor's at v1) and times the bare client's rewrite; it returns the time and
// the conversion calls per object.
func (f *floors) rewrite(ctx context.Context, e *harness.Env, c ceiling, n int, r *Result) (time.Duration, float64, error) {
	storedAt, schema := "v1alpha1", anyFields
	if c.taskShaped {
		storedAt = "v1"
		if !c.anySchema {
			schema = taskSchemas
		}
	}
	if err := f.install(ctx, storedAt, c.conv, schema); err != nil {
		return 0, 0, err
	}
	err := testenv.Parallel(ctx, n, e.Workers, func(ctx context.Context, i int) error {
		obj, err := floorFixture(i, storedAt)
		if err != nil {
			return err
		}
		_, err = f.in(storedAt)(migrateNS).Create(ctx, obj, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("create Floors: %w", err)
	}
	if storedAt != "v1" {
		if err := f.storeAt(ctx, e, "v1"); err != nil {
			return 0, 0, err
		}
	}
	if _, err := settleConversions(ctx, e, floorCRDName); err != nil {
		return 0, 0, err
	}
	before, err := harness.APIServerConversions(ctx, e.Kube, floorCRDName)
	if err != nil {
		return 0, 0, err
	}
	revision, err := e.CP.EtcdRevision(ctx)
	if err != nil {
		return 0, 0, err
	}
	waitProfiles, err := profileIf(ctx, e, c.profile, n, "rewrite ceiling, "+c.String(), r)
	if err != nil {
		return 0, 0, err
	}
	began := time.Now()
	done, err := bareRewrite(ctx, f.in("v1"), migrate.DefaultPageSize, migrate.DefaultConcurrency, c.change())
	d := time.Since(began)
	if err != nil {
		return 0, 0, err
	}
	if err := waitProfiles(); err != nil {
		return 0, 0, fmt.Errorf("profiles: %w", err)
	}
	if done != n {
		return 0, 0, fmt.Errorf("rewrote %d Floors, want %d", done, n)
	}
	time.Sleep(time.Second) // the watch caches decode the last writes' events after they return
	after, err := harness.APIServerConversions(ctx, e.Kube, floorCRDName)
	if err != nil {
		return 0, 0, err
	}
	stored, _, err := e.CP.StoredObjects(ctx, floorEtcdPrefix)
	if err != nil {
		return 0, 0, err
	}
	notV1, unwritten, bytes := 0, 0, 0
	for _, o := range stored {
		if o.APIVersion() != floorGroup+"/v1" {
			notV1++
		}
		if o.ModRevision <= revision {
			unwritten++
		}
		bytes += len(o.Value)
	}
	r.Violation("rewrite ceiling, "+c.String()+": Floors not at v1 in etcd", notV1+abs(n-len(stored)), fmt.Sprintf("%d stored, %d created", len(stored), n))
	// A write the apiserver found identical to the stored object returns without reaching etcd;
	// the ceilings time writes that do.
	r.Violation("rewrite ceiling, "+c.String()+": Floors the rewrite did not write to etcd", unwritten, fmt.Sprintf("of %d stored; %d bytes each on average", len(stored), bytes/max(1, len(stored))))
	calls := after.Sub(before)
	if total := calls.Total(); total.Count > 0 {
		r.Add("rewrite ceiling, "+c.String()+": conversion calls per object", calls.PerObject(n),
			fmt.Sprintf("apiserver_crd_conversion_webhook_duration_seconds, by from→to; the apiserver's mean call %.2f ms", 1000*total.Sum/total.Count))
	}
	if c.sameCalls {
		r.Violation("rewrite ceiling, "+c.String()+": calls other than migrate.Run's two per write", offMigrateRunCalls(calls, n), calls.PerObject(n))
	}
	return d, calls.Total().Count / float64(n), nil
}

// offMigrateRunCalls counts the calls by which a rewrite of n objects differs from migrate.Run's
// writes of Tasks (one v1→v1alpha1 and one v1→v1beta1 call per write), beyond 1 % of them: a
// watch cache that relists meanwhile may add a few.
func offMigrateRunCalls(calls harness.Conversions, n int) int {
	want := map[string]float64{"v1→v1alpha1": float64(n), "v1→v1beta1": float64(n)}
	off := 0.0
	for pair, h := range calls {
		off += math.Abs(h.Count - want[pair])
	}
	for pair, w := range want {
		if _, ok := calls[pair]; !ok {
			off += w
		}
	}
	return max(0, int(off)-2*n/100)
}

// fixture says how c's Floors are stored before the rewrite.
func (c ceiling) fixture() string {
	switch {
	case c.taskShaped && c.anySchema:
		return "stored and created at v1, schemas that keep any field"
	case c.taskShaped:
		return "stored and created at v1, the Task's schemas"
	case c.marked:
		return "stored at v1alpha1, schemas that keep any field, each write marked"
	}
	return "stored at v1alpha1, schemas that keep any field"
}

// floorFixture is the i-th Floor: the migration fixture's i-th Task (with a status for every
// third, as CreateV1alpha1Tasks gives), at version, converted by this release's converter.
func floorFixture(i int, version string) (*unstructured.Unstructured, error) {
	name := fmt.Sprintf("floor-%05d", i)
	task := testenv.V1alpha1Task(migrateNS, name, i)
	if i%3 == 0 {
		task.Object["status"] = testenv.V1alpha1Status(name, i)
	}
	obj, err := conversion.Convert(task.Object, version)
	if err != nil {
		return nil, fmt.Errorf("floor %d at %s: %w", i, version, err)
	}
	floor := &unstructured.Unstructured{Object: obj}
	floor.SetAPIVersion(floorGroup + "/" + version)
	floor.SetKind("Floor")
	return floor, nil
}

// storeAt makes version the Floors' storage version and waits until a new Floor lands in etcd
// at it: the apiserver swaps a CRD's storage asynchronously.
func (f *floors) storeAt(ctx context.Context, e *harness.Env, version string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := f.crds.Get(ctx, floorCRDName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == version
		}
		_, err = f.crds.Update(ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("floor CRD storage version: %w", err)
	}
	return e.CP.WaitStoredAt(ctx, f.in(version)(migrateNS), floorObject(version, migrateNS, "floor-storage-probe"), floorEtcdPrefix)
}

func abs(x int) int { return max(x, -x) }
