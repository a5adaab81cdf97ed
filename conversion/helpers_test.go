package conversion

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/google/go-cmp/cmp"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"

	taskv1 "example.com/task-operator/apis/v1"
)

// rawOf encodes a typed object as the apiserver holds it: decoded JSON with int64 numbers.
func rawOf(t testing.TB, typed any) map[string]any {
	t.Helper()
	data, err := json.Marshal(typed)
	if err != nil {
		t.Fatalf("encode %T: %v", typed, err)
	}
	m, err := decodeJSON(data)
	if err != nil {
		t.Fatalf("decode %T: %v", typed, err)
	}
	return m
}

// mustConvert converts obj to version and fails the test on error.
func mustConvert(t testing.TB, obj map[string]any, version string) map[string]any {
	t.Helper()
	out, err := Convert(deepCopy(obj).(map[string]any), version)
	if err != nil {
		t.Fatalf("convert %s to %s: %v", obj["apiVersion"], version, err)
	}
	// What the apiserver receives is JSON: check the result survives encoding as it is.
	return reencode(t, out)
}

func reencode(t testing.TB, obj map[string]any) map[string]any {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	m, err := decodeJSON(data)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return m
}

// respell rewrites values of a hub object in spellings other than the ones encoding/json picks,
// as a client may write them: durations as "5m" or "300s", explicit zero values, timestamps with
// fractions. A byte-exact round trip must keep every one of them.
func respell(rnd *rand.Rand, obj map[string]any) {
	spec, _ := obj["spec"].(map[string]any)
	status, _ := obj["status"].(map[string]any)
	for _, p := range []path{"spec.timeout", "spec.runner.http.timeout", "spec.retry.backoff.initial", "spec.retry.backoff.max"} {
		if v, ok := lookup(obj, p); ok && rnd.IntN(2) == 0 {
			setAt(obj, p, respellDuration(rnd, v.(string)))
		}
	}
	zeroes := []struct {
		in    map[string]any
		key   string
		value any
	}{
		{spec, "suspend", false},
		{status, "lastError", ""},
		{status, "attempts", int64(0)},
		{status, "missedRuns", int64(0)},
		{status, "observedGeneration", int64(0)},
	}
	for _, z := range zeroes {
		if _, ok := z.in[z.key]; z.in != nil && !ok && rnd.IntN(3) == 0 {
			z.in[z.key] = z.value
		}
	}
	for _, p := range []path{"spec.runner.shell", "spec.runner.http"} {
		if m, ok := lookup(obj, p); ok && rnd.IntN(3) == 0 {
			for _, list := range []string{"env", "headers", "acceptedStatusCodes"} {
				if _, has := m.(map[string]any)[list]; !has && (list == "env") == (p == "spec.runner.shell") {
					m.(map[string]any)[list] = []any{}
				}
			}
		}
	}
	if v, ok := lookup(obj, "status.startTime"); ok && rnd.IntN(2) == 0 {
		ts, _ := time.Parse(time.RFC3339, v.(string))
		setAt(obj, "status.startTime", ts.Format("2006-01-02T15:04:05.000Z07:00"))
	}
}

func respellDuration(rnd *rand.Rand, s string) string {
	d, err := time.ParseDuration(s)
	if err != nil {
		return s
	}
	switch {
	case d%time.Hour == 0 && d != 0 && rnd.IntN(2) == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0 && d != 0 && rnd.IntN(2) == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	default:
		return fmt.Sprintf("%dms", d/time.Millisecond)
	}
}

func setAt(doc map[string]any, p path, v any) {
	keys := p.keys()
	cur := doc
	for _, k := range keys[:len(keys)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	cur[keys[len(keys)-1]] = v
}

// hubObject is a hub Task as decoded JSON with apiVersion and kind set.
func hubObject(t testing.TB, task *taskv1.Task) map[string]any {
	t.Helper()
	task = task.DeepCopy()
	task.APIVersion, task.Kind = taskv1.GroupVersion.String(), taskv1.Kind
	return rawOf(t, task)
}

func requireSameBody(t testing.TB, what string, want, got map[string]any) {
	t.Helper()
	if diff := cmp.Diff(bodyOf(want), bodyOf(got)); diff != "" {
		t.Fatalf("%s: body changed (-want +got):\n%s", what, diff)
	}
}

// decodeInto decodes decoded JSON into a typed object.
func decodeInto(t testing.TB, obj map[string]any, typed any) {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	if err := json.Unmarshal(data, typed); err != nil {
		t.Fatalf("decode into %T: %v", typed, err)
	}
}

func metav1TypeMeta() metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apix.SchemeGroupVersion.String(), Kind: "ConversionReview"}
}

func typesUID(s string) types.UID { return types.UID(s) }
