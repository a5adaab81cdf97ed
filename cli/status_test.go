package cli

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	taskv1 "example.com/task-operator/apis/v1"
)

func TestStatusShowsRunAndCancelRequests(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ago time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-ago)} }
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		status      taskv1.TaskStatus
		want, not   []string
	}{
		{name: "none", not: []string{"Run request", "Cancel request"}},
		{name: "honoured",
			annotations: map[string]string{taskv1.AnnotationRunRequested: "2026-01-02T03:00:05Z", taskv1.AnnotationCancelRequested: "2026-01-02T02:04:05Z"},
			status:      taskv1.TaskStatus{RunRequest: at(4 * time.Minute), CancelRequest: at(time.Hour)},
			want:        []string{"Run request:     2026-01-02T03:00:05Z (4m ago), honoured\n", "Cancel request:  2026-01-02T02:04:05Z (60m ago), honoured\n"},
			not:         []string{"not honoured"}},
		{name: "pending",
			annotations: map[string]string{taskv1.AnnotationRunRequested: "2026-01-02T03:04:00Z"},
			status:      taskv1.TaskStatus{RunRequest: at(time.Hour)},
			want:        []string{"Run request:  2026-01-02T02:04:05Z (60m ago), honoured\n", "Run request:  2026-01-02T03:04:00Z (5s ago) asked, not honoured yet\n"},
			not:         []string{"Cancel request"}},
		{name: "not a time",
			annotations: map[string]string{taskv1.AnnotationCancelRequested: "now"},
			want:        []string{`Cancel request:  "now" asked (not an RFC 3339 time: the operator ignores it)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := &taskv1.Task{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns", Annotations: tc.annotations}, Status: tc.status}
			var out bytes.Buffer
			s := statusPrinter{w: tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0), now: now}
			s.request("Run request", task.Status.RunRequest, task.Annotations[taskv1.AnnotationRunRequested])
			s.request("Cancel request", task.Status.CancelRequest, task.Annotations[taskv1.AnnotationCancelRequested])
			if err := s.w.Flush(); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("status lacks %q:\n%s", w, out.String())
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out.String(), n) {
					t.Errorf("status has %q:\n%s", n, out.String())
				}
			}
		})
	}
}
