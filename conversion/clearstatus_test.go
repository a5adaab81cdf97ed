package conversion

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestClearingTheStatusAtAnOldVersionClearsOnlyWhatItShows: a status write at v1alpha1 or
// v1beta1 without a status (status: null, a JSON patch removing /status, a replace without the
// block) clears what that version shows and keeps v1's hidden fields (the current run above
// all: without it a finished run runs again). lastJob goes whole with lastJobName: a uid
// without the name v1 requires would make the Task unwritable. Times written with a fraction
// of a second, which an old version respells, must not change that.
func TestClearingTheStatusAtAnOldVersionClearsOnlyWhatItShows(t *testing.T) {
	const hub = `{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"x","namespace":"n"},
"spec":{"runner":{"type":"Shell","shell":{"script":"echo"}},"parallelism":1,"retry":{"maxRetries":2,"backoff":{"initial":"10s","factor":2,"max":"5m0s"}}},
"status":{"phase":"Retrying","attempts":2,"lastJob":{"name":"x-0-2","uid":"uid-2"},"lastError":"boom","observedGeneration":1,
"startTime":"%[1]s","lastPhaseTransitionTime":"%[1]s",
"conditions":[{"type":"Ready","status":"False","reason":"Retrying","message":"m","lastTransitionTime":"2026-11-30T10:00:00Z","observedGeneration":1}],
"activeJobs":[{"name":"x-0-2","uid":"uid-2"}],"missedRuns":1,
"currentRun":{"attempt":2,"job":{"name":"x-0-2","uid":"uid-2"},"outcome":"Active"},
"runRequest":"2026-11-30T09:59:00Z"}}`
	hidden := map[string][]string{
		"v1alpha1": {"observedGeneration", "startTime", "conditions", "activeJobs", "missedRuns", "currentRun", "runRequest"},
		"v1beta1":  {"lastPhaseTransitionTime", "activeJobs", "missedRuns", "currentRun", "runRequest"},
	}
	for _, version := range []string{"v1alpha1", "v1beta1"} {
		for _, at := range []string{"2026-11-30T10:00:01Z", "2026-11-30T10:00:01.5Z"} {
			t.Run(version+" "+at, func(t *testing.T) {
				h, err := decodeJSON(fmt.Appendf(nil, hub, at))
				if err != nil {
					t.Fatal(err)
				}
				spoke := mustConvert(t, h, version)
				delete(spoke, "status")
				back := mustConvert(t, spoke, hubVersion)
				was, _ := h["status"].(map[string]any)
				got, _ := back["status"].(map[string]any)
				for _, k := range hidden[version] {
					if !cmp.Equal(got[k], was[k]) {
						t.Errorf("hidden status.%s: %v, want it kept: %v", k, got[k], was[k])
					}
				}
				if lastJob, ok := got["lastJob"]; ok {
					t.Errorf("status.lastJob is %v, want it gone with lastJobName", lastJob)
				}
				if shown := mustConvert(t, back, version)["status"]; shown != nil && !cmp.Equal(shown, map[string]any{}) {
					t.Errorf("%s still shows a status: %s", version, mustJSON(t, shown))
				}
			})
		}
	}
}
