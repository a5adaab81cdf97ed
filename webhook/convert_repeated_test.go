package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestARepeatedOrRespelledReviewKeyIsReadAsEncodingJSONReadsItOrRefused: the handler streams
// its answer, so it cannot take back objects it converted. A review that repeats a key, or
// spells one in another case (encoding/json, which the apiserver decodes with, matches keys
// without regard to case, the last one winning), is answered as encoding/json reads it where
// nothing was converted yet, and refused otherwise: never a Success that answers another
// question than the review asks.
func TestARepeatedOrRespelledReviewKeyIsReadAsEncodingJSONReadsItOrRefused(t *testing.T) {
	task := oddShapeTask
	tests := []struct {
		name, body string
		refused    bool
	}{
		{"desiredAPIVersion again after the objects", `{"request":{"uid":"u","desiredAPIVersion":"example.com/v1","objects":[` + task + `],"desiredAPIVersion":"example.com/v1beta1"}}`, true},
		{"the same desiredAPIVersion again after the objects", `{"request":{"uid":"u","desiredAPIVersion":"example.com/v1","objects":[` + task + `],"desiredAPIVersion":"example.com/v1"}}`, false},
		{"uid again after the objects", `{"request":{"uid":"u","desiredAPIVersion":"example.com/v1","objects":[` + task + `],"uid":"w"}}`, true},
		{"objects twice", `{"request":{"uid":"u","desiredAPIVersion":"example.com/v1","objects":[` + task + `],"objects":[` + task + `]}}`, true},
		{"objects twice, before the uid", `{"request":{"objects":[` + task + `],"objects":[` + task + `],"uid":"u","desiredAPIVersion":"example.com/v1"}}`, true},
		{"request twice", `{"request":{"uid":"u","desiredAPIVersion":"example.com/v1","objects":[` + task + `]},"request":{"uid":"u","desiredAPIVersion":"example.com/v1","objects":[]}}`, true},
		{"another case after the objects", `{"request":{"uid":"u","desiredAPIVersion":"example.com/v1","objects":[` + task + `],"DesiredAPIVersion":"example.com/v1beta1"}}`, true},
		{"another case before the objects", `{"request":{"uid":"u","desiredAPIVersion":"example.com/v1","DESIREDAPIVERSION":"example.com/v1beta1","objects":[` + task + `]}}`, false},
		{"keys in another case only", `{"Request":{"UID":"u","DesiredApiVersion":"example.com/v1beta1","Objects":[` + task + `]}}`, false},
		{"desiredAPIVersion again before the objects", `{"request":{"uid":"u","desiredAPIVersion":"example.com/v1","desiredAPIVersion":"example.com/v1beta1","objects":[` + task + `]}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asDecoded apix.ConversionReview
			if err := json.Unmarshal([]byte(tt.body), &asDecoded); err != nil {
				t.Fatal(err)
			}
			got, raw := serveBody(t, strings.NewReader(tt.body))
			res := got.Response
			if tt.refused {
				if res.Result.Status != "Failure" || !strings.Contains(res.Result.Message, "malformed ConversionReview") {
					t.Errorf("answered %s %q, want a malformed ConversionReview refused", res.Result.Status, res.Result.Message)
				}
				return
			}
			if res.Result.Status != "Success" {
				t.Fatalf("refused: %q", res.Result.Message)
			}
			if res.UID != asDecoded.Request.UID || len(res.ConvertedObjects) != len(asDecoded.Request.Objects) {
				t.Errorf("answered uid %q with %d objects, encoding/json reads uid %q with %d", res.UID, len(res.ConvertedObjects), asDecoded.Request.UID, len(asDecoded.Request.Objects))
			}
			for i, o := range res.ConvertedObjects {
				var head struct {
					APIVersion string `json:"apiVersion"`
				}
				if err := json.Unmarshal(o.Raw, &head); err != nil || head.APIVersion != asDecoded.Request.DesiredAPIVersion {
					t.Errorf("object %d at %q, the review asks for %s: %s", i, head.APIVersion, asDecoded.Request.DesiredAPIVersion, raw)
				}
			}
		})
	}
}
