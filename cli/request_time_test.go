package cli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	taskv1 "example.com/task-operator/apis/v1"
)

// TestRunRequestIsSentAfterAPendingCancel: `kubectl task cancel X; kubectl task run X` within
// one second would send a run request at the cancel's own time, which the operator drops (a
// cancel at or after a pending run request covers it). The run request is sent one second after
// a pending cancel instead; a cancel already honoured or older than now leaves it at now.
func TestRunRequestIsSentAfterAPendingCancel(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	honoured := func(d time.Duration) *metav1.Time { h := metav1.NewTime(now.Add(d)); return &h }
	for _, tc := range []struct {
		name     string
		cancel   string
		honoured *metav1.Time
		want     time.Time
	}{
		{name: "no cancel", want: now},
		{name: "a cancel in the same second, not honoured yet", cancel: at(0), want: now.Add(time.Second)},
		{name: "a cancel in the same second, already honoured", cancel: at(0), honoured: honoured(0), want: now.Add(time.Second)},
		{name: "a cancel a second ahead (clock skew)", cancel: at(time.Second), want: now.Add(2 * time.Second)},
		{name: "an earlier cancel not honoured yet", cancel: at(-time.Minute), want: now},
		{name: "an earlier cancel honoured", cancel: at(-time.Minute), honoured: honoured(-time.Minute), want: now},
		{name: "a cancel that does not parse", cancel: "soon", want: now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := &taskv1.Task{}
			task.Name = "report"
			task.Status.CancelRequest = tc.honoured
			if tc.cancel != "" {
				task.Annotations = map[string]string{taskv1.AnnotationCancelRequested: tc.cancel}
			}
			if got := runRequestTime(task, now); !got.Equal(tc.want) {
				t.Errorf("cancel-requested %q (status.cancelRequest %v): run requested at %s, want %s", tc.cancel, tc.honoured, got, tc.want)
			}
		})
	}
}

// TestARunRequestTheOperatorTakesAsAnsweredIsNotSent: a request at or before status.runRequest
// or the current run's schedule time (a repeat within the second of an honoured request, or a
// clock behind the operator's) would start nothing; the plugin says so, naming both times, and
// sends nothing. A later one, or one pushed past a pending cancel, is sent.
func TestARunRequestTheOperatorTakesAsAnsweredIsNotSent(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	ts := func(d time.Duration) *metav1.Time { m := metav1.NewTime(now.Add(d)); return &m }
	for _, tc := range []struct {
		name       string
		runRequest *metav1.Time
		scheduled  *metav1.Time
		cancel     time.Duration // a pending cancel at now+cancel, when not 0
		answeredBy time.Duration // the time named in the refusal; sent when refused is false
		refused    bool
	}{
		{name: "nothing answered"},
		{name: "an earlier request answered", runRequest: ts(-time.Minute)},
		{name: "a run of an earlier schedule time", scheduled: ts(-time.Minute)},
		{name: "a request of this second answered", runRequest: ts(0), refused: true},
		{name: "a request ahead of this clock answered", runRequest: ts(10 * time.Second), answeredBy: 10 * time.Second, refused: true},
		{name: "a run of a later schedule time", scheduled: ts(30 * time.Second), answeredBy: 30 * time.Second, refused: true},
		{name: "the later of both", runRequest: ts(5 * time.Second), scheduled: ts(3 * time.Second), answeredBy: 5 * time.Second, refused: true},
		{name: "pushed past a pending cancel, after what was answered", runRequest: ts(0), cancel: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := &taskv1.Task{}
			task.Name = "nightly"
			task.Status.RunRequest = tc.runRequest
			if tc.scheduled != nil {
				task.Status.CurrentRun = &taskv1.RunRecord{ScheduledTime: tc.scheduled, Attempt: 1, Outcome: taskv1.RunActive}
			}
			if tc.cancel != 0 {
				task.Annotations = map[string]string{taskv1.AnnotationCancelRequested: now.Add(tc.cancel).Format(time.RFC3339)}
			}
			at := runRequestTime(task, now)
			err := refuseAnswered(task, at, "ns")
			if !tc.refused {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			want := `task "nightly" in namespace "ns": a run requested at ` + at.Format(time.RFC3339) +
				" is answered already by the run of " + now.Add(tc.answeredBy).Format(time.RFC3339) + ": it would start nothing"
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("got %v, want an error starting %q", err, want)
			}
		})
	}
}

// TestCancelCoversAPendingRunRequestAheadOfNow: a run request sent one second after a cancel
// (see TestRunRequestIsSentAfterAPendingCancel) is still pending when the user cancels again in
// the same second; the new cancel is sent at the run request's time so that it covers it. A
// cancel the operator honoured for a time a little ahead (another client's clock runs ahead)
// is followed the same way, so that the new one is not ignored.
func TestCancelCoversAPendingRunRequestAheadOfNow(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		run      string
		honoured time.Time // status.cancelRequest
		want     time.Time
	}{
		{name: "no run request", want: now},
		{name: "a pending run request a second ahead", run: now.Add(time.Second).Format(time.RFC3339), want: now.Add(2 * time.Second)},
		{name: "a pending run request of this second", run: now.Format(time.RFC3339), want: now.Add(time.Second)},
		{name: "a pending run request in the past", run: now.Add(-time.Minute).Format(time.RFC3339), want: now},
		{name: "a cancel honoured 30s ahead (another client's clock)", honoured: now.Add(30 * time.Second), want: now.Add(31 * time.Second)},
		{name: "a cancel honoured an hour ahead (set by hand)", honoured: now.Add(time.Hour), want: now},
		{name: "a cancel honoured before", honoured: now.Add(-time.Second), want: now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := &taskv1.Task{}
			task.Name = "report"
			if tc.run != "" {
				task.Annotations = map[string]string{taskv1.AnnotationRunRequested: tc.run}
			}
			if !tc.honoured.IsZero() {
				task.Status.CancelRequest = &metav1.Time{Time: tc.honoured}
			}
			if got := cancelRequestTime(task, now); !got.Equal(tc.want) {
				t.Errorf("run-requested %q: cancel requested at %s, want %s", tc.run, got, tc.want)
			}
		})
	}
}
