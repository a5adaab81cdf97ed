package scenario

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"example.com/task-operator/bench/harness"
)

// profiles takes CPU profiles of this process (the conversion handler, and the migrating
// client) and of the kube-apiserver for window, after delay (past the first LIST pages, into
// the rewrites), into dir. wait returns once both are written.
func profiles(ctx context.Context, e *harness.Env, dir string, delay, window time.Duration) (wait func() error, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	done := make(chan error, 2)
	go func() {
		select {
		case <-ctx.Done():
			done <- ctx.Err()
			done <- ctx.Err()
			return
		case <-time.After(delay):
		}
		go func() { done <- profileSelf(filepath.Join(dir, "bench-process.cpu.pprof"), window) }()
		raw, err := e.Kube.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", fmt.Sprint(int(window.Seconds()))).Timeout(window + time.Minute).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "kube-apiserver.cpu.pprof"), raw, 0o644)
		}
		done <- err
	}()
	return func() error { return errors.Join(<-done, <-done) }, nil
}

func profileSelf(file string, window time.Duration) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return errors.Join(err, f.Close())
	}
	time.Sleep(window)
	pprof.StopCPUProfile()
	return f.Close()
}
