package conversion

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"example.com/task-operator/apis/install"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/apis/v1beta1"
)

// wellFormed holds for hubs the schema admits in the respects conversion depends on.
func wellFormed(t *taskv1.Task) bool {
	r := t.Spec.Runner
	switch {
	case r.Type != taskv1.RunnerShell && r.Type != taskv1.RunnerHTTP,
		r.Shell != nil && r.Shell.Script == "",
		r.HTTP != nil && r.HTTP.URL == "",
		t.Spec.Schedule != nil && t.Spec.Schedule.Cron == "",
		t.Status.LastJob != nil && t.Status.LastJob.Name == "",
		t.Status.Attempts < 0:
		return false
	}
	return true
}

// FuzzConvert decodes arbitrary bytes as a v1 Task and converts it down to every spoke and
// back. Down-conversion must never fail; a well-formed hub must come back unchanged.
func FuzzConvert(f *testing.F) {
	seed, _ := json.Marshal(richHub("echo seed"))
	f.Add(seed)
	f.Add([]byte(`{"spec":{"runner":{"type":"HTTP","http":{"url":"http://a","headers":[{"name":"a"}]}},"retry":{"maxRetries":1}}}`))
	f.Add([]byte(`{"metadata":{"annotations":{"task.example.com/preserved-v1-fields":"{}"}},"status":{"attempts":3}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var hub taskv1.Task
		if json.Unmarshal(data, &hub) != nil {
			return
		}
		delete(hub.Annotations, PreservedAnnotation)
		ctx := context.Background()
		var alpha v1alpha1.Task
		if err := ConvertV1ToV1alpha1(ctx, &hub, &alpha); err != nil {
			t.Fatalf("down to v1alpha1 failed: %v", err)
		}
		var beta v1beta1.Task
		if err := ConvertV1ToV1beta1(ctx, &hub, &beta); err != nil {
			t.Fatalf("down to v1beta1 failed: %v", err)
		}
		var fromAlpha, fromBeta taskv1.Task
		errAlpha := ConvertV1alpha1ToV1(ctx, &alpha, &fromAlpha)
		errBeta := ConvertV1beta1ToV1(ctx, &beta, &fromBeta)
		if !wellFormed(&hub) {
			return
		}
		if errAlpha != nil || errBeta != nil {
			t.Fatalf("up-conversion failed: v1alpha1: %v, v1beta1: %v", errAlpha, errBeta)
		}
		opts := cmpopts.EquateEmpty()
		if diff := cmp.Diff(hub, fromAlpha, opts); diff != "" {
			t.Errorf("hub changed through v1alpha1 (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(hub, fromBeta, opts); diff != "" {
			t.Errorf("hub changed through v1beta1 (-want +got):\n%s", diff)
		}
	})
}

func newTestHandler(t testing.TB) http.Handler {
	scheme := runtime.NewScheme()
	if err := install.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	registry := conversion.NewRegistry()
	converter, err := NewConverter()(scheme)
	if err != nil {
		t.Fatal(err)
	}
	if err := registry.RegisterConverter(taskv1.GroupVersion.WithKind("Task").GroupKind(), converter); err != nil {
		t.Fatal(err)
	}
	return NewHandler(scheme, registry)
}

func serveReview(h http.Handler, body []byte) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body)))
	return rec
}

// FuzzConversionReview sends arbitrary bodies to /convert: every answer is a ConversionReview,
// successful or failed, and nothing panics.
func FuzzConversionReview(f *testing.F) {
	h := newTestHandler(f)
	f.Add([]byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"1","desiredAPIVersion":"example.com/v1alpha1","objects":[{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"a"},"spec":{"runner":{"type":"Shell","shell":{"script":"true"}}}}]}}`))
	f.Add([]byte(`{"request":{"uid":"2","desiredAPIVersion":"example.com/v9","objects":[{"apiVersion":"example.com/v1","kind":"Task"}]}}`))
	f.Add([]byte(`{"request":{"desiredAPIVersion":"example.com/v1","objects":[{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":{"annotations":{"task.example.com/preserved-v1-fields":"[1]"}}}]}}`))
	f.Add([]byte(`garbage`))
	f.Add([]byte(`{"request":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := serveReview(h, body)
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d, want 200 or 400", rec.Code)
		}
		if rec.Code == http.StatusBadRequest && rec.Body.Len() == 0 {
			return // controller-runtime's own answer to an undecodable body
		}
		var review apix.ConversionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil || review.Response == nil {
			t.Fatalf("answer is not a ConversionReview with a response: %v: %s", err, rec.Body.String())
		}
	})
}

func TestConversionReviewFailures(t *testing.T) {
	h := newTestHandler(t)
	tests := []struct {
		name, body, wantMessage string
	}{
		{"garbage", `garbage`, "malformed ConversionReview"},
		{"no request", `{"kind":"ConversionReview"}`, "no request"},
		{"unknown version", `{"request":{"uid":"u","desiredAPIVersion":"example.com/v9","objects":[{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"a"}}]}}`, "v9"},
		{"bad preserved annotation", `{"request":{"uid":"u","desiredAPIVersion":"example.com/v1","objects":[{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":{"name":"a","annotations":{"task.example.com/preserved-v1-fields":"[1]"}}}]}}`, PreservedAnnotation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := serveReview(h, []byte(tt.body))
			var review apix.ConversionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil || review.Response == nil {
				t.Fatalf("status %d, body %q is not a ConversionReview", rec.Code, rec.Body.String())
			}
			if review.Response.Result.Status != "Failure" || !strings.Contains(review.Response.Result.Message, tt.wantMessage) {
				t.Errorf("result %+v, want a Failure mentioning %q", review.Response.Result, tt.wantMessage)
			}
		})
	}
}

func TestConversionReviewSuccess(t *testing.T) {
	h := newTestHandler(t)
	body := `{"request":{"uid":"u1","desiredAPIVersion":"example.com/v1alpha1","objects":[{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"a"},"spec":{"runner":{"type":"Shell","shell":{"script":"true"}},"parallelism":2}}]}}`
	rec := serveReview(h, []byte(body))
	var review struct {
		Response struct {
			UID              string
			Result           struct{ Status string }
			ConvertedObjects []v1alpha1.Task
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil {
		t.Fatal(err)
	}
	r := review.Response
	if r.UID != "u1" || r.Result.Status != "Success" || len(r.ConvertedObjects) != 1 {
		t.Fatalf("unexpected response: %s", rec.Body.String())
	}
	got := r.ConvertedObjects[0]
	if got.APIVersion != "example.com/v1alpha1" || got.Spec.Replicas != 2 || got.Spec.Shell != "true" || got.Spec.Type != "shell" {
		t.Errorf("converted object: %+v", got)
	}
}
