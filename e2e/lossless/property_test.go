package lossless_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	taskv1 "example.com/task-operator/apis/v1"
)

var (
	propertyCases = flag.Int("lossless.cases", 1200, "random edits the property test makes through the apiserver")
	propertySeed  = flag.Uint64("lossless.seed", 0, "seed of the property test (0: a new one, printed)")
)

// TestRandomEditsKeepV1OnlyFields is the property test: random valid v1 Tasks, edited at random
// old versions through random write paths with random things done to the preserved annotation.
// After every write the stored v1 Task must be exactly what the edit's rule says: the edit's
// visible change, and every other field as it was.
func TestRandomEditsKeepV1OnlyFields(t *testing.T) {
	ns := setUp(t)
	seed := *propertySeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -lossless.seed=%d), %d cases", seed, seed, *propertyCases)
	const workers = 6
	var done, failed atomic.Int64
	counts := newCounter()
	more := func() bool { return done.Load() < int64(*propertyCases) && failed.Load() == 0 && !t.Failed() }
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := 0; more(); i++ {
				name := fmt.Sprintf("p-%d-%d", w, i)
				stored, err := createRandom(t.Context(), rnd, ns, name)
				if err != nil {
					t.Errorf("create %s: %v", name, err)
					failed.Add(1)
					return
				}
				// A chain of edits on one Task, then a fresh Task.
				for n := 1 + rnd.IntN(40); n > 0 && more(); n-- {
					next, ok := oneEdit(t, rnd, stored, counts)
					done.Add(1)
					if !ok {
						failed.Add(1)
						return
					}
					stored = next
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d edits checked\n%s", done.Load(), counts)
}

// oneEdit makes one random edit of stored and checks the result; it returns the new stored Task.
func oneEdit(t *testing.T, rnd *rand.Rand, stored obj, counts *counter) (obj, bool) {
	ctx := t.Context()
	version := pick(rnd, alpha, beta)
	e := randomEdit(rnd, version, stored)
	path := pickPath(rnd, e)
	game := pick(rnd, annotationGames...)
	ns, name := field(stored, "metadata.namespace").(string), field(stored, "metadata.name").(string)
	read, err := tasks(version, ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Errorf("read %s at %s: %v", name, version, err)
		return nil, false
	}
	changed := read.DeepCopy()
	e.spoke(changed.Object)
	if !e.status {
		game.play(rnd, changed, forgery(rnd))
	}
	what := fmt.Sprintf("%s at %s by %s, annotation %s", e.name, version, path.name, game.name)
	if err := path.write(ctx, version, read, changed); err != nil {
		t.Errorf("%s: %s: %v", name, what, err)
		return nil, false
	}
	after, err := tasks(hubVersion, ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Errorf("read %s at v1: %v", name, err)
		return nil, false
	}
	want := clone(stored).(obj)
	e.hub(want)
	counts.add(version, path.name, e.name)
	for _, part := range []string{"spec", "status"} {
		if diff := cmp.Diff(want[part], after.Object[part]); diff != "" {
			t.Errorf("%s: %s: stored %s is not what the rule says (-want +got):\n%s", name, what, part, diff)
			return nil, false
		}
	}
	if _, ok := after.GetAnnotations()["task.example.com/preserved-v1-fields"]; ok {
		t.Errorf("%s: %s: the preserved annotation was stored", name, what)
		return nil, false
	}
	return after.Object, true
}

// pickPath picks a write path that can make the edit; kubectl's are slow, so they get one case
// in five.
func pickPath(rnd *rand.Rand, e edit) writePath {
	var fast, slow []writePath
	for _, p := range writePaths {
		switch {
		case p.status != e.status, p.apply && e.removes:
		case p.kubectl:
			slow = append(slow, p)
		default:
			fast = append(fast, p)
		}
	}
	if len(slow) > 0 && rnd.IntN(5) == 0 {
		return pick(rnd, slow...)
	}
	return pick(rnd, fast...)
}

// createRandom creates a random valid Task at v1, writes a status for it as the operator would,
// and returns what is stored.
func createRandom(ctx context.Context, rnd *rand.Rand, ns, name string) (obj, error) {
	u := &unstructured.Unstructured{Object: obj{
		"apiVersion": taskv1.GroupVersion.String(), "kind": taskv1.Kind,
		"metadata": obj{"name": name, "namespace": ns, "labels": obj{"team": "lossless"}},
		"spec":     randomSpec(rnd),
	}}
	created, err := tasks(hubVersion, ns).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	created.Object["status"] = randomStatus(rnd, name)
	withStatus, err := tasks(hubVersion, ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return withStatus.Object, nil
}

var hubVersion = taskv1.GroupVersion.Version

// counter counts what the property test covered, for its log: by version, write path and edit.
type counter struct {
	mu sync.Mutex
	m  [3]map[string]int
}

func newCounter() *counter { return &counter{m: [3]map[string]int{{}, {}, {}}} }

func (c *counter) add(version, path, edit string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, k := range []string{version, path, edit} {
		c.m[i][k]++
	}
}

func (c *counter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("by version: %v\nby write path: %v\nby edit: %v", c.m[0], c.m[1], c.m[2])
}
