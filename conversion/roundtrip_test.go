package conversion

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/runtime/schema"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/apis/v1beta1"
	"example.com/task-operator/conversion/fuzzer"
	"example.com/task-operator/internal/sample"
)

const roundTrips = 10000

// TestHubRoundTripsAreByteExact reads random v1 Tasks, in random spellings, at each old version
// and converts them back: spec and status must come back exactly as they were, and the
// preserved annotation must not stay behind.
func TestHubRoundTripsAreByteExact(t *testing.T) {
	for _, version := range []string{v1alpha1.GroupVersion.Version, v1beta1.GroupVersion.Version} {
		t.Run(version, func(t *testing.T) {
			f := fuzzer.New(1)
			rnd := rand.New(rand.NewPCG(1, 2))
			for i := range roundTrips {
				task := &taskv1.Task{}
				f.Fill(task)
				hub := hubObject(t, task)
				respell(rnd, hub)
				before := deepCopy(hub).(map[string]any)
				back := mustConvert(t, mustConvert(t, hub, version), hubVersion)
				requireSameBody(t, "round trip", before, back)
				if diff := cmp.Diff(before["metadata"], back["metadata"]); diff != "" {
					t.Fatalf("iteration %d: metadata changed (-want +got):\n%s", i, diff)
				}
				if diff := cmp.Diff(before, hub); diff != "" {
					t.Fatalf("iteration %d: conversion modified its input (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

// TestSpokeRoundTrips converts random old-version Tasks up to v1 and back: what the old version
// says must survive, and nothing may need preserving for a Task that never was at v1 but the
// history limits v1 gives a scheduled Task (kept, so that removing the schedule later keeps them).
func TestSpokeRoundTrips(t *testing.T) {
	t.Run(v1alpha1.GroupVersion.Version, func(t *testing.T) {
		spokeRoundTrip(t, func() *v1alpha1.Task { return &v1alpha1.Task{} }, v1alpha1.GroupVersion.String())
	})
	t.Run(v1beta1.GroupVersion.Version, func(t *testing.T) {
		spokeRoundTrip(t, func() *v1beta1.Task { return &v1beta1.Task{} }, v1beta1.GroupVersion.String())
	})
}

func spokeRoundTrip[S interface{ SetGroupVersionKind(schema.GroupVersionKind) }](t *testing.T, newSpoke func() S, apiVersion string) {
	f := fuzzer.New(3)
	version := apiVersion[len(taskv1.Group)+1:]
	for i := range roundTrips {
		original := newSpoke()
		f.Fill(original)
		obj := rawOf(t, original)
		obj["apiVersion"], obj["kind"] = apiVersion, taskv1.Kind
		if m, ok := obj["metadata"].(map[string]any); ok {
			if a, ok := m["annotations"].(map[string]any); ok {
				delete(a, PreservedAnnotation)
			}
		}
		hub := mustConvert(t, obj, hubVersion)
		back := mustConvert(t, hub, version)
		requireOnlyHistoryLimitsPreserved(t, back)
		got, want := newSpoke(), newSpoke()
		decodeInto(t, back, got)
		decodeInto(t, obj, want)
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("iteration %d: %s Task changed in a round trip (-want +got):\n%s", i, version, diff)
		}
	}
}

func requireOnlyHistoryLimitsPreserved(t *testing.T, spoke map[string]any) {
	t.Helper()
	value := preservedValue(spoke)
	if value == "" {
		return
	}
	p, _, err := decodePreserved(value)
	if err != nil {
		t.Fatal(err)
	}
	limits := map[string]any{"successfulJobsHistoryLimit": int64(taskv1.DefaultSuccessfulJobsHistoryLimit), "failedJobsHistoryLimit": int64(taskv1.DefaultFailedJobsHistoryLimit)}
	if diff := cmp.Diff(body{"spec": limits}, p.Patch); diff != "" {
		t.Fatalf("a Task that never was at v1 needs preserving (-history limits +preserved):\n%s", diff)
	}
	delete(spoke["metadata"].(map[string]any)["annotations"].(map[string]any), PreservedAnnotation)
}

// TestHubPathsKnowEveryField pins hubPaths to the hub's JSON: every path of a fully populated
// Task is in it, and nothing below a leaf is.
func TestHubPathsKnowEveryField(t *testing.T) {
	obj := hubObject(t, sample.RichTask("echo"))
	setAt(obj, "spec.runner.http", map[string]any{"url": "https://a/", "method": "GET", "headers": []any{}, "body": "b", "timeout": "1s", "acceptedStatusCodes": []any{}})
	var walk func(m map[string]any, at path)
	walk = func(m map[string]any, at path) {
		for k, v := range m {
			p := join(at, k)
			if !hubPaths[p] {
				t.Errorf("%s is a field of the hub, missing from hubPaths", p)
			}
			if sub, ok := v.(map[string]any); ok {
				walk(sub, p)
			}
		}
	}
	walk(bodyOf(obj), "")
	for _, p := range []path{"spec.retry.backoff.max", "status.currentRun.job.uid", "status.observedSchedule.since", "status.conditions"} {
		if !hubPaths[p] {
			t.Errorf("%s missing from hubPaths", p)
		}
	}
	for _, p := range []path{"spec.timeout.Duration", "status.startTime.Time", "spec.k1", "metadata", "spec.runner.shell.env.name"} {
		if hubPaths[p] {
			t.Errorf("%s is not a field of the hub, but in hubPaths", p)
		}
	}
}

// TestOwnersAreNeverDefaulted: no default sets the value of an owner (spokeRules.owners), so
// preserve may read the owners' values off the defaulted baseline instead of the pure body. The
// Tasks are random hubs as each spoke reads them, every other one with its owners' values unset
// (the values a default could fill).
func TestOwnersAreNeverDefaulted(t *testing.T) {
	f := fuzzer.New(3)
	for _, version := range []string{v1alpha1.GroupVersion.Version, v1beta1.GroupVersion.Version} {
		s := spokes[version]
		for i := range roundTrips {
			hub := &taskv1.Task{}
			f.Fill(hub)
			if i%2 == 1 {
				hub.Spec.Runner.Type = taskv1.RunnerHTTP
				hub.Spec.Runner.HTTP = &taskv1.HTTPRunner{}
				hub.Status.LastJob = &taskv1.JobReference{}
			}
			_, pure, err := s.down(hub)
			if err != nil {
				t.Fatal(err)
			}
			pureBody, err := toBody(pure)
			if err != nil {
				t.Fatal(err)
			}
			baseline, err := defaultedBody(pure, taskv1.SetFieldDefaults)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(s.rules.ownerPrints(pureBody), s.rules.ownerPrints(baseline)); diff != "" {
				t.Fatalf("%s, Task %d: a default sets an owner's value (-pure +defaulted):\n%s", version, i, diff)
			}
		}
	}
}
