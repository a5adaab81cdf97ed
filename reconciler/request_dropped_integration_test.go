package reconciler_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

// TestARerunDroppedByACancelKeepsTheSchedulesTimes: a scheduled Task ("@every 1h") whose Jobs go
// as soon as they finish (ttlSecondsAfterFinished: 0) is rerun once; then a rerun and a cancel a
// second later are written together (the cancel drops the rerun, which starts nothing).
// lastScheduleTime and nextRunTime must stay the schedule's: no schedule time has come yet.
func TestARerunDroppedByACancelKeepsTheSchedulesTimes(t *testing.T) {
	e := newEnv(t)
	task := e.create(e.task("dropped", func(t *v1.Task) {
		t.Spec.Schedule = &v1.Schedule{Cron: "@every 1h", ConcurrencyPolicy: v1.AllowConcurrent}
		t.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
	}))
	before := e.waitPhase(task.Name, v1.PhaseScheduled)
	next := before.Status.NextRunTime
	if next == nil {
		t.Fatalf("no next run time: %s", describe(before))
	}

	time.Sleep(5 * time.Second) // the rerun is not at a schedule time
	at := e.requestNow(task.Name, v1.AnnotationRunRequested)
	rerun := task.Name + "-" + strconv.FormatInt(at.Unix(), 10) + "-1"
	e.waitStatus(task.Name, "the rerun succeeded", func(t *v1.Task) bool {
		return t.Status.CurrentRun != nil && t.Status.CurrentRun.Job.Name == rerun && t.Status.CurrentRun.Outcome == v1.RunSucceeded
	})
	testenv.Eventually(t, waitTimeout, "the rerun's Job deleted by its TTL", func(context.Context) (bool, error) {
		return len(e.jobs(task.Name)) == 0, fmt.Errorf("jobs: %v", jobNamesOf(e, task.Name))
	})
	time.Sleep(2 * time.Second)

	// A rerun and a cancel one second after it, in one write.
	r2 := time.Now().UTC().Truncate(time.Second)
	e.update(task.Name, func(t *v1.Task) {
		t.Annotations[v1.AnnotationRunRequested] = r2.Format(time.RFC3339)
		t.Annotations[v1.AnnotationCancelRequested] = r2.Add(time.Second).Format(time.RFC3339)
	})
	got := e.waitStatus(task.Name, "the cancel recorded", func(t *v1.Task) bool {
		return t.Status.CancelRequest != nil && t.Status.CancelRequest.Time.Equal(r2.Add(time.Second))
	})
	time.Sleep(3 * time.Second)
	e.update(task.Name, func(t *v1.Task) { t.Labels = map[string]string{"poke": "1"} }) // one more reconcile
	time.Sleep(3 * time.Second)
	got = e.get(task.Name)
	st := got.Status
	if st.LastScheduleTime != nil || !st.NextRunTime.Equal(next) {
		t.Errorf("after the dropped rerun: lastScheduleTime %v (the rerun was at %s), nextRunTime %v, want no lastScheduleTime and nextRunTime %v",
			st.LastScheduleTime, at.Format(time.RFC3339), st.NextRunTime, next)
	}
	if n := len(e.jobs(task.Name)); n != 0 {
		t.Errorf("the dropped rerun started %v", jobNamesOf(e, task.Name))
	}
}
