package conversion

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
)

// maxReviewBytes bounds a ConversionReview body. The apiserver sends at most one LIST page of
// Tasks per review; a Task is bounded by the schema to well under 1 MiB.
const maxReviewBytes = 64 << 20

// NewHandler serves /convert: controller-runtime's conversion webhook over the converters in
// registry, instrumented, and answering malformed reviews with a failed ConversionReview that
// says what is wrong instead of a bare status code.
func NewHandler(scheme *runtime.Scheme, registry conversion.Registry) http.Handler {
	return &handler{inner: conversion.NewWebhookHandler(scheme, instrumented{registry})}
}

type handler struct {
	inner http.Handler
}

// reviewEnvelope is the part of a ConversionReview this handler inspects before delegating.
type reviewEnvelope struct {
	Request *struct {
		DesiredAPIVersion string `json:"desiredAPIVersion"`
	} `json:"request"`
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes+1))
	if err != nil || len(body) > maxReviewBytes {
		writeFailure(w, fmt.Sprintf("read ConversionReview: body unreadable or over %d bytes", maxReviewBytes))
		return
	}
	var envelope reviewEnvelope
	if err := json.Unmarshal(body, &envelope); err != nil {
		writeFailure(w, "malformed ConversionReview: "+err.Error())
		return
	}
	if envelope.Request == nil {
		writeFailure(w, "malformed ConversionReview: no request")
		return
	}
	to := envelope.Request.DesiredAPIVersion
	recorder := &statusRecorder{ResponseWriter: w}
	r.Body = io.NopCloser(bytes.NewReader(body))
	h.inner.ServeHTTP(recorder, r)
	requestDuration.WithLabelValues(to).Observe(time.Since(start).Seconds())
	result := "success"
	if recorder.failed() {
		result = "failure"
	}
	requestsTotal.WithLabelValues(to, result).Inc()
}

func writeFailure(w http.ResponseWriter, message string) {
	requestsTotal.WithLabelValues("", "malformed").Inc()
	review := apix.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: apix.SchemeGroupVersion.String(), Kind: "ConversionReview"},
		Response: &apix.ConversionResponse{
			Result: metav1.Status{Status: metav1.StatusFailure, Message: message, Reason: metav1.StatusReasonBadRequest, Code: http.StatusBadRequest},
		},
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(review)
}

// statusRecorder notices whether the inner handler answered with a failed review. The inner
// handler reports conversion errors inside a 200 response, so the body is sniffed for the
// Failure status rather than decoded: decoding a whole LIST page twice would double the cost.
type statusRecorder struct {
	http.ResponseWriter
	status    int
	sawFailed bool
}

var failureMarker = []byte(`"status":"Failure"`)

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	if !s.sawFailed && bytes.Contains(p, failureMarker) {
		s.sawFailed = true
	}
	return s.ResponseWriter.Write(p)
}

func (s *statusRecorder) failed() bool {
	return s.sawFailed || (s.status != 0 && s.status != http.StatusOK)
}

// instrumented wraps the converters of a registry with per-object metrics.
type instrumented struct {
	conversion.Registry
}

func (i instrumented) GetConverter(gk schema.GroupKind) (conversion.Converter, bool) {
	c, ok := i.Registry.GetConverter(gk)
	if !ok {
		return nil, false
	}
	return instrumentedConverter{c}, true
}

type instrumentedConverter struct {
	inner conversion.Converter
}

func (c instrumentedConverter) ConvertObject(ctx context.Context, src, dst runtime.Object) error {
	from := src.GetObjectKind().GroupVersionKind().Version
	to := dst.GetObjectKind().GroupVersionKind().Version
	start := time.Now()
	err := c.inner.ConvertObject(ctx, src, dst)
	objectDuration.WithLabelValues(from, to).Observe(time.Since(start).Seconds())
	result := "success"
	if err != nil {
		result = "failure"
	}
	objectsTotal.WithLabelValues(from, to, result).Inc()
	return err
}
