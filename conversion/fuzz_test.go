package conversion

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// FuzzConvert feeds arbitrary JSON objects, as any served version, to Convert: it must never
// panic, and a v1 object it can read at an old version must come back byte for byte.
func FuzzConvert(f *testing.F) {
	for _, hub := range []map[string]any{hubObject(f, richHub("echo seed")), hubObject(f, httpHub()), hubObject(f, simpleHub())} {
		seed, _ := json.Marshal(hub)
		f.Add(seed, uint8(0))
	}
	f.Add([]byte(`{"spec":{"runner":{"type":"HTTP","http":{"url":"http://a","headers":[{"name":"a"}]}},"retry":{"maxRetries":1}}}`), uint8(1))
	f.Add([]byte(`{"metadata":{"annotations":{"task.example.com/preserved-v1-fields":"{\"v\":2,\"patch\":{\"spec\":{\"timeout\":5}}}"}},"spec":{"type":"shell","shell":"x"}}`), uint8(2))
	f.Add([]byte(`{"metadata":{"annotations":{"task.example.com/preserved-v1-fields":"gz:H4sI"}},"spec":{}}`), uint8(2))
	versions := servedVersions()
	f.Fuzz(func(t *testing.T, data []byte, from uint8) {
		obj, err := decodeJSON(data)
		if err != nil || obj == nil {
			return
		}
		version := versions[int(from)%len(versions)]
		obj["apiVersion"] = taskGroupPrefix + version
		for _, to := range versions {
			out, err := Convert(deepCopy(obj).(map[string]any), to)
			if err != nil || version != hubVersion || to == hubVersion {
				continue
			}
			back, err := Convert(reencode(t, out), hubVersion)
			if err != nil {
				t.Fatalf("%s read at %s does not convert back: %v", version, to, err)
			}
			requireSameBody(t, "round trip through "+to, obj, back)
		}
	})
}

// FuzzConversionReview feeds arbitrary bytes to the /convert handler: every answer must be a
// ConversionReview with HTTP 200, never a panic.
func FuzzConversionReview(f *testing.F) {
	f.Add(reviewOf(f, "u", "example.com/v1alpha1", hubObject(f, richHub("echo"))))
	f.Add(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"x","desiredAPIVersion":"example.com/v1","objects":[{}]}}`)
	f.Add(`{"request":{"objects":[1,2,3]}}`)
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		NewHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body)))
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d", rec.Code)
		}
		var review apix.ConversionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil || review.Response == nil {
			t.Fatalf("not a ConversionReview (%v): %s", err, rec.Body)
		}
	})
}
