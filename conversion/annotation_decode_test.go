package conversion

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	kjson "sigs.k8s.io/json"

	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/internal/sample"
)

// probedPreserved is decodePreserved as it was before decodeOnce: the layout probed with
// encoding/json (case-insensitive), then the value decoded.
func probedPreserved(value string) (*preserved, bool, error) {
	raw := []byte(value)
	var probe struct {
		Format *int `json:"v"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, false, fmt.Errorf("not a JSON object: %w", err)
	}
	if probe.Format == nil || *probe.Format != preservedFormat {
		return nil, false, nil
	}
	p := &preserved{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, p); err != nil {
		return nil, false, err
	}
	for key := range p.Patch {
		if key != "spec" && key != "status" {
			return nil, false, fmt.Errorf("patch may only hold spec and status, not %q", key)
		}
	}
	return p, true, nil
}

// TestDecodingWithoutTheProbeAgrees: decodePreserved, which skips the probe of the layout when
// one decoding must agree with it, reads every value as the probe-first decoding does: the same
// record, the same "another layout", an error exactly when that had one.
func TestDecodingWithoutTheProbeAgrees(t *testing.T) {
	hub := mustConvert(t, hubObject(t, sample.RichTask("echo <&>")), v1alpha1.GroupVersion.Version)
	real := hub["metadata"].(map[string]any)["annotations"].(map[string]any)[PreservedAnnotation].(string)
	values := []string{
		real,
		`{"v":2,"spec":"a","status":"b","patch":{"spec":{"timeout":"5m"}}}`,
		`{"V":2,"spec":"a","patch":{"spec":{"timeout":"5m"}}}`,
		`{"\u0056":2,"patch":{"spec":{}}}`,
		`{"\u0076":2,"patch":{"spec":{}}}`,
		`{"v":2,"V":3,"patch":{}}`,
		`{"v":3,"V":2,"patch":{}}`,
		`{"v":1,"patch":{"metadata":{}}}`,
		`{"v":2,"patch":{"metadata":{}}}`,
		`{"v":"2"}`, `{"v":2.0}`, `{"v":2,"v":"x"}`, `{"v":null}`, `{"v":2,"owners":{"a":1}}`,
		`{"spec":"a"}`, `{}`, `null`, `[]`, `"v"`, `2`, `{"v":2,"patch":{"spec":{"a":1}}}`,
		`{"v":2,"owners":{"a":null}}`, `{"v":2,"owners":null,"patch":null,"spec":null}`, `{"v":2,"patch":{"spec":1}}`,
		`{"v":2,"patch":{"spec":{"x":1},"spec":{"y":2}}}`, `{"v":2,"patch":{"spec":{"x":1}},"patch":{"status":{}}}`,
		`{"v":2,"owners":{"a":"1"},"owners":{"b":"2"}}`, `{"v":9223372036854775807}`, `{"v":2,"spec":7}`, `{"v":2,"unknown":[1,{"a":2}]}`,
		`{"v":2,"spec":"\u00e9","patch":{"spec":{"script":"a\nb"}}}`,
	}
	for _, v := range values {
		requireSameDecoding(t, v)
	}
}

// FuzzPreservedDecodingAgrees: any annotation value decodes as the probe-first decoding with
// sigs.k8s.io/json decodes it, whichever path decodePreserved takes.
func FuzzPreservedDecodingAgrees(f *testing.F) {
	f.Add(`{"v":2,"spec":"a","status":"b","owners":{"spec.runner.http.url":"c"},"patch":{"spec":{"timeout":"5m","env":[{"name":"A"}]}}}`)
	f.Add(`{"v":2,"patch":{"spec":{"x":1},"spec":{"y":2}}}`)
	f.Fuzz(func(t *testing.T, v string) { requireSameDecoding(t, v) })
}

func requireSameDecoding(t *testing.T, v string) {
	t.Helper()
	wantP, wantOK, wantErr := probedPreserved(v)
	gotP, gotOK, gotErr := decodePreserved(v)
	if (wantErr == nil) != (gotErr == nil) || gotOK != wantOK {
		t.Errorf("%s: got ok %t, error %v; the probe-first decoding: ok %t, error %v", v, gotOK, gotErr, wantOK, wantErr)
		return
	}
	if diff := cmp.Diff(wantP, gotP); diff != "" {
		t.Errorf("%s: record differs (-probe first +now):\n%s", v, diff)
	}
}
