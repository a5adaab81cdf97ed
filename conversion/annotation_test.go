package conversion

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
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
// gzipped, took the webhook 54 s and 4.5 GiB of heap before values were counted (found by the
// #12 attack). It must fail the conversion at once, naming the annotation.
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
