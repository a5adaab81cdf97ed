package v1

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestParseSchedule(t *testing.T) {
	tests := []struct {
		cron, tz  string
		wantField string // the field the error names; "" for no error
	}{
		{"*/5 * * * *", "", ""},
		{"@hourly", "", ""},
		{"@every 2s", "", ""},
		{"0 9 * * MON-FRI", "Europe/Berlin", ""},
		{"* * * * * *", "", "spec.schedule.cron"}, // six fields: seconds are not standard cron
		{"61 * * * *", "", "spec.schedule.cron"},
		{"@sometimes", "", "spec.schedule.cron"},
		{"0 9 * * *", "Mars/Olympus", "spec.schedule.timeZone"},
		{"CRON_TZ=UTC 0 9 * * *", "", "spec.schedule.cron"},
		// robfig/cron panics on a TZ prefix without an expression after it.
		{"TZ=UTC", "", "spec.schedule.cron"},
		{"CRON_TZ=Europe/Paris", "", "spec.schedule.cron"},
		{"", "", "spec.schedule.cron"},
		{"0 0 30 2 *", "", "spec.schedule.cron"}, // 30 February never comes
		{"0 0 31 4 *", "Europe/Berlin", "spec.schedule.cron"},
		{"0 0 29 2 *", "", ""},                           // leap days come, every four years
		{"0 9 * * *", "Local", "spec.schedule.timeZone"}, // the operator's machine's zone, as a CronJob refuses
	}
	for _, tc := range tests {
		_, err := ParseSchedule(&Schedule{Cron: tc.cron, TimeZone: tc.tz})
		switch {
		case tc.wantField == "" && err != nil:
			t.Errorf("ParseSchedule(%q, %q): unexpected error %v", tc.cron, tc.tz, err)
		case tc.wantField != "" && err == nil:
			t.Errorf("ParseSchedule(%q, %q): no error, want one naming %s", tc.cron, tc.tz, tc.wantField)
		case tc.wantField != "" && !strings.Contains(err.Error(), tc.wantField):
			t.Errorf("ParseSchedule(%q, %q) = %v, want it to name %s", tc.cron, tc.tz, err, tc.wantField)
		}
	}
}

func TestValidateNamesEveryBadField(t *testing.T) {
	task := &Task{Spec: TaskSpec{Schedule: &Schedule{Cron: "nope", TimeZone: "Mars/Olympus"}}}
	errs := Validate(task)
	if len(errs) != 2 {
		t.Fatalf("Validate = %v, want 2 errors", errs)
	}
	for i, want := range []string{"spec.schedule.cron", "spec.schedule.timeZone"} {
		if errs[i].Field != want {
			t.Errorf("error %d names %s, want %s", i, errs[i].Field, want)
		}
	}
}

func TestValidateResources(t *testing.T) {
	q := resource.MustParse
	tests := []struct {
		name      string
		res       *corev1.ResourceRequirements
		wantField string // "" for no error
	}{
		{"none", nil, ""},
		{"requests only", &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("100m")}}, ""},
		{"request equal to limit", &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"memory": q("1Gi")}, Limits: corev1.ResourceList{"memory": q("1024Mi")}}, ""},
		{"extended resource", &corev1.ResourceRequirements{Limits: corev1.ResourceList{"example.com/gpu": q("1")}}, ""},
		{"request above limit", &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": q("2")}, Limits: corev1.ResourceList{"cpu": q("1")}}, "spec.resources.requests[cpu]"},
		{"negative", &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("-1")}}, "spec.resources.requests[cpu]"},
		{"bad name", &corev1.ResourceRequirements{Limits: corev1.ResourceList{"no/such/name": q("1")}}, "spec.resources.limits[no/such/name]"},
	}
	for _, tc := range tests {
		errs := Validate(&Task{Spec: TaskSpec{Resources: tc.res}})
		switch {
		case tc.wantField == "" && len(errs) > 0:
			t.Errorf("%s: unexpected errors %v", tc.name, errs)
		case tc.wantField != "" && (len(errs) != 1 || errs[0].Field != tc.wantField):
			t.Errorf("%s: errors %v, want one naming %s", tc.name, errs, tc.wantField)
		}
	}
}

// TestValidateResourcesRejectsWhatPodsReject: spec.resources that the API server's pod
// template validation rejects pass the Task's validation, so the Task is admitted and every
// Job create fails (Invalid) forever: the Task sits Pending, retrying with error backoff.
// (Rules from k8s.io/kubernetes pkg/apis/core/validation ValidateResourceRequirements and
// validateContainerResourceName.)
func TestValidateResourcesRejectsWhatPodsReject(t *testing.T) {
	q := resource.MustParse
	tests := []struct {
		name string
		res  *corev1.ResourceRequirements
	}{
		{"non-standard unprefixed name", &corev1.ResourceRequirements{Requests: corev1.ResourceList{"gpu": q("1")}}},
		{"extended resource request without limit", &corev1.ResourceRequirements{Requests: corev1.ResourceList{"example.com/gpu": q("1")}}},
		{"extended resource request below limit", &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"example.com/gpu": q("1")}, Limits: corev1.ResourceList{"example.com/gpu": q("2")}}},
		{"fractional extended resource", &corev1.ResourceRequirements{Limits: corev1.ResourceList{"example.com/gpu": q("500m")}}},
		{"hugepages request without limit", &corev1.ResourceRequirements{Requests: corev1.ResourceList{"hugepages-2Mi": q("2Mi")}}},
	}
	for _, tc := range tests {
		if errs := Validate(&Task{Spec: TaskSpec{Resources: tc.res}}); len(errs) == 0 {
			t.Errorf("%s: accepted, but the API server refuses a Job whose pods ask for it", tc.name)
		}
	}
}
