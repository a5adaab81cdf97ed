package conversion

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// gzipped packs plain the way encodePreserved does for large values.
func gzipped(t *testing.T, plain string) string {
	t.Helper()
	var zipped bytes.Buffer
	zw, err := gzip.NewWriterLevel(&zipped, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write([]byte(plain)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return gzipPrefix + base64.StdEncoding.EncodeToString(zipped.Bytes())
}

// repeated is a preserved-fields document whose shell runner holds count copies of item, joined
// by commas, inside open and close.
func repeated(open, item, closing string, count int) string {
	var b strings.Builder
	b.WriteString(`{"v":2,"spec":"x","status":"y","patch":{"spec":{"runner":{"shell":` + open)
	for i := range count {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strings.ReplaceAll(item, "%d", fmt.Sprint(i)))
	}
	b.WriteString(closing + `}}}}`)
	return b.String()
}

// TestAnnotationBombsAreRefused: an annotation of millions of tiny values, a few KiB once
// gzipped, took the webhook 54 s and 4.5 GiB of heap before values were counted.
// It must fail the conversion at once, naming the annotation.
func TestAnnotationBombsAreRefused(t *testing.T) {
	cases := []struct {
		name  string
		value func(t *testing.T) string
	}{
		{"gzipped list of 2.5M empty objects (7.5 MiB)", func(t *testing.T) string {
			return gzipped(t, repeated(`{"env":[`, `{}`, `]}`, 2_500_000))
		}},
		{"gzipped object of 500k keys", func(t *testing.T) string {
			return gzipped(t, repeated(`{`, `"k%d":1`, `}`, 500_000))
		}},
		{"plain list of 100k numbers", func(*testing.T) string {
			return repeated(`{"args":[`, `1`, `]}`, 100_000)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := map[string]any{
				"apiVersion": "example.com/v1alpha1", "kind": "Task",
				"metadata": map[string]any{"name": "bomb", "namespace": "ns",
					"annotations": map[string]any{PreservedAnnotation: tc.value(t)}},
				"spec": map[string]any{"type": "shell", "shell": "echo", "replicas": int64(1), "maxRetry": int64(0)},
			}
			_, err := Convert(obj, hubVersion)
			if err == nil {
				t.Fatal("converted; want the annotation refused")
			}
			if msg := err.Error(); !strings.Contains(msg, PreservedAnnotation) || !strings.Contains(msg, "JSON values") {
				t.Fatalf("error %q does not name the annotation and its size", msg)
			}
		})
	}
}

// TestValidAnnotationsStayFarBelowTheValueBound: the bound must never refuse what the converter
// itself writes; the fullest Task there is, every list at its maxItems, stays below a quarter.
func TestValidAnnotationsStayFarBelowTheValueBound(t *testing.T) {
	hub := hubObject(t, maximalShell(64))
	spoke := mustConvert(t, hub, alpha)
	p, ok, err := decodePreserved(preservedValue(spoke))
	if err != nil || !ok || p == nil {
		t.Fatalf("decodePreserved of the converter's own annotation: ok=%t err=%v", ok, err)
	}
	raw, err := unpackPreserved(preservedValue(spoke))
	if err != nil {
		t.Fatal(err)
	}
	if n := countJSONValues(raw); n > maxPreservedValues/4 {
		t.Fatalf("the maximal Task's annotation holds %d values, too close to the bound %d", n, maxPreservedValues)
	}
}

// TestCountJSONValues pins the counting rules the bound relies on.
func TestCountJSONValues(t *testing.T) {
	cases := map[string]int{
		`1`:                          1,
		`[]`:                         2, // overcounts an empty container by one: harmless
		`[1,2,3]`:                    4,
		`{"a":1,"b":[1,2]}`:          5,
		`{"a":"x,y[{"}`:              2,
		`{"a":"quote \" , ["}`:       2,
		`{"a":"backslash \\","b":1}`: 3,
	}
	for text, want := range cases {
		if got := countJSONValues([]byte(text)); got != want {
			t.Errorf("countJSONValues(%s) = %d, want %d", text, got, want)
		}
	}
}

// forgedLeaves is a preserved-fields annotation whose patch holds n keys no Task has, under part
// (spec or status): n hidden "fields" for restoreHidden to try one by one.
func forgedLeaves(part string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"v":2,"spec":"x","status":"y","patch":{%q:{`, part)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":0`, i)
	}
	b.WriteString(`}}}`)
	return b.String()
}

// TestForgedAnnotationKeysCostBoundedWork: a client writing at an old version sends an annotation of
// a few thousand unknown keys (well under maxPreservedValues and the 256 KiB annotation limit)
// with a large visible field. restoreHidden then re-encodes and re-decodes the whole body once per
// key (the "keep the others, one by one" fallback): 2,000 keys and a 64 KiB script took 4 s of
// CPU and gigabytes of allocation; 19,000 keys and a 2 MiB status.lastError (the apiserver
// converts before it validates, so only its 3 MiB request limit applies) take tens of minutes.
// One write by anyone allowed to update a Task pins a webhook replica. The work must not grow
// with the number of keys a client invents.
func TestForgedAnnotationKeysCostBoundedWork(t *testing.T) {
	cases := []struct {
		name, part string
		spec       map[string]any
		status     map[string]any
	}{
		{"spec keys, 64 KiB script", "spec",
			map[string]any{"type": "shell", "shell": strings.Repeat("e", 64<<10), "replicas": int64(1), "maxRetry": int64(0)}, nil},
		{"status keys, 256 KiB lastError", "status",
			map[string]any{"type": "shell", "shell": "echo", "replicas": int64(1), "maxRetry": int64(0)},
			map[string]any{"lastError": strings.Repeat("e", 256<<10)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := map[string]any{
				"apiVersion": "example.com/v1alpha1", "kind": "Task",
				"metadata": map[string]any{"name": "slow", "namespace": "ns",
					"annotations": map[string]any{PreservedAnnotation: forgedLeaves(tc.part, 1000)}},
				"spec": tc.spec,
			}
			if tc.status != nil {
				obj["status"] = tc.status
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, _ = Convert(obj, hubVersion) // refused or converted: either is fine, cheaply
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s: %v, %d MiB allocated", tc.name, took, allocated>>20)
			if limit := uint64(64 << 20); allocated > limit {
				t.Fatalf("converting one object with a forged annotation of 1,000 keys allocated %d MiB (took %v); want under %d MiB",
					allocated>>20, took, limit>>20)
			}
		})
	}
}

// TestPreservedEncodesAsEncodingJSON holds the annotation's hand-written encoding to what a
// json.Encoder without HTML escaping writes for the struct: an older release wrote (and a newer
// one reads) the same bytes.
func TestPreservedEncodesAsEncodingJSON(t *testing.T) {
	for _, p := range []*preserved{
		{Format: preservedFormat},
		{Format: preservedFormat, SpecFingerprint: "abc", StatusFingerprint: "<&>", Patch: body{}},
		{Format: 7, Owners: map[path]string{"status.lastJob.name": "1", "spec.runner.http.url": "2"},
			Patch: body{"spec": map[string]any{"timeout": "5m", "env": []any{map[string]any{"name": "A", "value": "<b> & \u2028"}}}, "status": nil}},
		{Format: preservedFormat, Owners: map[path]string{}, Patch: body{"spec": map[string]any{"x": 1.5, "y": int64(-3), "z": true}}},
	} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(p); err != nil {
			t.Fatal(err)
		}
		got, err := p.appendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if w := bytes.TrimSuffix(want.Bytes(), []byte{'\n'}); !bytes.Equal(got, w) {
			t.Errorf("appendJSON\n got %s\nwant %s", got, w)
		}
	}
}
