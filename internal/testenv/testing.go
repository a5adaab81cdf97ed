package testenv

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// This file is the API for tests: what takes a testing.TB or a testing.M. The rest of the
// package serves programs as well (hack/cluster, bench).

// shared is the package-wide control plane of a test binary that runs Main.
var shared struct {
	mainRan bool
	opts    Options

	once sync.Once
	cp   *ControlPlane
	err  error

	mu       sync.Mutex
	atExit   []func(failed bool)
	finished bool
}

// Main is TestMain for a package whose tests share one control plane (starting one takes
// seconds): it runs the tests, then the functions given to AtExit, newest first, prints the
// end of every component's log if the package failed, and stops the control plane. The
// control plane, built from opts, starts when a test first calls Shared.
func Main(m *testing.M, opts Options) {
	shared.mainRan, shared.opts = true, opts
	code := m.Run()
	os.Exit(finish(code))
}

func finish(code int) int {
	failed := code != 0
	shared.mu.Lock()
	atExit := slices.Clone(shared.atExit)
	shared.finished = true
	shared.mu.Unlock()
	for _, fn := range slices.Backward(atExit) {
		fn(failed)
	}
	if shared.cp != nil {
		if failed {
			fmt.Fprintf(os.Stderr, "shared control plane logs:\n%s", shared.cp.TailLogs(logTailLines))
		}
		if err := shared.cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop the shared control plane: %v\n", err)
			code = 1
		}
	}
	if err := RemoveWorkDir(); err != nil {
		fmt.Fprintf(os.Stderr, "remove %s: %v\n", workDir, err)
	}
	return code
}

// AtExit has Main call fn after the package's tests, before it stops the shared control plane:
// for what a package starts once on top of it, such as an operator process. failed tells
// whether the package failed, for failure reports.
func AtExit(fn func(failed bool)) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.finished {
		panic("testenv.AtExit after the tests ended")
	}
	shared.atExit = append(shared.atExit, fn)
}

// Shared returns the package's control plane, starting it on first use. It skips the test with
// -short and fails it when the control plane cannot start, missing binaries included: CI
// always builds them first.
func Shared(t testing.TB) *ControlPlane {
	t.Helper()
	if !shared.mainRan {
		t.Fatal("testenv.Shared needs testenv.Main in the package's TestMain")
	}
	skipShort(t)
	shared.once.Do(func() {
		shared.cp, shared.err = Start(context.Background(), shared.opts)
		if shared.err == nil {
			t.Logf("shared control plane (%s) started in %s", shared.cp.Mode(), shared.cp.StartedIn.Round(time.Millisecond))
		}
	})
	if shared.err != nil {
		t.Fatalf("shared control plane: %v", shared.err)
	}
	return shared.cp
}

// StartT starts a control plane of the test's own, for a test that must not share one (it
// stops it, or changes it for good), and stops it in t.Cleanup; a failed test also gets the
// end of every component's log. It skips the test with -short.
func StartT(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	skipShort(t)
	cp, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Logf("control plane (%s) started in %s; KUBECONFIG=%s", cp.Mode(), cp.StartedIn.Round(time.Millisecond), cp.KubeconfigPath)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane logs:\n%s", cp.TailLogs(logTailLines))
		}
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	return cp
}

func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane (not with -short)")
	}
}

// Eventually waits until cond holds, asking every DefaultInterval, and fails the test after
// timeout with cond's last error, which should say what the state was.
func Eventually(t testing.TB, timeout time.Duration, what string, cond Condition) {
	t.Helper()
	if err := Poll(t.Context(), timeout, DefaultInterval, what, cond); err != nil {
		t.Fatal(err)
	}
}

// NewNamespace creates a namespace named after the test and deletes it when the test ends.
func NewNamespace(t testing.TB, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: namespacePrefix(t.Name())}}
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	return ns.Name
}

var notDNSLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// namespacePrefix turns a test name into a namespace's GenerateName: a DNS label short enough
// for the five random characters the apiserver adds.
func namespacePrefix(test string) string {
	p := strings.Trim(notDNSLabel.ReplaceAllString(strings.ToLower(test), "-"), "-")
	if len(p) > 40 {
		p = strings.TrimLeft(p[len(p)-40:], "-")
	}
	if p == "" {
		p = "test"
	}
	return p + "-"
}

// Fixture is what a test package builds once on the shared control plane (clients, an
// operator, namespaces) before its first test: Use starts it on first call, and every later
// call, from any test, gets the same outcome.
type Fixture struct {
	// Name says whose fixture failed.
	Name string
	// Start builds the fixture on the shared control plane.
	Start func(cp *ControlPlane) error

	once sync.Once
	err  error
}

// Use returns the shared control plane once the fixture stands on it, failing the test
// when it could not be built.
func (f *Fixture) Use(t testing.TB) *ControlPlane {
	t.Helper()
	cp := Shared(t)
	f.once.Do(func() { f.err = f.Start(cp) })
	if f.err != nil {
		t.Fatalf("%s: %v", f.Name, f.err)
	}
	return cp
}
