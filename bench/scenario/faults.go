package scenario

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/bench/harness"
	"example.com/task-operator/internal/testenv"
)

// leaseName is the operator's default --leader-election-id.
const leaseName = "task-operator.example.com"

// kill SIGKILLs the single operator s.Reps times at random moments while s.Tasks Tasks are
// created and run, restarting it each time, then counts what must never happen
// (checkInvariants).
func kill(ctx context.Context, e *harness.Env, s Size, r *Result) error {
	const ns = "bench-kill"
	if err := e.EnsureNamespace(ctx, ns); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x6b696c6c))
	tr := e.Track(ctx, ns)
	defer tr.Stop()
	began := time.Now()
	createCtx, cancelCreate := context.WithTimeout(ctx, timeoutFor(s.Tasks, 5*time.Minute, time.Second))
	defer cancelCreate()
	var retries int64
	var createErr error
	created := make(chan struct{})
	go func() {
		defer close(created)
		// While the operator is down its webhooks are too: creates fail and are retried.
		retries, createErr = e.CreateTasks(createCtx, ns, "k", s.Tasks, min(e.Workers, 8), true, nil)
	}()

	var restarts []time.Duration
	duringRun := 0
	for i := range s.Reps {
		gap := time.Duration(rng.Int64N(int64(2*s.Gap) + 1))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(gap):
		}
		if _, term, _ := tr.Counts(); term < s.Tasks {
			duringRun++
		}
		ops := e.Operators()
		if len(ops) == 0 {
			return errors.New("no operator running")
		}
		e.Logf("kill %d/%d: SIGKILL pid %d after %s", i+1, s.Reps, ops[0].PID(), gap.Round(time.Millisecond))
		if err := e.KillOperator(ops[0]); err != nil {
			return err
		}
		t := time.Now()
		if _, err := e.StartOperator(ctx, "replica-0", false); err != nil {
			return fmt.Errorf("restart after kill %d: %w", i+1, err)
		}
		restarts = append(restarts, time.Since(t))
	}
	<-created
	if createErr != nil {
		return createErr
	}
	waitErr := tr.WaitTerminal(ctx, s.Tasks, timeoutFor(s.Tasks, 3*time.Minute, time.Second))
	_, last := tr.Last()
	r.Addf("SIGKILLs", fmt.Sprintf("%d while Tasks were unfinished; seed %d, gaps uniform in [0, %s]", duringRun, s.Seed, 2*s.Gap), "%d", s.Reps)
	r.Addf("restart to serving webhooks", "mean of the restarts; max "+secs(maxDur(restarts)), "%s", secs(meanDur(restarts)))
	r.Addf("creates retried", "webhooks unavailable while the operator was down", "%d", retries)
	r.Addf("Tasks", fmt.Sprintf("all terminal %s after the first create", secs(last)), "%d", s.Tasks)
	r.Addf("scenario wall time", "", "%s", secs(time.Since(began)))
	if err := checkInvariants(ctx, e, ns, s.Tasks, r); err != nil {
		return err
	}
	return waitErr
}

// failover runs two replicas with leader election, SIGKILLs the leader while Tasks are being
// created, and times the takeover.
func failover(ctx context.Context, e *harness.Env, s Size, r *Result) error {
	const ns = "bench-failover"
	if err := e.EnsureNamespace(ctx, ns); err != nil {
		return err
	}
	leader, err := waitLeader(ctx, e, 2*time.Minute)
	if err != nil {
		return err
	}
	lease := &coordinationv1.Lease{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: testenv.OperatorNamespace, Name: leaseName}, lease); err != nil {
		return fmt.Errorf("read lease: %w", err)
	}
	holder := deref(lease.Spec.HolderIdentity)

	tr := e.Track(ctx, ns)
	defer tr.Stop()
	createCtx, cancelCreate := context.WithTimeout(ctx, timeoutFor(s.Tasks, 5*time.Minute, time.Second))
	defer cancelCreate()
	var createErr error
	created := make(chan struct{})
	go func() {
		defer close(created)
		_, createErr = e.CreateTasks(createCtx, ns, "f", s.Tasks, 4, true, nil)
	}()
	// Kill once part of the Tasks has started, so that the leader dies mid-work.
	_ = testenv.Poll(ctx, 30*time.Second, 0, "first Tasks started", func(ctx context.Context) (bool, error) {
		started, _, _ := tr.Counts()
		return started >= max(1, s.Tasks/4), nil
	})
	var survivor *testenv.Operator
	for _, o := range e.Operators() {
		if o != leader {
			survivor = o
		}
	}
	e.Logf("SIGKILL leader %s (pid %d)", leader.Name(), leader.PID())
	killedAt := time.Now()
	if err := e.KillOperator(leader); err != nil {
		return err
	}
	// The takeover times are figures of the report: asked every 100 ms, they are that precise.
	var holderChanged, leading time.Duration
	err = testenv.Poll(ctx, 2*time.Minute, 100*time.Millisecond, "takeover", func(ctx context.Context) (bool, error) {
		if holderChanged == 0 {
			l := &coordinationv1.Lease{}
			if err := e.Client.Get(ctx, client.ObjectKey{Namespace: testenv.OperatorNamespace, Name: leaseName}, l); err == nil &&
				deref(l.Spec.HolderIdentity) != holder && deref(l.Spec.HolderIdentity) != "" {
				holderChanged = time.Since(killedAt)
			}
		}
		if leading == 0 {
			if ok, _ := survivor.IsLeader(ctx); ok {
				leading = time.Since(killedAt)
			}
		}
		return holderChanged > 0 && leading > 0, nil
	})
	if err != nil {
		return err
	}
	r.Addf("takeover: Lease holder changed", fmt.Sprintf("after SIGKILL of the leader; leaseDurationSeconds %d", deref32(lease.Spec.LeaseDurationSeconds)), "%s", secs(holderChanged))
	r.Addf("takeover: survivor reports leading", "leader_election_master_status = 1", "%s", secs(leading))
	<-created
	if createErr != nil {
		return createErr
	}
	waitErr := tr.WaitTerminal(ctx, s.Tasks, timeoutFor(s.Tasks, 3*time.Minute, time.Second))
	if err := checkInvariants(ctx, e, ns, s.Tasks, r); err != nil {
		return err
	}
	if _, err := e.StartOperator(ctx, "replica-restarted", true); err != nil {
		return errors.Join(waitErr, err)
	}
	return waitErr
}

func waitLeader(ctx context.Context, e *harness.Env, timeout time.Duration) (*testenv.Operator, error) {
	var leader *testenv.Operator
	err := testenv.Poll(ctx, timeout, 0, "a leader", func(ctx context.Context) (bool, error) {
		for _, o := range e.Operators() {
			if ok, _ := o.IsLeader(ctx); ok {
				leader = o
				return true, nil
			}
		}
		return false, nil
	})
	return leader, err
}

// rolling restarts the two replicas one after the other (out of the proxy, SIGTERM, drained,
// started again) while a client reads Tasks at v1alpha1 in a loop: every read goes through a
// conversion webhook call.
func rolling(ctx context.Context, e *harness.Env, s Size, r *Result) error {
	const ns = "bench-rolling"
	if err := e.EnsureNamespace(ctx, ns); err != nil {
		return err
	}
	if err := runTasks(ctx, e, ns, "r", s.Tasks); err != nil {
		return err
	}

	res := e.Dyn.Resource(taskv1.ResourceAt("v1alpha1")).Namespace(ns)
	readCtx, stopReading := context.WithCancel(ctx)
	var reads, failed atomic.Int64
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; readCtx.Err() == nil; i++ {
			var err error
			if i%2 == 0 {
				_, err = res.List(readCtx, metav1.ListOptions{})
			} else {
				_, err = res.Get(readCtx, harness.TaskName("r", i/2%s.Tasks), metav1.GetOptions{})
			}
			if readCtx.Err() != nil {
				return
			}
			reads.Add(1)
			if err != nil {
				failed.Add(1)
				mu.Lock()
				if len(failures) < 3 {
					failures = append(failures, err.Error())
				}
				mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	defer func() { stopReading(); wg.Wait() }()
	time.Sleep(2 * time.Second)
	var restarts []time.Duration
	for _, o := range e.Operators() {
		e.Logf("rolling: stopping %s (pid %d)", o.Name(), o.PID())
		began := time.Now()
		if err := e.StopOperator(o); err != nil {
			return err
		}
		if _, err := e.StartOperator(ctx, o.Name(), true); err != nil {
			return err
		}
		restarts = append(restarts, time.Since(began))
		time.Sleep(2 * time.Second)
	}
	time.Sleep(2 * time.Second)
	stopReading()
	wg.Wait()
	r.Addf("replicas restarted", "SIGTERM, drain 2 s, start, wait until serving; mean "+secs(meanDur(restarts)), "%d", len(restarts))
	r.Addf("reads at v1alpha1", "LIST and GET alternately, every 20 ms", "%d", reads.Load())
	mu.Lock()
	defer mu.Unlock()
	r.Violation("failed reads", int(failed.Load()), fmt.Sprint(failures))
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func deref32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func meanDur(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t / time.Duration(len(ds))
}

func maxDur(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}
