package v1

import (
	"strings"
	"testing"
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
