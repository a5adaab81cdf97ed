package webhook

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/conversion"
	"example.com/task-operator/internal/sample"
)

// hubObject is a hub Task as the apiserver holds it: decoded JSON, apiVersion and kind set.
func hubObject(t testing.TB, task *taskv1.Task) map[string]any {
	t.Helper()
	task = task.DeepCopy()
	task.APIVersion, task.Kind = taskv1.GroupVersion.String(), taskv1.Kind
	return reencode(t, task)
}

// reencode is v through JSON, decoded as the apiserver decodes it (whole numbers as int64).
func reencode(t testing.TB, v any) map[string]any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	obj, err := conversion.DecodeObject(data)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// mustConvert converts a copy of obj to version, through JSON as the apiserver would see it.
func mustConvert(t testing.TB, obj map[string]any, version string) map[string]any {
	t.Helper()
	out, err := conversion.Convert(reencode(t, obj), version)
	if err != nil {
		t.Fatalf("convert %s to %s: %v", obj["apiVersion"], version, err)
	}
	return reencode(t, out)
}

// requireSameBody fails unless want and got have the same spec and status, an absent part and
// an explicit null told apart.
func requireSameBody(t testing.TB, what string, want, got map[string]any) {
	t.Helper()
	for _, part := range []string{"spec", "status"} {
		w, inWant := want[part]
		g, inGot := got[part]
		if inWant != inGot {
			t.Fatalf("%s: %s present %t, want %t", what, part, inGot, inWant)
		}
		if diff := cmp.Diff(w, g); diff != "" {
			t.Fatalf("%s: %s changed (-want +got):\n%s", what, part, diff)
		}
	}
}

func annotationsOf(obj map[string]any) map[string]any {
	meta := obj["metadata"].(map[string]any)
	annotations, ok := meta["annotations"].(map[string]any)
	if !ok {
		annotations = map[string]any{}
		meta["annotations"] = annotations
	}
	return annotations
}

// postReview posts body to the /convert handler and returns the review it answers, which must
// come with HTTP 200 whatever the outcome.
func postReview(t testing.TB, body string) apix.ConversionReview {
	t.Helper()
	rec := httptest.NewRecorder()
	NewConvertHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body)))
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

// reviewOf is the ConversionReview the apiserver sends to convert objects to desired.
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
		TypeMeta: metav1.TypeMeta{APIVersion: apix.SchemeGroupVersion.String(), Kind: "ConversionReview"},
		Request:  &apix.ConversionRequest{UID: types.UID(uid), DesiredAPIVersion: desired, Objects: raws},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestConvertHandlerConvertsAPage(t *testing.T) {
	hubs := []map[string]any{hubObject(t, sample.RichTask("echo a")), hubObject(t, sample.SimpleTask()), hubObject(t, sample.HTTPTask())}
	review := postReview(t, reviewOf(t, "u-1", "example.com/v1alpha1", hubs...))
	resp := review.Response
	if resp.UID != "u-1" || resp.Result.Status != "Success" {
		t.Fatalf("uid %q result %+v", resp.UID, resp.Result)
	}
	if len(resp.ConvertedObjects) != len(hubs) {
		t.Fatalf("%d objects back, want %d", len(resp.ConvertedObjects), len(hubs))
	}
	for i, raw := range resp.ConvertedObjects {
		obj, err := conversion.DecodeObject(raw.Raw)
		if err != nil {
			t.Fatal(err)
		}
		if obj["apiVersion"] != "example.com/v1alpha1" {
			t.Errorf("object %d is %v", i, obj["apiVersion"])
		}
		requireSameBody(t, "through the handler and back", hubs[i], mustConvert(t, obj, taskv1.GroupVersion.Version))
	}
}

func TestConvertHandlerAnswersFailuresAsReviews(t *testing.T) {
	broken := mustConvert(t, hubObject(t, sample.SimpleTask()), "v1alpha1")
	annotationsOf(broken)[conversion.PreservedAnnotation] = `{"v":2,"spec":`
	// An annotation as the server writes it, but for a hidden field of the wrong type.
	wrongType := mustConvert(t, hubObject(t, sample.RichTask("echo")), "v1alpha1")
	value, _ := annotationsOf(wrongType)[conversion.PreservedAnnotation].(string)
	var p map[string]any
	if err := json.Unmarshal([]byte(value), &p); err != nil {
		t.Fatalf("the fixture's annotation is not plain JSON (%v): %.100s", err, value)
	}
	p["patch"].(map[string]any)["spec"].(map[string]any)["timeout"] = 5
	edited, _ := json.Marshal(p)
	annotationsOf(wrongType)[conversion.PreservedAnnotation] = string(edited)
	tests := []struct {
		name, body string
		want       []string // substrings of the message
	}{
		{"not JSON", "{{{", []string{"malformed ConversionReview"}},
		{"no request", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`, []string{"no request"}},
		{"unknown version", reviewOf(t, "u", "example.com/v9", hubObject(t, sample.SimpleTask())), []string{`"example.com/v9" is not a served version`}},
		{"damaged annotation", reviewOf(t, "u", "example.com/v1", broken), []string{"Task ns/simple", conversion.PreservedAnnotation, "not a JSON object"}},
		{"restored field of the wrong type", reviewOf(t, "u", "example.com/v1", wrongType), []string{"Task ns/rich", conversion.PreservedAnnotation, "spec.timeout"}},
		{"not a Task", reviewOf(t, "u", "example.com/v1", map[string]any{"apiVersion": "v1", "kind": "Pod"}), []string{`kind "Pod" is not Task`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := postReview(t, tt.body).Response
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

func TestConvertHandlerAcceptsObjectsBeforeTheUID(t *testing.T) {
	obj, _ := json.Marshal(hubObject(t, sample.SimpleTask()))
	body := fmt.Sprintf(`{"request":{"objects":[%s],"desiredAPIVersion":"example.com/v1beta1","uid":"late"},"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1"}`, obj)
	resp := postReview(t, body).Response
	if resp.UID != "late" || resp.Result.Status != "Success" || len(resp.ConvertedObjects) != 1 {
		t.Fatalf("got uid %q, result %+v, %d objects", resp.UID, resp.Result, len(resp.ConvertedObjects))
	}
}

// TestConvertHandlerFailsAnObjectThatIsNoObject: an entry of objects that is JSON but no
// object fails the conversion with the decoder's message (the review itself was read whole),
// as DecodeForConvert words it for the same bytes.
func TestConvertHandlerFailsAnObjectThatIsNoObject(t *testing.T) {
	_, want := conversion.DecodeForConvert([]byte(`[1]`))
	if want == nil {
		t.Fatal("DecodeForConvert accepted a list")
	}
	for _, objects := range []string{`[[1]]`, `[{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":{"name":"a"},"spec":{"type":"shell","shell":"x"}},[1]]`} {
		body := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"example.com/v1","objects":` + objects + `}}`
		review := postReview(t, body)
		if review.Response.UID != "u" || review.Response.Result.Status != "Failure" || review.Response.Result.Message != want.Error() {
			t.Errorf("objects %s: uid %q, result %+v; want a Failure with %q", objects, review.Response.UID, review.Response.Result, want)
		}
	}
}

// TestConvertHandlerRefusesNullMetadata: metadata that is null is no object, for the handler
// that keeps managedFields raw as for conversion.Convert ("metadata is not an object"), rather
// than an empty metadata the apiserver would get back.
func TestConvertHandlerRefusesNullMetadata(t *testing.T) {
	obj := `{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":null,"spec":{"type":"shell","shell":"x"}}`
	for _, to := range []string{"example.com/v1", "example.com/v1beta1"} {
		body := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"` + to + `","objects":[` + obj + `]}}`
		review := postReview(t, body)
		if review.Response.Result.Status != "Failure" || !strings.Contains(review.Response.Result.Message, "metadata is not an object") {
			t.Errorf("to %s: result %+v, converted %d; want metadata is not an object", to, review.Response.Result, len(review.Response.ConvertedObjects))
		}
	}
}

// TestConvertHandlerAnswersOnlyTheMetadataTheApiserverReads: an answer's metadata has the
// fields the apiserver checks (name, namespace, uid) and takes (labels, annotations), as a full
// conversion has them, and nothing the apiserver restores from the object it sent. That the
// apiserver then holds every field as sent is TestTheApiserverRestoresTheMetadataAnAnswerLeavesOut.
func TestConvertHandlerAnswersOnlyTheMetadataTheApiserverReads(t *testing.T) {
	hub := withFullMetadata(t, hubObject(t, sample.RichTask("echo step")))
	for _, to := range []string{"example.com/v1alpha1", "example.com/v1beta1", "example.com/v1"} {
		review := postReview(t, reviewOf(t, "u", to, hub))
		if review.Response.Result.Status != "Success" || len(review.Response.ConvertedObjects) != 1 {
			t.Fatalf("to %s: %+v", to, review.Response.Result)
		}
		var got map[string]any
		if err := json.Unmarshal(review.Response.ConvertedObjects[0].Raw, &got); err != nil {
			t.Fatal(err)
		}
		full := mustConvert(t, hub, strings.TrimPrefix(to, "example.com/"))
		want := map[string]any{}
		for key, v := range full["metadata"].(map[string]any) {
			if answeredMetadata[key] {
				want[key] = v
			}
		}
		if diff := cmp.Diff(reencode(t, want), reencode(t, got["metadata"])); diff != "" {
			t.Errorf("to %s: metadata (-want +got):\n%s", to, diff)
		}
		if len(want) != len(answeredMetadata) {
			t.Errorf("to %s: the Task lacks some of %v, so the test proves less than it says: %v", to, answeredMetadata, want)
		}
	}
}

// withFullMetadata gives obj every metadata field a stored Task can have, managedFields with the
// fieldsV1 keys that need escaping (k:{...} with quotes, HTML characters, non-ASCII).
func withFullMetadata(t testing.TB, obj map[string]any) map[string]any {
	t.Helper()
	meta := `{"name":"nightly","namespace":"ns","uid":"5f0c3a52-0c1e-4bfb-9d1c-2b1d6f3b8f11","resourceVersion":"4711","generation":3,` +
		`"creationTimestamp":"2030-01-02T03:04:05Z","deletionTimestamp":"2030-01-03T03:04:05Z","deletionGracePeriodSeconds":0,` +
		`"labels":{"app":"nightly","é":"x"},"finalizers":["example.com/job-cleanup"],` +
		`"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":"0c7e7a0e-3a34-4c52-9b0a-7c1b1ad0e5a1","controller":true}],` +
		`"managedFields":[{"manager":"a<b>&c","operation":"Apply","apiVersion":"example.com/v1","time":"2030-01-02T03:04:05Z","fieldsType":"FieldsV1",` +
		`"fieldsV1":{"f:metadata":{"f:labels":{"f:é\u2028":{}}},"f:spec":{"f:runner":{"f:http":{"f:headers":{"k:{\"name\":\"<x>&\"}":{".":{},"f:name":{}}}}}}}},` +
		`{"manager":"s","operation":"Update","apiVersion":"example.com/v1alpha1","subresource":"status","fieldsType":"FieldsV1","fieldsV1":{"f:status":{".":{},"f:state":{}}}}]}`
	obj = reencode(t, obj)
	full := reencode(t, json.RawMessage(meta))
	full["annotations"] = obj["metadata"].(map[string]any)["annotations"]
	if full["annotations"] == nil {
		full["annotations"] = map[string]any{"note": "kept"}
	}
	obj["metadata"] = full
	return obj
}

var requestName = regexp.MustCompile(`"t[0-9]+-[0-9]+-`)

// TestConvertHandlerPooledBuffersKeepRequestsApart: requests served at once, of sizes on both
// sides of the pooled 64 KiB buffers, some cut short mid-object, each get their own objects back
// and nothing of another request.
func TestConvertHandlerPooledBuffersKeepRequestsApart(t *testing.T) {
	h := NewConvertHandler()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				name := fmt.Sprintf("t%d-%d-%s", g, i, strings.Repeat("y", (g*9973+i*7919)%90000))
				obj := fmt.Sprintf(`{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":{"name":%q,"labels":{"n":%q}},"spec":{"type":"shell","shell":%q}}`, name, name, name)
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

// TestConvertMetricLabelsComeFromServedVersionsOnly: whatever desiredAPIVersion a request
// names, the metrics get one of the served versions or "unknown", so a client cannot mint label
// values.
func TestConvertMetricLabelsComeFromServedVersionsOnly(t *testing.T) {
	for i := range 5 {
		postReview(t, reviewOf(t, "u", fmt.Sprintf("example.com/v%d-made-up", i), hubObject(t, sample.SimpleTask())))
	}
	labels := map[string]bool{}
	for _, c := range []prometheus.Collector{convertRequestsTotal, convertRequestDuration, convertObjectsTotal, convertObjectDuration} {
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
		if v != "unknown" && !slices.Contains(conversion.ServedVersions(), v) {
			t.Errorf("metric label value %q is not a served version", v)
		}
	}
	if !labels["unknown"] {
		t.Errorf("made-up versions were not counted as unknown: %v", labels)
	}
}

// FuzzConversionReview feeds arbitrary bytes to the /convert handler: every answer must be a
// ConversionReview with HTTP 200, never a panic.
func FuzzConversionReview(f *testing.F) {
	f.Add(reviewOf(f, "u", "example.com/v1alpha1", hubObject(f, sample.RichTask("echo"))))
	f.Add(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"x","desiredAPIVersion":"example.com/v1","objects":[{}]}}`)
	f.Add(`{"request":{"objects":[1,2,3]}}`)
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		NewConvertHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body)))
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d", rec.Code)
		}
		var review apix.ConversionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil || review.Response == nil {
			t.Fatalf("not a ConversionReview (%v): %s", err, rec.Body)
		}
	})
}

// TestOnlyObjectsThatLoseNothingAreCountedAsShortcuts: a Task written at v1alpha1 and read back
// at v1alpha1, or before its first status at v1beta1, loses nothing and is counted under the
// version read (taskoperator_conversion_lossless_shortcuts_total), and at v1alpha1 as answered
// by its template (taskoperator_conversion_shortcuts_in_bytes_total); a Task with a field the
// version lacks is not, nor is a conversion to v1.
func TestOnlyObjectsThatLoseNothingAreCountedAsShortcuts(t *testing.T) {
	plain := mustConvert(t, plainV1alpha1Task(), taskv1.GroupVersion.Version)
	// v1beta1 has no time of the last phase change, which v1alpha1's lastUpdateTime became.
	unrun := plainV1alpha1Task()
	delete(unrun, "status")
	unrun = mustConvert(t, unrun, taskv1.GroupVersion.Version)
	rich := hubObject(t, sample.RichTask("echo a && echo b"))
	for _, tc := range []struct {
		name    string
		obj     map[string]any
		desired string
		counted map[string]uint64
	}{
		{"written at v1alpha1, read at v1alpha1", plain, "example.com/v1alpha1", map[string]uint64{"v1alpha1": 1}},
		{"written at v1alpha1 with a script of && and <, read at v1alpha1", withScript(t, plain, "a && b < c"), "example.com/v1alpha1", map[string]uint64{"v1alpha1": 1}},
		{"written at v1alpha1 before its first status, read at v1beta1", unrun, "example.com/v1beta1", map[string]uint64{"v1beta1": 1}},
		{"with a status time v1beta1 lacks, read at v1beta1", plain, "example.com/v1beta1", nil},
		{"v1-only fields, read at v1alpha1", rich, "example.com/v1alpha1", nil},
		{"v1-only fields, read at v1beta1", rich, "example.com/v1beta1", nil},
		{"read at v1", mustConvert(t, plain, "v1alpha1"), "example.com/v1", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, inBytesBefore := shortcutCounts(conversion.LosslessShortcuts), shortcutCounts(conversion.ShortcutsInBytes)
			review := postReview(t, reviewOf(t, "u-1", tc.desired, tc.obj))
			if review.Response.Result.Status != "Success" {
				t.Fatalf("result %+v", review.Response.Result)
			}
			after, inBytesAfter := shortcutCounts(conversion.LosslessShortcuts), shortcutCounts(conversion.ShortcutsInBytes)
			for version, was := range before {
				if got, want := after[version]-was, tc.counted[version]; got != want {
					t.Errorf("%s: %d shortcuts counted, want %d", version, got, want)
				}
				// v1alpha1 has a template, and it answers every shortcut the apiserver's bytes allow.
				want := uint64(0)
				if version == "v1alpha1" {
					want = tc.counted[version]
				}
				if got := inBytesAfter[version] - inBytesBefore[version]; got != want {
					t.Errorf("%s: %d shortcuts in bytes counted, want %d", version, got, want)
				}
			}
		})
	}
}

// shortcutCounts is count (conversion.LosslessShortcuts, conversion.ShortcutsInBytes) of each
// old version.
func shortcutCounts(count func(version string) uint64) map[string]uint64 {
	counts := map[string]uint64{}
	for _, version := range conversion.ServedVersions() {
		if version != taskv1.GroupVersion.Version {
			counts[version] = count(version)
		}
	}
	return counts
}

// withScript is a copy of the v1 Task obj running script.
func withScript(t testing.TB, obj map[string]any, script string) map[string]any {
	out := reencode(t, obj)
	out["spec"].(map[string]any)["runner"].(map[string]any)["shell"] = map[string]any{"script": script}
	return out
}
