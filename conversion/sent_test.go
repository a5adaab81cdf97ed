package conversion

import (
	"encoding/json"
	"strings"
	"testing"
)

// convertTwoWays converts the Task sent as raw to version both ways the package can: from the
// decoded maps alone (Convert, the old path) and with the typed object decoded from the body as
// sent (Decoded.Convert, the webhook's path). It returns each result as JSON, or its error.
func convertTwoWays(t *testing.T, raw, version string) (fromMaps, fromSent string) {
	t.Helper()
	render := func(obj map[string]any, err error) string {
		if err != nil {
			return "error: " + err.Error()
		}
		out, mErr := json.Marshal(obj)
		if mErr != nil {
			t.Fatal(mErr)
		}
		return string(out)
	}
	old, err := DecodeForConvert([]byte(raw))
	if err != nil {
		t.Fatalf("DecodeForConvert: %v", err)
	}
	d, err := DecodeForConvert([]byte(raw))
	if err != nil {
		t.Fatalf("DecodeForConvert: %v", err)
	}
	if err := old.decodeBody(); err != nil {
		t.Fatalf("decode spec and status: %v", err)
	}
	return render(Convert(old.obj, version)), render(d.Convert(version))
}

// TestKeysRepeatedOrDifferingInCaseConvertAsTheirMaps: a body whose objects repeat a key, or
// hold keys that encoding/json matches to one field case-insensitively ("retry" and "Retry"),
// converts exactly as its decoded maps do. Decoded as sent, a repeated object key merged into
// the field (a list's elements too) and the order of case variants picked the value, so the
// spoke showed, and the annotation kept, another Task than the one Convert reads.
func TestKeysRepeatedOrDifferingInCaseConvertAsTheirMaps(t *testing.T) {
	const shell = `"runner":{"type":"Shell","shell":{"script":"a"}}`
	objects := []string{
		`{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"x"},"spec":{` + shell + `,"retry":{"maxRetries":1},"Retry":{"maxRetries":2}}}`,
		`{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"x"},"spec":{` + shell + `,"retry":{"maxRetries":1,"backoff":{"factor":2}},"retry":{"maxRetries":2}}}`,
		`{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"x"},"spec":{"runner":{"type":"HTTP","http":{"url":"u","headers":[{"name":"a","value":"v"}]}},"runner":{"type":"HTTP","http":{"url":"u","headers":[{"name":"b"}]}}}}`,
		`{"apiVersion":"example.com/v1alpha1","kind":"Task","metadata":{"name":"x"},"spec":{"type":"shell","shell":"a","maxRetry":1,"MaxRetry":2}}`,
		`{"apiVersion":"example.com/v1beta1","kind":"Task","metadata":{"name":"x"},"spec":{` + shell + `,"runner":{"type":"Shell"},"maxRetries":1}}`,
		`{"apiVersion":"example.com/v1beta1","kind":"Task","metadata":{"name":"x"},"spec":{` + shell + `,"maxRetries":1},"status":{"conditions":[{"type":"A","status":"True","reason":"R","message":"m","lastTransitionTime":"2020-01-01T00:00:00Z","observedGeneration":1}],"conditions":[{"type":"B","status":"True","reason":"R","lastTransitionTime":"2020-01-01T00:00:00Z"}]}}`,
	}
	for _, raw := range objects {
		for _, version := range ServedVersions() {
			fromMaps, fromSent := convertTwoWays(t, raw, version)
			if fromMaps != fromSent {
				t.Errorf("%s to %s:\nfrom the maps %s\nfrom as sent  %s", raw, version, fromMaps, fromSent)
			}
		}
	}
}

// TestABodyThatDoesNotDecodeFailsWithItsField: a number no float64 holds, in a quantity the
// typed v1 Task reads (spec.resources), fails the conversion to every version with the error of
// decoding spec, as it did when the webhook decoded the whole object up front: the typed
// decoding accepts it, the maps cannot hold it, and no old version expresses it, so the
// lossless shortcut never skips the maps for it.
func TestABodyThatDoesNotDecodeFailsWithItsField(t *testing.T) {
	const raw = `{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"a"},"spec":{"runner":{"type":"Shell","shell":{"script":"x"}},"resources":{"limits":{"cpu":1e400}}}}`
	for _, version := range ServedVersions() {
		d, err := DecodeForConvert([]byte(raw))
		if err != nil {
			t.Fatalf("DecodeForConvert: %v", err)
		}
		_, err = d.Convert(version)
		if err == nil || !strings.HasPrefix(err.Error(), "spec: json: cannot unmarshal number 1e400") {
			t.Errorf("to %s: error %v, want the error of decoding spec", version, err)
		}
	}
}
