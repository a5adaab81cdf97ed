package reconciler_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"example.com/task-operator/bench/harness"
	"example.com/task-operator/internal/testenv"
)

// fleet is the chaos test's control plane and its operator replicas: processes of the operator
// binary (testenv.StartOperator) with leader election, behind the benchmarks' TCP proxy that
// stands in for the webhook Service. It is the only part of the chaos test that knows how
// processes are launched.
type fleet struct {
	env *harness.Env

	mu      sync.Mutex
	seq     int
	sigkill int
}

// startFleet starts a control plane of its own (the replicas point the cluster's webhooks at
// themselves, which must not disturb the package's other tests) and n replicas.
func startFleet(ctx context.Context, t *testing.T, n int) *fleet {
	t.Helper()
	cp := testenv.StartT(t, testenv.Options{Full: true, Nodes: 2})
	env, err := harness.New(ctx, cp, harness.Options{Log: testLog{t}})
	if err != nil {
		t.Fatalf("chaos replicas: %v", err)
	}
	f := &fleet{env: env}
	t.Cleanup(func() {
		if t.Failed() {
			for _, o := range env.Operators() {
				t.Logf("operator %s log:\n%s", o.Name(), o.Tail(40))
			}
		}
		env.Close()
	})
	f.ensure(ctx, t, n)
	return f
}

func (f *fleet) config() *rest.Config      { return f.env.Cfg }
func (f *fleet) client() client.Client     { return f.env.Client }
func (f *fleet) operatorNamespace() string { return testenv.OperatorNamespace }

func (f *fleet) namespace(ctx context.Context, t *testing.T) string {
	t.Helper()
	const ns = "chaos"
	if err := f.env.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

// ensure leaves n live replicas with leader election.
func (f *fleet) ensure(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	for _, o := range f.env.Operators() {
		if !o.Alive() {
			_ = f.env.KillOperator(o)
		}
	}
	for len(f.env.Operators()) < n {
		f.start(ctx, t)
	}
}

func (f *fleet) start(ctx context.Context, t *testing.T) {
	t.Helper()
	f.mu.Lock()
	f.seq++
	name := fmt.Sprintf("replica-%d", f.seq)
	f.mu.Unlock()
	if _, err := f.env.StartOperator(ctx, name, true); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
}

// killOne SIGKILLs the leader (or another replica) and starts a new replica in its place.
func (f *fleet) killOne(ctx context.Context, t *testing.T, leader bool, intn func(int) int) {
	ops := f.env.Operators()
	if len(ops) == 0 {
		return
	}
	victim := ops[intn(len(ops))]
	if leader {
		for _, o := range ops {
			if is, err := o.IsLeader(ctx); err == nil && is {
				victim = o
			}
		}
	}
	if err := f.env.KillOperator(victim); err != nil {
		t.Logf("SIGKILL %s: %v", victim.Name(), err)
	}
	f.mu.Lock()
	f.sigkill++
	f.mu.Unlock()
	if ctx.Err() == nil {
		f.start(ctx, t)
	}
}

func (f *fleet) kills() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sigkill
}

// testLog sends the harness' progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Logf("%s", p)
	return len(p), nil
}
