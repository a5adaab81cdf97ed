package conversion

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"

	taskv1 "example.com/task-operator/apis/v1"
)

func serve(t testing.TB, body string) apix.ConversionReview {
	t.Helper()
	rec := httptest.NewRecorder()
	NewHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, want 200 for every answer; body %s", rec.Code, rec.Body)
	}
	var review apix.ConversionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil {
		t.Fatalf("response is not a ConversionReview: %v\n%s", err, rec.Body)
	}
	if review.Response == nil {
		t.Fatalf("response has no response: %s", rec.Body)
	}
	return review
}

func reviewOf(t testing.TB, uid, desired string, objects ...map[string]any) string {
	t.Helper()
	raws := make([]kruntime.RawExtension, len(objects))
	for i, o := range objects {
		data, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		raws[i] = kruntime.RawExtension{Raw: data}
	}
	data, err := json.Marshal(apix.ConversionReview{
		TypeMeta: metav1TypeMeta(),
		Request:  &apix.ConversionRequest{UID: typesUID(uid), DesiredAPIVersion: desired, Objects: raws},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestHandlerConvertsAPage(t *testing.T) {
	hubs := []map[string]any{hubObject(t, richHub("echo a")), hubObject(t, simpleHub()), hubObject(t, httpHub())}
	review := serve(t, reviewOf(t, "u-1", "example.com/v1alpha1", hubs...))
	resp := review.Response
	if resp.UID != "u-1" || resp.Result.Status != "Success" {
		t.Fatalf("uid %q result %+v", resp.UID, resp.Result)
	}
	if len(resp.ConvertedObjects) != len(hubs) {
		t.Fatalf("%d objects back, want %d", len(resp.ConvertedObjects), len(hubs))
	}
	for i, raw := range resp.ConvertedObjects {
		obj, err := decodeJSON(raw.Raw)
		if err != nil {
			t.Fatal(err)
		}
		if obj["apiVersion"] != "example.com/v1alpha1" {
			t.Errorf("object %d is %v", i, obj["apiVersion"])
		}
		requireSameBody(t, "through the handler and back", hubs[i], mustConvert(t, obj, hubVersion))
	}
}

func TestHandlerAnswersFailuresAsReviews(t *testing.T) {
	broken := hubObject(t, simpleHub())
	broken = mustConvert(t, broken, "v1alpha1")
	setAnnotation(broken["metadata"].(map[string]any), PreservedAnnotation, `{"v":2,"spec":`)
	// An annotation as the server writes it, but for a hidden field of the wrong type.
	wrongType := mustConvert(t, hubObject(t, richHub("echo")), "v1alpha1")
	p, _, err := decodePreserved(preservedValue(wrongType))
	if err != nil {
		t.Fatal(err)
	}
	p.Patch["spec"].(map[string]any)["timeout"] = int64(5)
	value, _ := p.encode()
	setAnnotation(wrongType["metadata"].(map[string]any), PreservedAnnotation, value)
	tests := []struct {
		name, body string
		want       []string // substrings of the message
	}{
		{"not JSON", "{{{", []string{"malformed ConversionReview"}},
		{"no request", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`, []string{"no request"}},
		{"unknown version", reviewOf(t, "u", "example.com/v9", hubObject(t, simpleHub())), []string{`"example.com/v9" is not a served version`}},
		{"damaged annotation", reviewOf(t, "u", "example.com/v1", broken), []string{"Task ns/simple", PreservedAnnotation, "not a JSON object"}},
		{"restored field of the wrong type", reviewOf(t, "u", "example.com/v1", wrongType), []string{"Task ns/rich", PreservedAnnotation, "spec.timeout"}},
		{"not a Task", reviewOf(t, "u", "example.com/v1", map[string]any{"apiVersion": "v1", "kind": "Pod"}), []string{"not a served version"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := serve(t, tt.body).Response
			if resp.Result.Status != "Failure" {
				t.Fatalf("result %+v, want a Failure", resp.Result)
			}
			for _, w := range tt.want {
				if !strings.Contains(resp.Result.Message, w) {
					t.Errorf("message %q does not mention %q", resp.Result.Message, w)
				}
			}
		})
	}
}

func TestHandlerAcceptsObjectsBeforeTheUID(t *testing.T) {
	obj, _ := json.Marshal(hubObject(t, simpleHub()))
	body := fmt.Sprintf(`{"request":{"objects":[%s],"desiredAPIVersion":"example.com/v1beta1","uid":"late"},"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1"}`, obj)
	resp := serve(t, body).Response
	if resp.UID != "late" || resp.Result.Status != "Success" || len(resp.ConvertedObjects) != 1 {
		t.Fatalf("got uid %q, result %+v, %d objects", resp.UID, resp.Result, len(resp.ConvertedObjects))
	}
}

// TestHandlerMemoryIsBoundedByOneObject streams a review of hundreds of large Tasks (a LIST
// page at an old version) through the handler and samples the heap: it must stay far below a
// replica's 512 MiB limit however large the page, because objects are converted one at a time.
func TestHandlerMemoryIsBoundedByOneObject(t *testing.T) {
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
		NewHandler().ServeHTTP(&pipeWriter{w: respW, header: http.Header{}}, httptest.NewRequest(http.MethodPost, "/convert", reqBody))
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
	task := richHub(strings.Repeat("echo script; ", 4000))
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

// TestMetricLabelsComeFromServedVersionsOnly: whatever desiredAPIVersion a request names, the
// metrics get one of the served versions or "unknown", so a client cannot mint label values.
func TestMetricLabelsComeFromServedVersionsOnly(t *testing.T) {
	for i := range 5 {
		serve(t, reviewOf(t, "u", fmt.Sprintf("example.com/v%d-made-up", i), hubObject(t, simpleHub())))
	}
	labels := map[string]bool{}
	for _, c := range []prometheus.Collector{requestsTotal, requestDuration, objectsTotal, objectDuration} {
		ch := make(chan prometheus.Metric, 100)
		c.Collect(ch)
		close(ch)
		for m := range ch {
			var pb dto.Metric
			if err := m.Write(&pb); err != nil {
				t.Fatal(err)
			}
			for _, l := range pb.GetLabel() {
				if l.GetName() == "to" || l.GetName() == "from" {
					labels[l.GetValue()] = true
				}
			}
		}
	}
	for v := range labels {
		if v != "unknown" && !known(v) {
			t.Errorf("metric label value %q is not a served version", v)
		}
	}
	if !labels["unknown"] {
		t.Errorf("made-up versions were not counted as unknown: %v", labels)
	}
}

// TestMetadataNullIsNotAnObject: metadata that is null is no object, for the handler
// that keeps managedFields raw as for Convert (the handler before it answered "metadata is not
// an object"), rather than an empty metadata the apiserver would get back.
func TestMetadataNullIsNotAnObject(t *testing.T) {
	obj := `{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":null,"spec":{"type":"shell","shell":"x"}}`
	for _, to := range []string{"example.com/v1", "example.com/v1beta1"} {
		body := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"` + to + `","objects":[` + obj + `]}}`
		review := serve(t, body)
		if review.Response.Result.Status != "Failure" || !strings.Contains(review.Response.Result.Message, "metadata is not an object") {
			t.Errorf("to %s: result %+v, converted %d; want metadata is not an object", to, review.Response.Result, len(review.Response.ConvertedObjects))
		}
	}
}

// TestManagedFieldsComeBackAsSent: the raw managedFields the handler no longer decodes
// come back meaning what was sent, at every version, with the keys of fieldsV1 (k:{...} with
// escaped quotes, HTML characters, non-ASCII) intact.
func TestManagedFieldsComeBackAsSent(t *testing.T) {
	mf := `[{"manager":"a<b>&c","operation":"Apply","apiVersion":"example.com/v1","time":"2030-01-02T03:04:05Z","fieldsType":"FieldsV1",` +
		`"fieldsV1":{"f:metadata":{"f:labels":{"f:é\u2028":{}}},"f:spec":{"f:runner":{"f:http":{"f:headers":{"k:{\"name\":\"<x>&\"}":{".":{},"f:name":{}}}}}}}},` +
		`{"manager":"s","operation":"Update","apiVersion":"example.com/v1alpha1","subresource":"status","fieldsType":"FieldsV1","fieldsV1":{"f:status":{".":{},"f:state":{}}}}]`
	hub := hubObject(t, httpHub())
	var want any
	if err := json.Unmarshal([]byte(mf), &want); err != nil {
		t.Fatal(err)
	}
	hub["metadata"].(map[string]any)["managedFields"] = want
	raw, _ := json.Marshal(hub)
	for _, to := range []string{"example.com/v1alpha1", "example.com/v1beta1", "example.com/v1"} {
		review := serve(t, `{"request":{"uid":"u","desiredAPIVersion":"`+to+`","objects":[`+string(raw)+`]}}`)
		if review.Response.Result.Status != "Success" || len(review.Response.ConvertedObjects) != 1 {
			t.Fatalf("to %s: %+v", to, review.Response.Result)
		}
		var got struct {
			Metadata struct {
				ManagedFields any `json:"managedFields"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(review.Response.ConvertedObjects[0].Raw, &got); err != nil {
			t.Fatal(err)
		}
		g, _ := json.Marshal(got.Metadata.ManagedFields)
		w, _ := json.Marshal(want)
		if !bytes.Equal(g, w) {
			t.Errorf("to %s: managedFields\n got %s\nwant %s", to, g, w)
		}
	}
}

var requestName = regexp.MustCompile(`"t[0-9]+-[0-9]+-`)

// TestPooledBuffersKeepRequestsApart: requests served at once, of sizes on both sides
// of the pooled 64 KiB buffers, some cut short mid-object, each get their own objects back and
// nothing of another request.
func TestPooledBuffersKeepRequestsApart(t *testing.T) {
	h := NewHandler()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				name := fmt.Sprintf("t%d-%d-%s", g, i, strings.Repeat("y", (g*9973+i*7919)%90000))
				obj := fmt.Sprintf(`{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":{"name":%q,"managedFields":[{"manager":%q}]},"spec":{"type":"shell","shell":%q}}`, name, name, name)
				body := `{"request":{"uid":"u","desiredAPIVersion":"example.com/v1","objects":[` + obj + `]}}`
				cut := i%5 == 0
				if cut {
					body = body[:len(body)/2]
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body)))
				out := rec.Body.String()
				others := len(requestName.FindAllString(out, -1)) - strings.Count(out, `"`+name)
				switch {
				case cut && (!strings.Contains(out, `"Failure"`) || strings.Contains(out, `"convertedObjects":[{`)):
					errs <- fmt.Errorf("request %d/%d cut short: %.300s", g, i, out)
					return
				case !cut && (strings.Count(out, name) != 3 || others != 0 || !strings.Contains(out, `"Success"`)):
					errs <- fmt.Errorf("request %d/%d: %.300s", g, i, out)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestReviewMemoryIsBounded: /convert is served without client authentication, to anyone
// who can reach the webhook Service. The handler checked an object's size only after
// json.Decoder had buffered all of it, read unknown keys whole, and kept every object sent before
// the uid and desiredAPIVersion: one request of 100 MiB grew the heap by 300 MiB or more (a
// replica's limit is 512 MiB). Each must be refused as it streams in, with a failed review naming
// the problem, and the heap must stay bounded.
func TestReviewMemoryIsBounded(t *testing.T) {
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
