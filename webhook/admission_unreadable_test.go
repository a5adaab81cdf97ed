package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TestBothWebhooksRefuseAnOversizedQuantityAtOnceNamingIt: quantities the schema takes but
// resource.Quantity spins on (to parse, or to compare a request with its limit) or panics on are
// refused by the mutating and the validating webhook at once, naming the field, never answered
// after the apiserver's timeout or with a panic.
func TestBothWebhooksRefuseAnOversizedQuantityAtOnceNamingIt(t *testing.T) {
	tests := []struct{ name, resources string }{
		{"an exponent the parser spins on", `{"limits":{"cpu":"1e-100000000"}}`},
		{"one a comparison with the request spins on", `{"limits":{"cpu":"1e2000000000"},"requests":{"cpu":"1"}}`},
		{"one a comparison with the request panics on", `{"limits":{"cpu":"1e2147483647"},"requests":{"cpu":"1e-9"}}`},
	}
	handlers := map[string]admission.Handler{"mutating": Mutator{}, "validating": Validator{}}
	for _, tt := range tests {
		for kind, h := range handlers {
			t.Run(tt.name+" "+kind, func(t *testing.T) {
				req := rawCreate(`{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"t","namespace":"ns"},"spec":{"runner":{"type":"Shell","shell":{"script":"true"}},"resources":`+tt.resources+`}}`, false)
				done := make(chan string, 1)
				go func() {
					defer func() {
						if p := recover(); p != nil {
							done <- fmt.Sprintf("panic: %v", p)
						}
					}()
					resp := h.Handle(context.Background(), req)
					msg := ""
					if resp.Result != nil {
						msg = resp.Result.Message
					}
					done <- fmt.Sprintf("allowed=%v %s", resp.Allowed, msg)
				}()
				select {
				case got := <-done:
					if !strings.HasPrefix(got, "allowed=false") || !strings.Contains(got, "spec.resources.") {
						t.Errorf("%s", got)
					}
				case <-time.After(time.Minute):
					t.Fatal("no answer after a minute")
				}
			})
		}
	}
}

// TestTheValidatorNamesATimeGoCannotParse: the schema's date-time check takes times Go's
// parser refuses (a lower-case t or z, an offset of 99 hours); a v1 status write with one,
// which only the validating webhook sees, is refused naming the field.
func TestTheValidatorNamesATimeGoCannotParse(t *testing.T) {
	for _, at := range []string{"2026-01-01t00:00:00z", "2026-01-01T00:00:00+99:00"} {
		raw := `{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"t","namespace":"ns"},"spec":{"runner":{"type":"Shell","shell":{"script":"true"}}},"status":{"startTime":"` + at + `"}}`
		req := rawCreate(raw, false)
		req.Operation, req.SubResource = "UPDATE", "status"
		req.OldObject.Raw = []byte(raw)
		resp := Validator{}.Handle(context.Background(), req)
		if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "status.startTime") {
			t.Errorf("%s: allowed %v, %v; want refused naming status.startTime", at, resp.Allowed, resp.Result)
		}
	}
}

// TestTheValidatorDecodesOnlyWhatItsChecksSaw: the Validator checks the decoded object, and
// decodes it typed from there with its keys matched exactly, as the apiserver matches them: a
// quantity the checks did not see (a key in another case, a repeated key, a number too small
// for a float) is never parsed from the raw bytes, where it would spin for minutes.
func TestTheValidatorDecodesOnlyWhatItsChecksSaw(t *testing.T) {
	const spins = "1e-100000000"
	const runner = `"runner":{"type":"Shell","shell":{"script":"true"}}`
	for name, body := range map[string]string{
		"top-level Spec":         `"Spec":{` + runner + `,"resources":{"limits":{"cpu":"` + spins + `"}}}`,
		"top-level key with ſ":   `"ſpec":{` + runner + `,"resources":{"limits":{"cpu":"` + spins + `"}}}`,
		"limits repeated":        `"spec":{` + runner + `,"resources":{"limits":{"cpu":"` + spins + `"},"limits":{"cpu":"1"}}}`,
		"a number below a float": `"spec":{` + runner + `,"resources":{"limits":{"cpu":` + spins + `}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			req := rawCreate(`{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"t","namespace":"ns"},`+body+`}`, false)
			done := make(chan struct{})
			go func() {
				defer close(done)
				Validator{}.Handle(context.Background(), req)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second): // the webhooks' timeoutSeconds: the apiserver gives up then
				t.Fatal("no answer within the webhook's timeout: a quantity no check saw was parsed")
			}
		})
	}
}

// A Task stored with a quantity out of bounds (by an earlier release, or with the webhooks
// removed) still takes the writes that leave it as stored, at once: a label, the operator's
// status, a finalizer taken off at its deletion. A write that brings another out of bounds, or
// changes the stored one, is refused naming it.
func TestAQuantityOutOfBoundsAsStoredPassesWritesThatLeaveItAlone(t *testing.T) {
	task := func(limits, extra string) string {
		return `{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"t","namespace":"ns","uid":"u"` + extra + `},` +
			`"spec":{"runner":{"type":"Shell","shell":{"script":"true"}},"resources":{"limits":` + limits + `}}}`
	}
	stored := task(`{"cpu":"1e3000000000","memory":"1Gi"}`, `,"finalizers":["task.example.com/jobs"]`)
	for _, tc := range []struct {
		name, object, subresource string
		// refused names the field a refusal must name; "" for allowed.
		refused string
	}{
		{"a label", task(`{"cpu":"1e3000000000","memory":"1Gi"}`, `,"labels":{"team":"a"},"finalizers":["task.example.com/jobs"]`), "", ""},
		{"the finalizer taken off", task(`{"cpu":"1e3000000000","memory":"1Gi"}`, ""), "", ""},
		{"a status write", strings.TrimSuffix(stored, "}") + `,"status":{"phase":"Pending"}}`, "status", ""},
		{"the quantity written out of bounds otherwise", task(`{"cpu":"1e3000000001","memory":"1Gi"}`, ""), "", "spec.resources.limits.cpu"},
		{"another quantity out of bounds", task(`{"cpu":"1e3000000000","memory":"1e99"}`, ""), "", "spec.resources.limits.memory"},
	} {
		for kind, h := range map[string]admission.Handler{"mutating": Mutator{}, "validating": Validator{}} {
			if kind == "mutating" && tc.subresource == "status" {
				continue // the mutating webhook's matchConditions leave v1 status writes out
			}
			t.Run(tc.name+" "+kind, func(t *testing.T) {
				req := rawCreate(tc.object, false)
				req.Operation, req.SubResource = "UPDATE", tc.subresource
				req.OldObject.Raw = []byte(stored)
				done := make(chan admission.Response, 1)
				go func() { done <- h.Handle(context.Background(), req) }()
				var resp admission.Response
				select {
				case resp = <-done:
				case <-time.After(time.Minute):
					t.Fatal("no answer after a minute")
				}
				msg := ""
				if resp.Result != nil {
					msg = resp.Result.Message
				}
				switch {
				case tc.refused == "" && !resp.Allowed:
					t.Errorf("refused: %s", msg)
				case tc.refused != "" && (resp.Allowed || !strings.Contains(msg, tc.refused)):
					t.Errorf("allowed %v, %q; want refused naming %s", resp.Allowed, msg, tc.refused)
				}
			})
		}
	}
}

// A write at an old version refused by a check of its v1 conversion names the field as that
// version spells it: v1beta1's spec.schedule for v1's spec.schedule.cron; a v1 field the old
// version has no place for is named at v1, saying so.
func TestARefusalOfAnOldVersionWriteNamesTheFieldAsThatVersionSpellsIt(t *testing.T) {
	for _, tc := range []struct {
		version, hub, want string
	}{
		{"v1beta1", "spec.schedule.cron", "spec.schedule"},
		{"v1alpha1", "spec.runner.shell.script", "spec.shell"},
		{"v1beta1", "spec.resources.limits[cpu]", "spec.resources.limits[cpu] (at v1)"},
		{"v1", "spec.schedule.cron", "spec.schedule.cron"},
	} {
		errs := atClientVersion(field.ErrorList{{Type: field.ErrorTypeInvalid, Field: tc.hub, BadValue: "v", Detail: "bad"}}, tc.version)
		if errs[0].Field != tc.want {
			t.Errorf("%s at %s: named %s, want %s", tc.hub, tc.version, errs[0].Field, tc.want)
		}
	}
}
