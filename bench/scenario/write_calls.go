package scenario

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/bench/harness"
	"example.com/task-operator/internal/testenv"
)

// callsNS holds the probed Tasks: created at v1 and written at v1 as the operator writes them,
// they are also the objects the call floor reads.
const callsNS = "bench-calls"

// The per-path, per-history matrix of #13 (updates, server-side apply and writes at v1alpha1,
// on Tasks created at v1alpha1, before and after migrate.Run) answered a one-off question; its
// table stays in docs/benchmarks.md and migrate's tests pin the managedFields move it measured.
// What stays is the figure every later run is read against: conversion calls per write at v1.

func createAtV1(ctx context.Context, up *testenv.Upgrade, name string, i int) error {
	obj := testenv.V1alpha1Task(callsNS, name, i)
	obj.SetAPIVersion("example.com/v1")
	obj.Object["spec"] = map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": fmt.Sprintf("echo %d", i)}}}
	_, err := up.Tasks("v1", callsNS).Create(ctx, obj, metav1.CreateOptions{})
	return err
}

// patchStatusAtV1 writes a value new to the Task: an update that changes nothing is never
// written to etcd, and so costs the watch caches no conversion.
func patchStatusAtV1(ctx context.Context, up *testenv.Upgrade, name string, i int) error {
	patch := fmt.Appendf(nil, `{"status":{"lastError":"probe %d"}}`, i)
	_, err := up.Tasks("v1", callsNS).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// probeWrites creates k Tasks at v1 and patches each one's status at v1, one write at a time
// and nothing else writing Tasks meanwhile, and reports the conversion calls each costs and
// the apiserver's timing of those calls.
func probeWrites(ctx context.Context, e *harness.Env, up *testenv.Upgrade, k int, r *Result) error {
	if err := e.EnsureNamespace(ctx, callsNS); err != nil {
		return err
	}
	var all harness.Histogram
	for _, w := range []struct {
		what  string
		write func(ctx context.Context, up *testenv.Upgrade, name string, i int) error
	}{
		{"create at v1", createAtV1},
		{"status merge patch at v1", patchStatusAtV1},
	} {
		calls, err := measureCalls(ctx, e, up, k, r, w.what, func(ctx context.Context, i int) error {
			return w.write(ctx, up, probeName(i), i)
		})
		if err != nil {
			return err
		}
		all.Add(calls)
	}
	r.Addf("conversion call, apiserver p50 / p99, one write at a time", fmt.Sprintf("%.0f calls of the write probe; mean %.2f ms", all.Count, 1000*all.Sum/max(all.Count, 1)),
		"%.2f ms / %.2f ms", 1000*all.Quantile(0.5), 1000*all.Quantile(0.99))
	return nil
}

func probeName(i int) string { return fmt.Sprintf("calls-v1-%03d", i) }

// ranProbeName names the i-th Task that the floor probe also reads with a finished run's status.
func ranProbeName(i int) string { return fmt.Sprintf("calls-ran-%03d", i) }

// finishedRunAtV1 gives the Task the status the operator writes once a run succeeded: the
// Job's UID, the conditions and the times are v1 fields no old version expresses, so that
// reading the Task at v1alpha1 keeps them in the preserved annotation (the converter's full
// path) where a Task that hides nothing skips that work.
func finishedRunAtV1(ctx context.Context, up *testenv.Upgrade, name string, i int) error {
	const at = "2030-01-02T03:04:05Z"
	status := map[string]any{
		"phase": "Succeeded", "attempts": 1, "observedGeneration": 1,
		"lastJob":   map[string]any{"name": name + "-1", "uid": fmt.Sprintf("00000000-0000-4000-8000-%012d", i)},
		"startTime": at, "completionTime": at, "lastPhaseTransitionTime": at, "lastSuccessfulTime": at,
		"conditions": []any{map[string]any{"type": taskv1.ConditionReady, "status": "True", "reason": taskv1.ReasonSucceeded,
			"message": "the run succeeded", "lastTransitionTime": at, "observedGeneration": 1}},
	}
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = up.Tasks("v1", callsNS).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// measureCalls runs write for i in [0, k), one after another, and reports the apiserver's
// conversion calls per write, returning their timing.
func measureCalls(ctx context.Context, e *harness.Env, up *testenv.Upgrade, k int, r *Result, what string, write func(ctx context.Context, i int) error) (harness.Histogram, error) {
	stop, err := watchConversions(ctx, e, up)
	if err != nil {
		return harness.Histogram{}, err
	}
	for i := range k {
		if err := write(ctx, i); err != nil {
			return harness.Histogram{}, fmt.Errorf("%s, Task %d: %w", what, i, err)
		}
	}
	load, err := stop()
	if err != nil {
		return harness.Histogram{}, err
	}
	total := load.apiserver.Total()
	r.Addf("conversion calls per write: "+what, load.apiserver.PerObject(k), "%.2f", total.Count/float64(k))
	return total, nil
}
