package reconciler

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "example.com/task-operator/apis/v1"
)

func queued(t *v1.Task) {
	t.Spec.QueueName = "team-a"
	t.Spec.PriorityClassName = "urgent"
	t.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}
}

func TestBuildJobQueued(t *testing.T) {
	task := newTask(queued, func(t *v1.Task) {
		t.Labels = map[string]string{"team": "a", kueueQueueLabel: "sneaky", "kueue.x-k8s.io/other": "x"}
	})
	job := buildJob(task, Options{}.withDefaults(), runID{Attempt: 1})
	if job.Spec.Suspend == nil || !*job.Spec.Suspend {
		t.Error("a queued Job is created suspended")
	}
	if job.Labels[kueueQueueLabel] != "team-a" || job.Labels[kueuePriorityLabel] != "urgent" || job.Labels["team"] != "a" {
		t.Errorf("job labels %v", job.Labels)
	}
	if _, ok := job.Labels["kueue.x-k8s.io/other"]; ok {
		t.Errorf("the Task's Kueue labels are not copied: %v", job.Labels)
	}
	for k := range job.Spec.Template.Labels {
		if strings.HasPrefix(k, kueueLabelPrefix) {
			t.Errorf("pod template carries Kueue label %s", k)
		}
	}
	if got := job.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String(); got != "250m" {
		t.Errorf("cpu request %s, want 250m", got)
	}

	plain := buildJob(newTask(), Options{}.withDefaults(), runID{Attempt: 1})
	if plain.Spec.Suspend != nil {
		t.Error("a Job without queue is not suspended")
	}
	if _, ok := plain.Labels[kueueQueueLabel]; ok {
		t.Error("a Job without queue has no queue label")
	}
}

func TestObserveQueuedJob(t *testing.T) {
	task := newTask(queued)
	job := buildJob(task, Options{}.withDefaults(), runID{Attempt: 1})
	job.CreationTimestamp = metav1.NewTime(at(1))
	if o := observeJob("t", job); !o.waiting() || !o.Admitted.IsZero() || o.Queue != "team-a" {
		t.Errorf("suspended queued Job: %+v", o)
	}
	job.Spec.Suspend = new(bool)
	job.Status.StartTime = mtime(30)
	if o := observeJob("t", job); o.waiting() || !o.Admitted.Equal(at(30)) {
		t.Errorf("admitted Job: waiting=%v admitted=%v", o.waiting(), o.Admitted)
	}
}

func queuedJob(admittedAt int) observedJob {
	j := oneShotJob(1, jobActive, 0)
	j.Queue = "team-a"
	if admittedAt == 0 {
		j.Suspended = true
		j.QueueReason, j.QueueMessage = "Pending", "couldn't assign flavors to pod set main: insufficient unused quota for cpu"
	} else {
		j.Admitted = at(admittedAt)
	}
	return j
}

func TestStatusQueued(t *testing.T) {
	task := newTask(queued, withStatus(v1.TaskStatus{CurrentRun: run(0, 1, v1.RunActive, 0)}))
	st := computeStatus(task, []observedJob{queuedJob(0)}, at(150))
	if st.Phase != v1.PhaseQueued {
		t.Fatalf("phase %s, want Queued", st.Phase)
	}
	adm := meta.FindStatusCondition(st.Conditions, v1.ConditionAdmitted)
	if adm == nil || adm.Status != metav1.ConditionFalse || adm.Reason != "Pending" || !strings.Contains(adm.Message, "insufficient unused quota") {
		t.Errorf("Admitted condition %+v", adm)
	}
	prog := meta.FindStatusCondition(st.Conditions, v1.ConditionProgressing)
	if prog.Reason != v1.ReasonQueued || !strings.Contains(prog.Message, "LocalQueue team-a") {
		t.Errorf("Progressing %+v", prog)
	}
	if !meta.IsStatusConditionTrue(st.Conditions, v1.ConditionReconciling) {
		t.Error("a queued one-shot Task is Reconciling (kstatus InProgress)")
	}
	if st.CurrentRun.AdmittedTime != nil {
		t.Errorf("admittedTime %v while waiting", st.CurrentRun.AdmittedTime)
	}

	task.Status = st
	st = computeStatus(task, []observedJob{queuedJob(200)}, at(210))
	if st.Phase != v1.PhaseRunning || st.CurrentRun.AdmittedTime == nil || !st.CurrentRun.AdmittedTime.Time.Equal(at(200)) {
		t.Fatalf("admitted: phase %s, currentRun %+v", st.Phase, st.CurrentRun)
	}
	if adm := meta.FindStatusCondition(st.Conditions, v1.ConditionAdmitted); adm.Status != metav1.ConditionTrue || adm.Reason != v1.ReasonAdmitted {
		t.Errorf("Admitted condition once admitted %+v", adm)
	}

	// Preempted: suspended again by Kueue. Not a failure: the same attempt waits again.
	task.Status = st
	pre := queuedJob(0)
	pre.QueueReason = "Preempted"
	st = computeStatus(task, []observedJob{pre}, at(220))
	if st.Phase != v1.PhaseQueued || st.Attempts != 1 || st.CurrentRun.Outcome != v1.RunActive || st.CurrentRun.AdmittedTime != nil {
		t.Errorf("preempted: phase %s attempts %d currentRun %+v", st.Phase, st.Attempts, st.CurrentRun)
	}
}

func TestStatusWithoutKueue(t *testing.T) {
	task := newTask(queued)
	a := analyzeIn(task, nil, at(1), false)
	if p := planRuns(task, a, nil, at(1)); p.create != nil {
		t.Error("no Job is created for a queued Task without Kueue")
	}
	st := computeStatusIn(task, nil, at(1), false)
	adm := meta.FindStatusCondition(st.Conditions, v1.ConditionAdmitted)
	if st.Phase != v1.PhasePending || adm == nil || adm.Reason != v1.ReasonKueueNotInstalled || !meta.IsStatusConditionTrue(st.Conditions, v1.ConditionStalled) {
		t.Errorf("phase %s, conditions %+v", st.Phase, st.Conditions)
	}
	// A Task without a queue does not care.
	if p := planRuns(newTask(), analyzeIn(newTask(), nil, at(1), false), nil, at(1)); p.create == nil {
		t.Error("a Task without queue runs without Kueue")
	}
	if st := computeStatus(newTask(), nil, at(1)); meta.FindStatusCondition(st.Conditions, v1.ConditionAdmitted) != nil {
		t.Error("a Task without queue has no Admitted condition")
	}
}

func TestQueuedJobsAreNotUnsuspended(t *testing.T) {
	task := newTask(queued)
	if flips := suspendFlips(task, []observedJob{queuedJob(0)}); len(flips) != 0 {
		t.Errorf("the operator unsuspends a queued Job: %v", flips)
	}
	plain := oneShotJob(1, jobActive, 0)
	plain.Suspended = true
	if flips := suspendFlips(newTask(), []observedJob{plain}); len(flips) != 1 {
		t.Error("a suspended Job of a running Task without queue is resumed")
	}
}

func TestWaitReason(t *testing.T) {
	wl := func(conds ...map[string]any) *unstructured.Unstructured {
		raw := make([]any, 0, len(conds))
		for _, c := range conds {
			raw = append(raw, c)
		}
		return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "job-t-0-1-abcde"}, "status": map[string]any{"conditions": raw}}}
	}
	cond := func(typ, status, reason, msg string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg}
	}
	tests := []struct {
		wl         *unstructured.Unstructured
		wantReason string
		wantMsg    string
	}{
		{wl(), v1.ReasonQueuePending, "job-t-0-1-abcde"},
		{wl(cond("QuotaReserved", "False", "Pending", "insufficient unused quota")), "Pending", "insufficient unused quota"},
		{wl(cond("QuotaReserved", "False", "Inadmissible", "LocalQueue team-a doesn't exist")), "Inadmissible", "doesn't exist"},
		{wl(cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"), cond("Admitted", "False", "", "")), "AdmissionChecksPending", "Quota reserved"},
		{wl(cond("QuotaReserved", "True", "QuotaReserved", ""), cond("Admitted", "True", "Admitted", "")), v1.ReasonAdmitted, "admitted"},
		{wl(cond("QuotaReserved", "False", "Pending", "insufficient unused quota"), cond("Evicted", "True", "Preempted", "Preempted to accommodate a workload")), "Preempted", "Preempted to accommodate"},
	}
	for i, tc := range tests {
		got := waitReason(tc.wl)
		if got.reason != tc.wantReason || !strings.Contains(got.message, tc.wantMsg) {
			t.Errorf("%d: waitReason = %+v, want reason %s and a message with %q", i, got, tc.wantReason, tc.wantMsg)
		}
	}
}

func TestWorkloadOwnerJob(t *testing.T) {
	u := newWorkload(batchv1.SchemeGroupVersion.WithKind("Workload"))
	yes := true
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "t-0-1", UID: "u", Controller: &yes}})
	if got := indexWorkloadJob(u); len(got) != 1 || got[0] != "t-0-1" {
		t.Errorf("index %v", got)
	}
	u.SetOwnerReferences(nil)
	if got := indexWorkloadJob(u); got != nil {
		t.Errorf("index of an unowned Workload %v", got)
	}
}

// TestSuspendedTaskWithAnAdmittedQueuedRunShowsRunning: spec.suspend does not stop a queued
// run Kueue admitted (README's documented limit), so its pods run; yet the Task says Suspended
// (and kstatus "it has not run"). It should say Running while the Job runs.
func TestSuspendedTaskWithAnAdmittedQueuedRunShowsRunning(t *testing.T) {
	task := newTask(queued, func(t *v1.Task) { t.Spec.Suspend = true },
		withStatus(v1.TaskStatus{CurrentRun: run(0, 1, v1.RunActive, 0)}))
	jobs := []observedJob{queuedJob(200)} // admitted at 200, running, not suspended
	if flips := suspendFlips(task, jobs); len(flips) != 0 {
		t.Fatalf("precondition: the operator leaves a queued Job's suspend to Kueue, flips %v", flips)
	}
	st := computeStatus(task, jobs, at(210))
	if st.Phase != v1.PhaseRunning {
		t.Errorf("phase %s while the admitted queued Job runs (spec.suspend cannot stop it), want Running", st.Phase)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionProgressing); c == nil || c.Status != "True" {
		t.Errorf("Progressing %+v while the Job runs", c)
	}
}
