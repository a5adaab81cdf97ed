package conversion

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// TestAttack13MetadataNullIsNotAnObject: metadata that is null is no object, for the handler
// that keeps managedFields raw as for Convert (the handler before it answered "metadata is not
// an object"), rather than an empty metadata the apiserver would get back.
func TestAttack13MetadataNullIsNotAnObject(t *testing.T) {
	obj := `{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":null,"spec":{"type":"shell","shell":"x"}}`
	for _, to := range []string{"example.com/v1", "example.com/v1beta1"} {
		body := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"` + to + `","objects":[` + obj + `]}}`
		review := serve(t, body)
		if review.Response.Result.Status != "Failure" || !strings.Contains(review.Response.Result.Message, "metadata is not an object") {
			t.Errorf("to %s: result %+v, converted %d; want metadata is not an object", to, review.Response.Result, len(review.Response.ConvertedObjects))
		}
	}
}

// TestAttack13ManagedFieldsComeBackAsSent: the raw managedFields the handler no longer decodes
// come back meaning what was sent, at every version, with the keys of fieldsV1 (k:{...} with
// escaped quotes, HTML characters, non-ASCII) intact.
func TestAttack13ManagedFieldsComeBackAsSent(t *testing.T) {
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

// TestAttack13PooledBuffersKeepRequestsApart: requests served at once, of sizes on both sides
// of the pooled 64 KiB buffers, some cut short mid-object, each get their own objects back and
// nothing of another request.
func TestAttack13PooledBuffersKeepRequestsApart(t *testing.T) {
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
