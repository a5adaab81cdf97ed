package conversion

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTheZeroInstantInAStatusTimeGoesAcrossAndBack: 0001-01-01T00:00:00Z is a date-time the v1
// schema takes. Go's metav1.Time writes it as null, which the apiserver prunes, so an old
// version's object must not carry it as a value: the preserved annotation keeps it, and it
// comes back at v1 whether the old version's object is written back as read or edited.
func TestTheZeroInstantInAStatusTimeGoesAcrossAndBack(t *testing.T) {
	const spec = `{"parallelism":1,"retry":{"backoff":{"factor":2,"initial":"10s","max":"5m0s"},"maxRetries":0},"runner":{"shell":{"script":"x"},"type":"Shell"}}`
	tests := []struct {
		version, status string
		edit            string // a status field of the old version set to "edited" before the way back
	}{
		{"v1alpha1", `{"lastPhaseTransitionTime":"0001-01-01T00:00:00Z"}`, "lastError"},
		{"v1alpha1", `{"lastPhaseTransitionTime":"0001-01-01T00:00:00Z","phase":"Running"}`, "lastError"},
		{"v1alpha1", `{"lastPhaseTransitionTime":"0001-01-01T01:00:00+01:00","phase":"Running"}`, "lastError"},
		{"v1beta1", `{"startTime":"0001-01-01T00:00:00Z","phase":"Running"}`, "lastError"},
		{"v1beta1", `{"completionTime":"0001-01-01T00:00:00Z"}`, "lastError"},
		{"v1beta1", `{"conditions":[{"type":"Ready","status":"True","reason":"Healthy","message":"","lastTransitionTime":"0001-01-01T00:00:00Z"},{"type":"Failed","status":"False","reason":"R","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}],"phase":"Running"}`, "lastError"},
	}
	for _, tt := range tests {
		t.Run(tt.version+" "+tt.status, func(t *testing.T) {
			raw := `{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"t","namespace":"ns"},"spec":` + spec + `,"status":` + tt.status + `}`
			hub, err := decodeJSON([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			spoke := mustConvert(t, hub, tt.version)
			if body := string(mustJSON(t, spoke["status"])); spoke["status"] != nil && (strings.Contains(body, "null") || strings.Contains(body, "0001-01-01")) {
				t.Errorf("the %s status carries what the apiserver would prune or Go cannot write: %s", tt.version, body)
			}
			back := mustConvert(t, spoke, hubVersion)
			if !cmp.Equal(back["status"], hub["status"]) || !cmp.Equal(back["spec"], hub["spec"]) {
				t.Errorf("written back as read: status %s, want %s", mustJSON(t, back["status"]), mustJSON(t, hub["status"]))
			}
			st, _ := spoke["status"].(map[string]any)
			if st == nil {
				st = map[string]any{}
				spoke["status"] = st
			}
			st[tt.edit] = "edited"
			back = mustConvert(t, spoke, hubVersion)
			backStatus, _ := back["status"].(map[string]any)
			for k, v := range hub["status"].(map[string]any) {
				if !cmp.Equal(backStatus[k], v) {
					t.Errorf("edited at %s: status.%s came back as %s, want %s", tt.version, k, mustJSON(t, backStatus[k]), mustJSON(t, v))
				}
			}
		})
	}
}

// TestATimeInTheFirstSecondOfYearOneSurvivesAnEditAtAnOldVersion: Go writes a time within the
// first second of year 1 to the second, as the zero instant, which it reads back as unset. The
// old version must leave it out, and v1 get it back when the old version's status is edited.
func TestATimeInTheFirstSecondOfYearOneSurvivesAnEditAtAnOldVersion(t *testing.T) {
	const spec = `{"parallelism":1,"retry":{"backoff":{"factor":2,"initial":"10s","max":"5m0s"},"maxRetries":0},"runner":{"shell":{"script":"x"},"type":"Shell"}}`
	for _, tt := range []struct{ version, field string }{{"v1beta1", "startTime"}, {"v1alpha1", "lastPhaseTransitionTime"}} {
		t.Run(tt.version, func(t *testing.T) {
			h, err := decodeJSON([]byte(`{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"t","namespace":"ns"},"spec":` + spec + `,"status":{"phase":"Running","` + tt.field + `":"0001-01-01T00:00:00.5Z"}}`))
			if err != nil {
				t.Fatal(err)
			}
			spoke := mustConvert(t, h, tt.version)
			if body := string(mustJSON(t, spoke["status"])); strings.Contains(body, "0001-01-01") || strings.Contains(body, "null") {
				t.Errorf("the %s status carries a time that reads back as unset: %s", tt.version, body)
			}
			spoke["status"].(map[string]any)["lastError"] = "edited"
			back := mustConvert(t, spoke, hubVersion)
			if got := back["status"].(map[string]any)[tt.field]; got != "0001-01-01T00:00:00.5Z" {
				t.Errorf("status.%s after an edit at %s: %v, want it kept", tt.field, tt.version, got)
			}
		})
	}
}

// TestTheZeroInstantWrittenAtAnOldVersionReadsAsUnsetAndKeepsTheHiddenStatus: an old version's
// client that writes the zero instant writes what Go reads as unset: v1 gets no such time, and
// the hidden status fields stay.
func TestTheZeroInstantWrittenAtAnOldVersionReadsAsUnsetAndKeepsTheHiddenStatus(t *testing.T) {
	const hub = `{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"t","namespace":"ns"},"spec":{"parallelism":1,"retry":{"backoff":{"factor":2,"initial":"10s","max":"5m0s"},"maxRetries":0},"runner":{"shell":{"script":"x"},"type":"Shell"}},
"status":{"phase":"Succeeded","attempts":1,"startTime":"2026-11-30T10:00:00Z","lastPhaseTransitionTime":"2026-11-30T10:00:00Z","currentRun":{"attempt":1,"job":{"name":"t-0-1","uid":"u"},"outcome":"Succeeded"},"missedRuns":2}}`
	for _, tt := range []struct{ version, field, hubField string }{
		{"v1beta1", "startTime", "startTime"}, {"v1beta1", "completionTime", "completionTime"}, {"v1alpha1", "lastUpdateTime", "lastPhaseTransitionTime"},
	} {
		t.Run(tt.version+" "+tt.field, func(t *testing.T) {
			h, err := decodeJSON([]byte(hub))
			if err != nil {
				t.Fatal(err)
			}
			spoke := mustConvert(t, h, tt.version)
			spoke["status"].(map[string]any)[tt.field] = "0001-01-01T00:00:00Z"
			back := mustConvert(t, spoke, hubVersion)
			got := back["status"].(map[string]any)
			for _, k := range []string{"currentRun", "missedRuns"} {
				if !cmp.Equal(got[k], h["status"].(map[string]any)[k]) {
					t.Errorf("hidden status.%s: %v, want it kept", k, got[k])
				}
			}
			if v, ok := got[tt.hubField]; ok {
				t.Errorf("status.%s is %v, want it unset", tt.hubField, v)
			}
		})
	}
}

// TestCheckTimesRefusesNewTimesThatReadAsUnset: a v1 write may not bring a time Go reads back
// as unset, anywhere in the Task; one the stored Task holds at the same place goes through.
func TestCheckTimesRefusesNewTimesThatReadAsUnset(t *testing.T) {
	task := func(status string) map[string]any {
		obj, err := decodeJSON([]byte(`{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"t","namespace":"ns"},"spec":{"runner":{"type":"Shell","shell":{"script":"x"}}},"status":` + status + `}`))
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	cond := func(at string) string {
		return `{"conditions":[{"type":"A","status":"True","reason":"R","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"},{"type":"B","status":"True","reason":"R","message":"","lastTransitionTime":"` + at + `"}]}`
	}
	tests := []struct {
		name, status, stored, want string // want: the field refused, "" for none
	}{
		{"the zero instant", `{"startTime":"0001-01-01T00:00:00Z"}`, "", "status.startTime"},
		{"within its first second", `{"completionTime":"0001-01-01T00:00:00.999Z"}`, "", "status.completionTime"},
		{"spelled in another zone", `{"lastPhaseTransitionTime":"0001-01-01T01:00:00+01:00"}`, "", "status.lastPhaseTransitionTime"},
		{"spelled in a zone west of UTC", `{"lastPhaseTransitionTime":"0000-12-31T13:00:00.5-11:00"}`, "", "status.lastPhaseTransitionTime"},
		{"in a condition", cond("0001-01-01T00:00:00Z"), "", "status.conditions[1].lastTransitionTime"},
		{"in the current run", `{"currentRun":{"attempt":1,"job":{"name":"t-0-1"},"outcome":"Active","retryTime":"0001-01-01T00:00:00Z"}}`, "", "status.currentRun.retryTime"},
		{"held by the stored Task", cond("0001-01-01T00:00:00Z"), cond("0001-01-01T00:00:00Z"), ""},
		{"held by the stored Task at another place in the list", `{"conditions":[{"type":"B","status":"True","reason":"R","message":"","lastTransitionTime":"0001-01-01T00:00:00Z"}]}`, cond("0001-01-01T00:00:00Z"), ""},
		{"held by another condition of the stored Task", `{"conditions":[{"type":"C","status":"True","reason":"R","message":"","lastTransitionTime":"0001-01-01T00:00:00Z"}]}`, cond("0001-01-01T00:00:00Z"), "status.conditions[0].lastTransitionTime"},
		{"the stored instant spelled otherwise", `{"startTime":"0000-12-31T23:00:00-01:00"}`, `{"startTime":"0001-01-01T00:00:00.000Z"}`, ""},
		{"another one than the stored Task's", `{"startTime":"0001-01-01T00:00:00Z"}`, `{"startTime":"0001-01-01T00:00:00.5Z"}`, "status.startTime"},
		{"one second later", `{"startTime":"0001-01-01T00:00:01Z"}`, "", ""},
		{"a time of this century", `{"startTime":"2026-12-07T10:00:00Z"}`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stored []byte
			if tt.stored != "" {
				stored = mustJSON(t, task(tt.stored))
			}
			obj := task(tt.status)
			errs := CheckTimes(mustJSON(t, obj), obj, stored)
			switch {
			case tt.want == "" && len(errs) > 0:
				t.Errorf("refused: %v", errs)
			case tt.want != "" && (len(errs) != 1 || errs[0].Field != tt.want):
				t.Errorf("%v, want %s refused", errs, tt.want)
			}
		})
	}
}
