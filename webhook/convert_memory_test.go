package webhook

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/sample"
)

// TestConvertHandlerMemoryIsBoundedByOneObject streams a review of hundreds of large Tasks (a LIST
// page at an old version) through the handler and samples the heap: it must stay far below a
// replica's 512 MiB limit however large the page, because objects are converted one at a time.
func TestConvertHandlerMemoryIsBoundedByOneObject(t *testing.T) {
	const objects = 400
	big := largeHub(t)
	one, _ := json.Marshal(big)
	total := len(one) * objects

	reqBody, reqW := io.Pipe()
	go func() {
		fmt.Fprint(reqW, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"big","desiredAPIVersion":"example.com/v1alpha1","objects":[`)
		for i := range objects {
			if i > 0 {
				fmt.Fprint(reqW, ",")
			}
			_, _ = reqW.Write(one)
		}
		fmt.Fprint(reqW, `]}}`)
		reqW.Close()
	}()
	respR, respW := io.Pipe()
	var counted atomic.Int64
	var parseErr error
	var wg sync.WaitGroup
	wg.Go(func() { counted.Store(int64(countConverted(respR, &parseErr))) })

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	peak := sampleHeap(func() {
		NewConvertHandler().ServeHTTP(&pipeWriter{w: respW, header: http.Header{}}, httptest.NewRequest(http.MethodPost, "/convert", reqBody))
		respW.Close()
		wg.Wait()
	})
	if parseErr != nil {
		t.Fatalf("response: %v", parseErr)
	}
	if counted.Load() != objects {
		t.Fatalf("%d objects converted, want %d", counted.Load(), objects)
	}
	growth := int64(peak) - int64(base.HeapAlloc)
	t.Logf("review of %d objects, %.1f MiB in: heap grew by at most %.1f MiB (one object is %.0f KiB)",
		objects, float64(total)/(1<<20), float64(growth)/(1<<20), float64(len(one))/(1<<10))
	if limit := int64(64 << 20); growth > limit {
		t.Fatalf("heap grew by %d MiB converting a %d MiB review; want under %d MiB", growth>>20, total>>20, limit>>20)
	}
}

// largeHub is a Task with about 200 KiB of fields v1alpha1 cannot express.
func largeHub(t testing.TB) map[string]any {
	task := sample.RichTask(strings.Repeat("echo script; ", 4000))
	for i := range 48 {
		value := strings.Repeat(fmt.Sprintf("%08x", i*7919), 500)
		task.Spec.Runner.Shell.Env = append(task.Spec.Runner.Shell.Env, taskv1.EnvVar{Name: fmt.Sprintf("V%d", i), Value: value})
	}
	return hubObject(t, task)
}

// countConverted reads a response review from r as a stream and counts its objects.
func countConverted(r io.Reader, errp *error) int {
	dec := json.NewDecoder(r)
	n := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return n
		}
		if err != nil {
			*errp = err
			_, _ = io.Copy(io.Discard, r)
			return n
		}
		if tok == "convertedObjects" {
			if _, err := dec.Token(); err != nil { // [
				*errp = err
				return n
			}
			for dec.More() {
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					*errp = err
					return n
				}
				n++
			}
		}
		if tok == "status" {
			var s string
			if err := dec.Decode(&s); err == nil && s != "Success" {
				*errp = fmt.Errorf("result %s", s)
			}
		}
	}
}

// sampleHeap runs f and returns the highest HeapAlloc seen while it ran.
func sampleHeap(f func()) uint64 {
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	f()
	close(done)
	return peak.Load()
}

type pipeWriter struct {
	w      io.Writer
	header http.Header
}

func (p *pipeWriter) Header() http.Header         { return p.header }
func (p *pipeWriter) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *pipeWriter) WriteHeader(int)             {}

// TestConvertHandlerRefusesOversizedValuesAsTheyStreamIn: /convert is served without client
// authentication, to anyone who can reach the webhook Service. An object's size checked only
// after json.Decoder had buffered all of it, unknown keys read whole, every object sent before
// the uid and desiredAPIVersion kept: one request of 100 MiB grew the heap by 300 MiB or more (a
// replica's limit is 512 MiB). Each must be refused as it streams in, with a failed review
// naming the problem, and the heap must stay bounded.
func TestConvertHandlerRefusesOversizedValuesAsTheyStreamIn(t *testing.T) {
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
				NewConvertHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", r))
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
