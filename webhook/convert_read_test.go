package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// oddShapeTask is a v1alpha1 Task the handler converts to v1.
const oddShapeTask = `{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":{"name":"a","namespace":"n"},"spec":{"type":"shell","shell":"echo"}}`

// oddShapeRequest is a request object that converts oddShapeTask.
const oddShapeRequest = `{"uid":"u","desiredAPIVersion":"example.com/v1","objects":[` + oddShapeTask + `]}`

// serveBody posts the body read from r and returns the review; HTTP 200 and a
// ConversionReview are required whatever the outcome.
func serveBody(t *testing.T, r io.Reader) (apix.ConversionReview, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	NewConvertHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", r))
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d", rec.Code)
	}
	var review apix.ConversionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil || review.Response == nil {
		t.Fatalf("not a ConversionReview (%v): %.300s", err, rec.Body)
	}
	return review, rec.Body.String()
}

// requireRefused fails unless body, which encoding/json calls invalid, is answered with a
// Failure (objects streamed before the error was found may precede it: the apiserver ignores
// them on a Failure).
func requireRefused(t *testing.T, body string) {
	t.Helper()
	if json.Valid([]byte(body)) {
		t.Fatalf("fixture is valid JSON: %s", body)
	}
	review, _ := serveBody(t, strings.NewReader(body))
	if res := review.Response.Result; res.Status != "Failure" {
		t.Errorf("invalid JSON %.120q... answered %s with %d converted objects (%q)", body, res.Status, len(review.Response.ConvertedObjects), res.Message)
	}
}

// TestReviewRefusesAKeyThatIsNoString: a key must be a string; null, which unmarshals into a
// string without an error, is refused like any other value (json.Decoder: "invalid character
// 'n' looking for beginning of object key string").
func TestReviewRefusesAKeyThatIsNoString(t *testing.T) {
	for name, body := range map[string]string{
		"top level": `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview",null :0,"request":` + oddShapeRequest + `}`,
		"request":   `{"request":{"uid":"u", null` + "\n" + `:"x","desiredAPIVersion":"example.com/v1","objects":[` + oddShapeTask + `]}}`,
	} {
		t.Run(name, func(t *testing.T) { requireRefused(t, body) })
	}
}

// TestReviewRefusesAMemberWithoutItsComma: anything but a comma or the closing brace after a
// member fails the review, at the top level as below it, rather than ending it quietly.
func TestReviewRefusesAMemberWithoutItsComma(t *testing.T) {
	for name, body := range map[string]string{
		"missing comma": `{"request":` + oddShapeRequest + ` "kind":5}`,
		"extra colon":   `{"request":` + oddShapeRequest + `,"k":1 :1}`,
	} {
		t.Run(name, func(t *testing.T) { requireRefused(t, body) })
	}
}

// TestReviewMustEndWithItsClosingBrace: a body cut off (or failing with an I/O error) after the
// request, ending in ']' instead of '}', or followed by garbage or a second review, is no
// review: it fails.
func TestReviewMustEndWithItsClosingBrace(t *testing.T) {
	for name, body := range map[string]string{
		"truncated":       `{"request":` + oddShapeRequest,
		"closed with ]":   `{"request":` + oddShapeRequest + `]`,
		"trailing bytes":  `{"request":` + oddShapeRequest + `}garbage`,
		"two reviews":     `{"request":` + oddShapeRequest + `}{"request":` + oddShapeRequest + `}`,
		"trailing scalar": `{"request":` + oddShapeRequest + `,"k":true}  x`,
	} {
		t.Run(name, func(t *testing.T) { requireRefused(t, body) })
	}
	t.Run("I/O error before the closing brace", func(t *testing.T) {
		r := io.MultiReader(strings.NewReader(`{"request":`+oddShapeRequest), iotest.ErrReader(errors.New("connection reset")))
		review, _ := serveBody(t, r)
		if res := review.Response.Result; res.Status != "Failure" {
			t.Errorf("a body failing with an I/O error was answered %s with %d objects", res.Status, len(review.Response.ConvertedObjects))
		}
	})
}

// TestReviewRefusesAnObjectNestedPastEncodingJSONsLimit: an object nested 10001 levels deep,
// which encoding/json refuses ("exceeded max depth"), fails the review as it always did.
func TestReviewRefusesAnObjectNestedPastEncodingJSONsLimit(t *testing.T) {
	const depth = 10000 // plus the object itself: 10001
	obj := `{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":{"name":"a","namespace":"n"},"x":` +
		strings.Repeat("[", depth) + strings.Repeat("]", depth) + `,"spec":{"type":"shell","shell":"echo"}}`
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(obj), &fields); err == nil {
		t.Fatal("fixture: encoding/json accepts the object")
	}
	review, _ := serveBody(t, strings.NewReader(`{"request":{"uid":"u","desiredAPIVersion":"example.com/v1","objects":[`+obj+`]}}`))
	if res := review.Response.Result; res.Status != "Failure" {
		t.Errorf("an object encoding/json refuses (exceeded max depth) was answered %s with %d converted objects", res.Status, len(review.Response.ConvertedObjects))
	}
}

// TestMalformedReviewMessagesSayWhereInTheReview: a failure found at a closing delimiter names
// the part of the review it was found in ("malformed ConversionReview request: ...").
func TestMalformedReviewMessagesSayWhereInTheReview(t *testing.T) {
	for _, body := range []string{
		`{"request":{"uid":"u" "desiredAPIVersion":"example.com/v1","objects":[]}}`,
		`{"request":{"uid":"u","desiredAPIVersion":"example.com/v1","objects":[` + oddShapeTask + ` ` + oddShapeTask + `]}}`,
	} {
		review, _ := serveBody(t, strings.NewReader(body))
		if res := review.Response.Result; res.Status != "Failure" || !strings.Contains(res.Message, "malformed ConversionReview") {
			t.Errorf("%.60s...: result %s %q, want a Failure saying malformed ConversionReview", body, res.Status, res.Message)
		}
	}
}

// TestTinyObjectsBeforeTheUIDKeepTheHeapBounded: objects sent before the uid are bounded by what
// keeping them costs, not by their bytes alone: 4 MiB of one-byte objects `0`, each kept with
// its own error, grew the heap by about 350 MiB (8 MiB by about 870 MiB, over a replica's 512).
func TestTinyObjectsBeforeTheUIDKeepTheHeapBounded(t *testing.T) {
	const body = 4 << 20
	r, w := io.Pipe()
	go func() {
		_, _ = io.WriteString(w, `{"request":{"objects":[0`)
		chunk := strings.Repeat(",0", 4096)
		for range body / len(chunk) {
			_, _ = io.WriteString(w, chunk)
		}
		_, _ = io.WriteString(w, `],"uid":"u","desiredAPIVersion":"example.com/v1"}}`)
		_ = w.Close()
	}()
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var review apix.ConversionReview
	peak := sampleHeap(func() { review, _ = serveBody(t, r) })
	growth := int64(peak) - int64(base.HeapAlloc)
	t.Logf("heap grew by %d MiB; result %s", growth>>20, review.Response.Result.Status)
	if limit := int64(48 << 20); growth > limit {
		t.Errorf("heap grew by %d MiB reading a %d MiB review of one-byte objects before the uid; want under %d MiB", growth>>20, body>>20, limit>>20)
	}
}

// TestReviewsInOddButValidShapesConvertAlike: valid reviews in odd but legal shapes (escaped
// keys, objects before the uid, white space everywhere, repeated keys, nested unknown values)
// convert exactly as the plain one, however the body is cut into reads: one byte at a time, in
// halves, and with a string full of brackets lying across the 64 KiB buffer at every offset.
func TestReviewsInOddButValidShapesConvertAlike(t *testing.T) {
	plain := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":` + oddShapeRequest + `}`
	want, _ := serveBody(t, strings.NewReader(plain))
	if want.Response.Result.Status != "Success" || len(want.Response.ConvertedObjects) != 1 {
		t.Fatalf("baseline: %+v", want.Response.Result)
	}
	wantObj := want.Response.ConvertedObjects[0].Raw
	tricky := `"z\\\"]}{[\"\\":[{"a":"]}\"\\"},[[],{}],"\u2028\ud800\u00e9",-0,1e400,0.5e-3,null,true]`
	variants := map[string]string{
		"objects first, escaped keys": `{"request":{"objects":[` + oddShapeTask + `],"\u0064esiredAPIVersion":"example.com/v1","\u0075id":"u"},"kind":"ConversionReview"}`,
		"white space everywhere":      " \t\r\n{ \"request\" :\n{ \"uid\" : \"u\" ,\t\"desiredAPIVersion\"\r: \"example.com/v1\" , \"objects\" : [ \n" + oddShapeTask + " \n] } } \n",
		"nested unknown values":       `{` + tricky + `,"request":{` + tricky + `,"uid":"u","desiredAPIVersion":"example.com/v1","objects":[` + oddShapeTask + `]},"n":1}`,
		"duplicate uid, last wins":    `{"request":{"uid":"x","uid":"u","desiredAPIVersion":"example.com/v1","objects":[` + oddShapeTask + `]}}`,
	}
	for pad := 65536 - 200; pad < 65536+8; pad++ {
		variants["across the buffer "+strconv.Itoa(pad)] =
			`{"p":"` + strings.Repeat("p", pad) + `",` + tricky + `,"request":` + oddShapeRequest + `}`
	}
	readers := map[string]func(string) io.Reader{
		"whole":    func(s string) io.Reader { return strings.NewReader(s) },
		"one byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"halves":   func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
		"data+EOF": func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) },
	}
	for name, body := range variants {
		if !json.Valid([]byte(body)) {
			t.Fatalf("fixture %s is invalid", name)
		}
		for rname, reader := range readers {
			if strings.HasPrefix(name, "across") && (rname == "one byte" || rname == "halves") {
				continue
			}
			got, _ := serveBody(t, reader(body))
			if res := got.Response; res.Result.Status != "Success" || res.UID != "u" || len(res.ConvertedObjects) != 1 || !bytes.Equal(res.ConvertedObjects[0].Raw, wantObj) {
				t.Errorf("%s, read %s: uid %q result %+v, %d objects", name, rname, res.UID, res.Result, len(res.ConvertedObjects))
			}
		}
	}
}

// TestAReviewOfAnotherKindIsCountedMalformed: a review whose kind, read after its request
// (keys come in any order), says it is no ConversionReview is counted malformed, not as an
// object the webhook failed to convert (which the runbook reports as a bug).
func TestAReviewOfAnotherKindIsCountedMalformed(t *testing.T) {
	for _, body := range []string{
		`{"request":` + oddShapeRequest + `,"kind":"AdmissionReview"}`,
		`{"request":` + oddShapeRequest + `,"apiVersion":"admission.k8s.io/v1"}`,
		`{"request":` + oddShapeRequest + `,"kind":7}`,
	} {
		malformed := testutil.ToFloat64(convertRequestsTotal.WithLabelValues("v1", "malformed"))
		failed := testutil.ToFloat64(convertRequestsTotal.WithLabelValues("v1", "failure"))
		review, _ := serveBody(t, strings.NewReader(body))
		if res := review.Response.Result; res.Status != "Failure" || !strings.Contains(res.Message, "malformed ConversionReview") {
			t.Errorf("%s: answered %s %q, want a malformed ConversionReview", body, res.Status, res.Message)
		}
		m := testutil.ToFloat64(convertRequestsTotal.WithLabelValues("v1", "malformed")) - malformed
		f := testutil.ToFloat64(convertRequestsTotal.WithLabelValues("v1", "failure")) - failed
		if m != 1 || f != 0 {
			t.Errorf("%s: counted %v malformed and %v failed, want 1 malformed", body, m, f)
		}
	}
}

// TestReviewsThatAreNoTaskConversionFailNamingWhy: a review of another kind or version, one
// without a uid, and an object that is no Task are answered with a Failure whose message names
// the field, never converted as if they were a Task's review; the answer never echoes a review
// version it does not speak. Reviews at apiextensions.k8s.io/v1beta1, and without apiVersion
// and kind, still convert.
func TestReviewsThatAreNoTaskConversionFailNamingWhy(t *testing.T) {
	const head = `"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview",`
	withObject := func(obj string) string {
		return `{` + head + `"request":{"uid":"u","desiredAPIVersion":"example.com/v1","objects":[` + obj + `]}}`
	}
	cases := []struct {
		name, body, wantMessage string // wantMessage "" for a Success
	}{
		{"kind AdmissionReview", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"AdmissionReview","request":` + oddShapeRequest + `}`,
			`malformed ConversionReview: kind: "AdmissionReview" is not a ConversionReview this webhook answers`},
		{"review version foo/v1", `{"apiVersion":"foo/v1","kind":"ConversionReview","request":` + oddShapeRequest + `}`,
			`malformed ConversionReview: apiVersion: "foo/v1" is not a ConversionReview this webhook answers`},
		{"kind after the request", `{"request":` + oddShapeRequest + `,"kind":"AdmissionReview"}`,
			`malformed ConversionReview: kind: "AdmissionReview" is not a ConversionReview`},
		{"kind not a string", `{"kind":7,"request":` + oddShapeRequest + `}`, `malformed ConversionReview: kind: `},
		{"no uid", `{` + head + `"request":{"desiredAPIVersion":"example.com/v1","objects":[` + oddShapeTask + `]}}`,
			`malformed ConversionReview: request.uid is missing`},
		{"empty uid", `{` + head + `"request":{"uid":"","desiredAPIVersion":"example.com/v1","objects":[]}}`,
			`malformed ConversionReview: request.uid is missing`},
		{"object of kind Pod", withObject(strings.Replace(oddShapeTask, `"kind":"Task"`, `"kind":"Pod"`, 1)),
			`Task n/a: kind "Pod" is not Task`},
		{"object without kind", withObject(strings.Replace(oddShapeTask, `"kind":"Task",`, ``, 1)),
			`Task n/a: kind (missing) is not Task`},
		{"object without apiVersion", withObject(strings.Replace(oddShapeTask, `"apiVersion":"example.com/v1alpha1",`, ``, 1)),
			`Task n/a: apiVersion (missing) is not a served version of Task.example.com`},
		{"object apiVersion not a string", withObject(strings.Replace(oddShapeTask, `"example.com/v1alpha1"`, `{"x":1}`, 1)),
			`Task n/a: apiVersion (not a string) is not a served version of Task.example.com`},
		{"review at v1beta1", `{"apiVersion":"apiextensions.k8s.io/v1beta1","kind":"ConversionReview","request":` + oddShapeRequest + `}`, ""},
		{"no apiVersion or kind", `{"request":` + oddShapeRequest + `}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			review, raw := serveBody(t, strings.NewReader(tc.body))
			res := review.Response.Result
			if tc.wantMessage == "" {
				if res.Status != "Success" || len(review.Response.ConvertedObjects) != 1 {
					t.Fatalf("answered %s %q with %d objects, want a Success with one", res.Status, res.Message, len(review.Response.ConvertedObjects))
				}
				return
			}
			if res.Status != "Failure" || !strings.Contains(res.Message, tc.wantMessage) {
				t.Errorf("answered %s %q, want a Failure saying %q", res.Status, res.Message, tc.wantMessage)
			}
			if strings.Contains(res.Message, "%!") {
				t.Errorf("garbled message %q", res.Message)
			}
			if !isReviewAPIVersion(review.APIVersion) {
				t.Errorf("answered as apiVersion %q:\n%s", review.APIVersion, raw)
			}
		})
	}
}

// TestAnObjectTheConverterRefusesIsCountedInvalidNotFailed: a client's write at an old version
// that v1 cannot take (a zero v1alpha1 cannot tell from unset, a value its type cannot decode, a
// damaged preserved annotation) fails the review naming the field, and is counted invalid, not
// as a failure, which pages as a bug or an outage; an object that converts counts as a success.
func TestAnObjectTheConverterRefusesIsCountedInvalidNotFailed(t *testing.T) {
	review := func(obj string) string {
		return `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"example.com/v1","objects":[` + obj + `]}}`
	}
	const meta = `"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":{"name":"t","namespace":"ns","uid":"1"`
	for _, tc := range []struct {
		name, object, field, result string
	}{
		{"replicas 0", `{` + meta + `},"spec":{"type":"shell","shell":"x","replicas":0}}`, "spec.replicas", "invalid"},
		{"replicas 1.5", `{` + meta + `},"spec":{"type":"shell","shell":"x","replicas":1.5}}`, "replicas", "invalid"},
		{"a damaged annotation", `{` + meta + `,"annotations":{"task.example.com/preserved-v1-fields":"{not json"}},"spec":{"type":"shell","shell":"x"}}`, "preserved-v1-fields", "invalid"},
		{"a Task v1 takes", `{` + meta + `},"spec":{"type":"shell","shell":"x"}}`, "", "success"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			count := func(result string) float64 {
				return testutil.ToFloat64(convertRequestsTotal.WithLabelValues("v1", result))
			}
			before := map[string]float64{}
			for _, r := range []string{"success", "invalid", "failure", "malformed"} {
				before[r] = count(r)
			}
			got, _ := serveBody(t, strings.NewReader(review(tc.object)))
			if res := got.Response.Result; (tc.field == "") != (res.Status == "Success") || !strings.Contains(res.Message, tc.field) {
				t.Errorf("answered %s %q, want %s naming %q", res.Status, res.Message, tc.result, tc.field)
			}
			for r, n := range before {
				want := 0.0
				if r == tc.result {
					want = 1
				}
				if d := count(r) - n; d != want {
					t.Errorf("counted %v %s, want %v", d, r, want)
				}
			}
		})
	}
}
