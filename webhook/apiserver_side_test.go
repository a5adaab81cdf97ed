package webhook

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiserverconversion "k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
	"sigs.k8s.io/yaml"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/config"
	"example.com/task-operator/conversion"
	"example.com/task-operator/internal/sample"
)

// apiserverSide is kube-apiserver's own client of a conversion webhook, built as the apiserver
// builds it from the Task CRD (k8s.io/apiextensions-apiserver's webhook converter), calling h
// behind TLS on loopback over HTTP/1.1, as it calls a webhook behind a Service. What it returns
// is what the apiserver would hold after the call: the answer checked, and the metadata the
// answer does not carry restored from the object sent.
func apiserverSide(t testing.TB, h http.Handler) runtime.ObjectConvertor {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = false
	srv.StartTLS()
	t.Cleanup(srv.Close)
	crd := &apix.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(config.CRD, crd); err != nil {
		t.Fatalf("decode the Task CRD: %v", err)
	}
	url := srv.URL + "/convert"
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	crd.Spec.Conversion = &apix.CustomResourceConversion{Strategy: apix.WebhookConverter, Webhook: &apix.WebhookConversion{
		ClientConfig: &apix.WebhookClientConfig{URL: &url, CABundle: ca}, ConversionReviewVersions: []string{"v1"},
	}}
	factory, err := apiserverconversion.NewCRConverterFactory(webhookutil.NewDefaultServiceResolver(),
		func(r webhookutil.AuthenticationInfoResolver) webhookutil.AuthenticationInfoResolver { return r })
	if err != nil {
		t.Fatal(err)
	}
	safe, _, err := factory.NewConverter(crd)
	if err != nil {
		t.Fatal(err)
	}
	return safe
}

// convertAsTheApiserver converts obj to version through convertor and returns the object the
// apiserver holds afterwards.
func convertAsTheApiserver(t testing.TB, convertor runtime.ObjectConvertor, obj map[string]any, version string) map[string]any {
	t.Helper()
	out, err := convertor.ConvertToVersion(&unstructured.Unstructured{Object: obj}, schema.GroupVersion{Group: taskv1.GroupVersion.Group, Version: version})
	if err != nil {
		t.Fatalf("the apiserver's call to convert %s to %s: %v", obj["apiVersion"], version, err)
	}
	return out.(*unstructured.Unstructured).Object
}

// TestTheApiserverRestoresTheMetadataAnAnswerLeavesOut: through the apiserver's own webhook
// client, every conversion between served versions of a Task with every metadata field a stored
// one can have gives what a conversion that keeps its metadata whole gives: nothing an answer
// leaves out is lost.
func TestTheApiserverRestoresTheMetadataAnAnswerLeavesOut(t *testing.T) {
	convertor := apiserverSide(t, NewConvertHandler())
	for name, task := range map[string]map[string]any{
		"v1 fields v1alpha1 cannot express": withFullMetadata(t, hubObject(t, sample.RichTask("echo step"))),
		"nothing hidden":                    withFullMetadata(t, mustConvert(t, plainV1alpha1Task(), taskv1.GroupVersion.Version)),
		"no labels nor annotations":         withoutLabelsAndAnnotations(withFullMetadata(t, hubObject(t, sample.HTTPTask()))),
	} {
		for _, from := range conversion.ServedVersions() {
			sent := mustConvert(t, task, from)
			for _, to := range conversion.ServedVersions() {
				if to == from {
					continue
				}
				want := mustConvert(t, sent, to)
				got := convertAsTheApiserver(t, convertor, reencode(t, sent), to)
				if diff := cmp.Diff(want, reencode(t, got)); diff != "" {
					t.Errorf("%s, %s to %s (-whole metadata +through the apiserver):\n%s", name, from, to, diff)
				}
			}
		}
	}
}

func withoutLabelsAndAnnotations(obj map[string]any) map[string]any {
	meta := obj["metadata"].(map[string]any)
	delete(meta, "labels")
	delete(meta, "annotations")
	return obj
}

// BenchmarkConversionCallAsTheApiserverMakesIt times one conversion call as kube-apiserver makes
// it, both ends in this process: its webhook client encodes the review, sends it over TLS,
// decodes and checks the answer and restores the metadata, while the handler serves it. Each case
// first calls RenameOnly, the floor of any webhook, and reports ours ÷ that ("ours/no-op"). Run it
// with GOMAXPROCS=1, so that ns/op is the CPU of both ends. The Tasks carry the managedFields of a
// Task written at v1alpha1 and given a status, as the migration's do.
func BenchmarkConversionCallAsTheApiserverMakesIt(b *testing.B) {
	ours, floor := apiserverSide(b, NewConvertHandler()), apiserverSide(b, http.HandlerFunc(RenameOnly))
	rich := withManagedFields(b, hubObject(b, sample.RichTask("echo step")))
	plain := withManagedFields(b, mustConvert(b, plainV1alpha1Task(), taskv1.GroupVersion.Version))
	for _, tc := range []struct {
		name string
		obj  map[string]any
		to   string
	}{
		{"v1-to-v1alpha1", rich, v1alpha1.GroupVersion.Version},
		{"v1-to-v1alpha1-nothing-hidden", plain, v1alpha1.GroupVersion.Version},
		{"v1-to-v1beta1-nothing-hidden", plain, "v1beta1"},
		{"v1alpha1-to-v1", mustConvert(b, rich, v1alpha1.GroupVersion.Version), taskv1.GroupVersion.Version},
	} {
		var noop float64
		b.Run(tc.name+"-no-op", func(b *testing.B) {
			noop = benchmarkCalls(b, floor, tc.obj, tc.to)
		})
		b.Run(tc.name, func(b *testing.B) {
			if got := benchmarkCalls(b, ours, tc.obj, tc.to); noop > 0 {
				b.ReportMetric(got/noop, "ours/no-op")
			}
		})
	}
}

// benchmarkCalls converts obj to version through convertor in a b.Loop and returns the ns per call.
func benchmarkCalls(b *testing.B, convertor runtime.ObjectConvertor, obj map[string]any, version string) float64 {
	b.ReportAllocs()
	in := &unstructured.Unstructured{Object: obj}
	gv := schema.GroupVersion{Group: taskv1.GroupVersion.Group, Version: version}
	for b.Loop() {
		out, err := convertor.ConvertToVersion(in, gv)
		if err != nil {
			b.Fatal(err)
		}
		if got, name := out.GetObjectKind().GroupVersionKind().Version, out.(*unstructured.Unstructured).GetName(); got != version || name != in.GetName() {
			b.Fatalf("converted %q to %s, named %q", in.GetName(), got, name)
		}
	}
	return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}
