package conversion

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestAttackReviewMemoryIsBounded: /convert is served without client authentication, to anyone
// who can reach the webhook Service. The handler checked an object's size only after
// json.Decoder had buffered all of it, read unknown keys whole, and kept every object sent before
// the uid and desiredAPIVersion: one request of 100 MiB grew the heap by 300 MiB or more (a
// replica's limit is 512 MiB). Each must be refused as it streams in, with a failed review naming
// the problem, and the heap must stay bounded.
func TestAttackReviewMemoryIsBounded(t *testing.T) {
	const size = 100 << 20
	chunk := strings.Repeat("x", 1<<20)
	filler := func(w io.Writer) {
		for range size >> 20 {
			_, _ = io.WriteString(w, chunk)
		}
	}
	task := `{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"x"},"spec":{"runner":{"type":"Shell","shell":{"script":"` +
		strings.Repeat("e", 3<<20) + `"}}}}`
	cases := []struct {
		name  string
		write func(w io.Writer)
		want  string
	}{
		{"one object of 100 MiB", func(w io.Writer) {
			fmt.Fprint(w, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"example.com/v1alpha1","objects":[{"apiVersion":"example.com/v1","kind":"Task","junk":"`)
			filler(w)
			fmt.Fprint(w, `"}]}}`)
		}, "object 0"},
		{"an unknown key of 100 MiB", func(w io.Writer) {
			fmt.Fprint(w, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","junk":"`)
			filler(w)
			fmt.Fprint(w, `","request":{"uid":"u","desiredAPIVersion":"example.com/v1alpha1","objects":[]}}`)
		}, "junk"},
		{"a uid of 100 MiB", func(w io.Writer) {
			fmt.Fprint(w, `{"request":{"desiredAPIVersion":"example.com/v1alpha1","uid":"`)
			filler(w)
			fmt.Fprint(w, `","objects":[]}}`)
		}, "uid"},
		{"33 objects of 3 MiB before the uid", func(w io.Writer) {
			fmt.Fprint(w, `{"request":{"objects":[`)
			for i := range 33 {
				if i > 0 {
					_, _ = io.WriteString(w, ",")
				}
				_, _ = io.WriteString(w, task)
			}
			fmt.Fprint(w, `],"uid":"u","desiredAPIVersion":"example.com/v1"}}`)
		}, "before"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, w := io.Pipe()
			go func() { tc.write(w); _ = w.Close() }()
			runtime.GC()
			var base runtime.MemStats
			runtime.ReadMemStats(&base)
			rec := httptest.NewRecorder()
			peak := sampleHeap(func() {
				NewHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", r))
				_, _ = io.Copy(io.Discard, r) // the client finishes sending
			})
			growth := int64(peak) - int64(base.HeapAlloc)
			var review apix.ConversionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil || review.Response == nil || rec.Code != http.StatusOK {
				t.Fatalf("HTTP %d, not a ConversionReview (%v)", rec.Code, err)
			}
			res := review.Response.Result
			t.Logf("heap grew by %d MiB; result %s: %.200s", growth>>20, res.Status, res.Message)
			if limit := int64(48 << 20); growth > limit {
				t.Errorf("heap grew by %d MiB reading a %d MiB review; want under %d MiB", growth>>20, size>>20, limit>>20)
			}
			if res.Status != "Failure" || !strings.Contains(res.Message, tc.want) {
				t.Errorf("result %s %q, want a Failure naming %q", res.Status, res.Message, tc.want)
			}
		})
	}
}
