package scenario

import (
	"context"
	"errors"
	"fmt"
	"time"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"example.com/task-operator/bench/harness"
	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/migrate"
)

// The rewrite ceiling asks how fast this machine's apiserver and etcd rewrite n objects of a
// Task's size stored at v1alpha1 when conversion costs nothing: the bare client's rewrite of
// Floors with no conversion webhook at all (twice, in turn with migrate.Run: againstCeiling),
// then with the rename-only one. What the Tasks' migration can reach is bounded by the first.
// The same-calls floor is the migration with a webhook that costs nothing: Floors with the
// rename-only webhook and the Task's v1alpha1 schema at every version, created at v1 while
// stored at v1alpha1 so that their managedFields are at v1, as migrate.Run leaves a Task's, and
// rewritten with a mark (an annotation): migrate.Run's write of a Task differs from the object
// as read (its managedFields move to v1), and a write that does not makes the apiserver read the
// object again from etcd, converting it, before it stores it. Each write then makes the calls a
// Task's does under migrate.Run (one per other served version's watch cache), and the
// apiserver does the same schema work.
const floorEtcdPrefix = "/registry/" + floorGroup + "/" + floorResource + "/"

// The ceilings' names.
const (
	noWebhookCeiling  = "no conversion webhook"
	renameOnlyCeiling = "the rename-only webhook, HTTP/1.1"
	renameOnlyFloor   = "the same-calls floor: the rename-only webhook, HTTP/1.1, managedFields at v1, each Floor marked"
)

// ceiling is one timing of a rewrite ceiling: name says which conversion conv is, label tells
// two timings of one apart, profile asks for CPU profiles meanwhile. schema is the Floors'
// schemas, createAt the version they are created at (v1alpha1 unless given); mark has the
// rewrite annotate each Floor rather than write it back unchanged.
type ceiling struct {
	name, label string
	conv        *apix.CustomResourceConversion
	profile     bool
	schema      floorSchema
	createAt    string
	mark        bool
}

// rewrittenMark is the annotation a marking rewrite sets.
const rewrittenMark = "bench.example.com/rewritten"

func (c ceiling) change() func(*unstructured.Unstructured) {
	if !c.mark {
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

func (c ceiling) createdAt() string {
	if c.createAt == "" {
		return "v1alpha1"
	}
	return c.createAt
}

func (c ceiling) String() string {
	if c.label == "" {
		return c.name
	}
	return c.name + ", " + c.label
}

// timeCeiling times the bare client's rewrite of n Floors stored at v1alpha1 under c's
// conversion, reports it beside the Tasks' bare client (bare objects/s) and deletes the Floors
// again; it returns the time.
func (f *floors) timeCeiling(ctx context.Context, e *harness.Env, c ceiling, n int, bare float64, r *Result) (d time.Duration, err error) {
	defer func() { err = errors.Join(err, f.uninstall(context.WithoutCancel(ctx))) }()
	e.Logf("rewriting %d Floors, %s", n, c)
	d, calls, err := f.rewrite(ctx, e, c, n, r)
	if err != nil {
		return 0, fmt.Errorf("rewrite ceiling, %s: %w", c, err)
	}
	r.Addf("rewrite ceiling, bare client: "+c.String(), fmt.Sprintf("%d Floors of a Task's size stored at v1alpha1, %.0f objects/s; %.2f conversion calls per object; the Tasks' bare client ÷ this: %.2f",
		n, rate(n, d), calls, bare/rate(n, d)), "%s", secs(d))
	return d, nil
}

// rewrite stores n Floors at v1alpha1 under c's conversion, moves the storage version to v1 and
// times the bare client's rewrite; it returns the time and the conversion calls per object.
func (f *floors) rewrite(ctx context.Context, e *harness.Env, c ceiling, n int, r *Result) (time.Duration, float64, error) {
	if err := f.install(ctx, "v1alpha1", c.conv, c.schema); err != nil {
		return 0, 0, err
	}
	err := testenv.Parallel(ctx, n, e.Workers, func(ctx context.Context, i int) error {
		floor := fmt.Sprintf("floor-%05d", i)
		obj := testenv.V1alpha1Task(migrateNS, floor, i)
		obj.SetAPIVersion(floorGroup + "/" + c.createdAt())
		obj.SetKind("Floor")
		if i%3 == 0 { // as CreateV1alpha1Tasks gives every third Task a status
			obj.Object["status"] = testenv.V1alpha1Status(floor, i)
		}
		_, err := f.in(c.createdAt())(migrateNS).Create(ctx, obj, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("create Floors: %w", err)
	}
	if err := f.storeAt(ctx, e, "v1"); err != nil {
		return 0, 0, err
	}
	if _, err := settleConversions(ctx, e, floorCRDName); err != nil {
		return 0, 0, err
	}
	before, err := harness.APIServerConversions(ctx, e.Kube, floorCRDName)
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
	notV1 := 0
	for _, o := range stored {
		if o.APIVersion() != floorGroup+"/v1" {
			notV1++
		}
	}
	r.Violation("rewrite ceiling, "+c.String()+": Floors not at v1 in etcd", notV1+abs(n-len(stored)), fmt.Sprintf("%d stored, %d created", len(stored), n))
	calls := after.Sub(before)
	if calls.Total().Count > 0 {
		r.Add("rewrite ceiling, "+c.String()+": conversion calls per object", calls.PerObject(n), "apiserver_crd_conversion_webhook_duration_seconds, by from→to")
	}
	return d, calls.Total().Count / float64(n), nil
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
	// A v1alpha1 Task's body: valid under either schema a rewrite ceiling's Floors have.
	probe := testenv.V1alpha1Task(migrateNS, "floor-storage-probe", 0)
	probe.SetAPIVersion(floorGroup + "/" + version)
	probe.SetKind("Floor")
	return e.CP.WaitStoredAt(ctx, f.in(version)(migrateNS), probe, floorEtcdPrefix)
}

func abs(x int) int { return max(x, -x) }
