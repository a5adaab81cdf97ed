package reconciler

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestJobName(t *testing.T) {
	sched := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // 1767225600
	long := strings.Repeat("a", 62)
	longDotted := strings.Repeat("ab.", 30) + "z"
	tests := []struct {
		name string
		task string
		run  runID
		want string
	}{
		{"first attempt", "backup", runID{Attempt: 1}, "backup-1"},
		{"retry", "backup", runID{Attempt: 12}, "backup-12"},
		{"scheduled first attempt", "nightly", runID{Scheduled: sched, Attempt: 1}, "nightly-1767225600"},
		{"scheduled retry", "nightly", runID{Scheduled: sched, Attempt: 2}, "nightly-1767225600-2"},
		{"scheduled time in another zone names the same instant", "nightly", runID{Scheduled: sched.In(time.FixedZone("x", 3600)), Attempt: 1}, "nightly-1767225600"},
		{"exactly 63", strings.Repeat("b", 61), runID{Attempt: 1}, strings.Repeat("b", 61) + "-1"},
		{"too long is cut and hashed", long, runID{Attempt: 1}, long[:52] + "-" + shortHash(long) + "-1"},
		{"too long scheduled", long, runID{Scheduled: sched, Attempt: 3}, long[:41] + "-" + shortHash(long) + "-1767225600-3"},
		{"cut never ends with a dot", longDotted, runID{Attempt: 1}, strings.TrimRight(longDotted[:52], ".-") + "-" + shortHash(longDotted) + "-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := jobName(tc.task, tc.run)
			if got != tc.want {
				t.Errorf("jobName(%q, %+v) = %q, want %q", tc.task, tc.run, got, tc.want)
			}
			if len(got) > 63 {
				t.Errorf("len = %d, want <= 63", len(got))
			}
			if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
				t.Errorf("not a DNS subdomain: %v", errs)
			}
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
				t.Errorf("not a label value: %v", errs)
			}
			if again := jobName(tc.task, tc.run); again != got {
				t.Errorf("not deterministic: %q then %q", got, again)
			}
		})
	}
}

func TestJobNameKeepsLongNamesApart(t *testing.T) {
	a := strings.Repeat("x", 80) + "a"
	b := strings.Repeat("x", 80) + "b"
	if jobName(a, runID{Attempt: 1}) == jobName(b, runID{Attempt: 1}) {
		t.Fatal("two long Task names that differ only at the end got the same Job name")
	}
}

func TestLabelValue(t *testing.T) {
	tests := []struct {
		name, in string
		want     string
	}{
		{"short", "backup", "backup"},
		{"63", strings.Repeat("c", 63), strings.Repeat("c", 63)},
		{"64", strings.Repeat("c", 64), strings.Repeat("c", 54) + "-" + shortHash(strings.Repeat("c", 64))},
		{"dotted 253", strings.Repeat("d.", 126) + "e", strings.TrimRight(strings.Repeat("d.", 27), ".") + "-" + shortHash(strings.Repeat("d.", 126)+"e")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := labelValue(tc.in)
			if got != tc.want {
				t.Errorf("labelValue = %q, want %q", got, tc.want)
			}
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
				t.Errorf("not a label value: %v", errs)
			}
		})
	}
}

func TestRunIDLess(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		a, b runID
		want bool
	}{
		{runID{Attempt: 1}, runID{Attempt: 2}, true},
		{runID{Attempt: 2}, runID{Attempt: 1}, false},
		{runID{Scheduled: t0, Attempt: 3}, runID{Scheduled: t0.Add(time.Second), Attempt: 1}, true},
		{runID{Scheduled: t0, Attempt: 1}, runID{Scheduled: t0, Attempt: 1}, false},
	}
	for _, tc := range tests {
		if got := tc.a.less(tc.b); got != tc.want {
			t.Errorf("%+v.less(%+v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
