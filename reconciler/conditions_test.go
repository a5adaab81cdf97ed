package reconciler

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/conversion"
)

// kstatusAt is kstatusOf for the Task as the API server serves it at version: converted down by
// the conversion webhook's own Convert.
func kstatusAt(t *testing.T, task *v1.Task, version string) kstatus.Status {
	t.Helper()
	task = task.DeepCopy()
	task.APIVersion, task.Kind = v1.GroupVersion.String(), v1.Kind
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(task)
	if err != nil {
		t.Fatal(err)
	}
	if obj, err = conversion.Convert(obj, version); err != nil {
		t.Fatalf("convert to %s: %v", version, err)
	}
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
	if err != nil {
		t.Fatalf("kstatus.Compute at %s: %v", version, err)
	}
	return res.Status
}

// kstatusOf computes what sigs.k8s.io/cli-utils' kstatus (Flux, kpt, Argo CD health checks)
// makes of a Task, through the same unstructured form those tools read.
func kstatusOf(t *testing.T, task *v1.Task) kstatus.Status {
	t.Helper()
	task = task.DeepCopy()
	task.APIVersion, task.Kind = v1.GroupVersion.String(), v1.Kind
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(task)
	if err != nil {
		t.Fatal(err)
	}
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
	if err != nil {
		t.Fatalf("kstatus.Compute: %v", err)
	}
	return res.Status
}

// kstatusCase is a Task, its Jobs and the time, and what kstatus makes of its status at v1.
type kstatusCase struct {
	name string
	task *v1.Task
	jobs []observedJob
	now  int
	want kstatus.Status
}

// kstatusCases are the Task states of the README's kstatus table.
func kstatusCases() []kstatusCase {
	return []kstatusCase{
		{name: "one-shot Pending", task: newTask(), want: kstatus.InProgressStatus},
		{name: "one-shot Running", task: newTask(), jobs: []observedJob{oneShotJob(1, jobActive, 0)}, want: kstatus.InProgressStatus},
		{name: "one-shot Retrying", task: newTask(), jobs: []observedJob{oneShotJob(1, jobFailed, 150)}, now: 150, want: kstatus.InProgressStatus},
		{name: "one-shot Suspended", task: newTask(suspended), want: kstatus.InProgressStatus},
		{name: "one-shot Succeeded", task: newTask(), jobs: []observedJob{oneShotJob(1, jobSucceeded, 150)}, want: kstatus.CurrentStatus},
		{name: "one-shot Failed", task: newTask(maxRetries(0)), jobs: []observedJob{oneShotJob(1, jobFailed, 150)}, want: kstatus.FailedStatus},
		{name: "scheduled, waiting", task: newTask(scheduled(v1.AllowConcurrent)), now: 30, want: kstatus.CurrentStatus},
		{name: "scheduled, running", task: newTask(scheduled(v1.AllowConcurrent)), jobs: []observedJob{schedJob(60, 1, jobActive, 0)}, now: 90, want: kstatus.CurrentStatus},
		{name: "scheduled, last run succeeded", task: newTask(scheduled(v1.AllowConcurrent)), jobs: []observedJob{schedJob(60, 1, jobSucceeded, 70)}, now: 90, want: kstatus.CurrentStatus},
		{name: "scheduled, retrying", task: newTask(scheduled(v1.AllowConcurrent)), jobs: []observedJob{schedJob(60, 1, jobFailed, 70)}, now: 70, want: kstatus.CurrentStatus},
		{name: "scheduled, last run failed", task: newTask(scheduled(v1.AllowConcurrent), maxRetries(0)), jobs: []observedJob{schedJob(60, 1, jobFailed, 70)}, now: 90, want: kstatus.InProgressStatus},
		{name: "scheduled, suspended", task: newTask(scheduled(v1.AllowConcurrent), suspended), now: 30, want: kstatus.InProgressStatus}, // no run starts: not healthy
		{name: "invalid schedule", task: newTask(func(t *v1.Task) { t.Spec.Schedule = &v1.Schedule{Cron: "nope"} }), want: kstatus.FailedStatus},
	}
}

// TestKstatusAtEachVersion pins what kstatus makes of each Task state read at each served
// version (the README's kstatus table). v1beta1 carries conditions and observedGeneration, so it
// reads as v1 does. v1alpha1's frozen status has neither (state, retryCount, lastJobName,
// lastError, lastUpdateTime), and kstatus reads an object without them as Current whatever
// happened, a Failed Task or an unobserved spec change included: tools that rely on kstatus must
// read Tasks at v1 (or v1beta1).
func TestKstatusAtEachVersion(t *testing.T) {
	for _, tc := range kstatusCases() {
		t.Run(tc.name, func(t *testing.T) {
			now := at(1000)
			if tc.now != 0 {
				now = at(tc.now)
			}
			task := tc.task.DeepCopy()
			task.Name, task.Namespace, task.Generation = "t", "ns", 1
			task.Status = computeStatus(task, tc.jobs, now)
			for _, v := range []struct {
				version            string
				want, unobservedTo kstatus.Status
			}{
				{"v1", tc.want, kstatus.InProgressStatus},
				{"v1beta1", tc.want, kstatus.InProgressStatus},
				{"v1alpha1", kstatus.CurrentStatus, kstatus.CurrentStatus},
			} {
				if got := kstatusAt(t, task, v.version); got != v.want {
					t.Errorf("at %s: kstatus = %s, want %s (phase %s)", v.version, got, v.want, task.Status.Phase)
				}
				unobserved := task.DeepCopy()
				unobserved.Generation++
				if got := kstatusAt(t, unobserved, v.version); got != v.unobservedTo {
					t.Errorf("at %s with an unobserved generation: kstatus = %s, want %s", v.version, got, v.unobservedTo)
				}
			}
		})
	}
}

// TestKstatus is issue #14 item 10: before, Running and Retrying computed Current (so a GitOps
// rollout took a Task that had not run for done) and Failed computed InProgress forever.
func TestKstatus(t *testing.T) {
	tests := kstatusCases()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := at(1000)
			if tc.now != 0 {
				now = at(tc.now)
			}
			task := tc.task
			task.Status = computeStatus(task, tc.jobs, now)
			if got := kstatusOf(t, task); got != tc.want {
				t.Errorf("kstatus = %s, want %s (phase %s, conditions %+v)", got, tc.want, task.Status.Phase, task.Status.Conditions)
			}
			// A spec change not yet observed is InProgress, whatever the conditions say.
			task.Generation++
			if got := kstatusOf(t, task); got != kstatus.InProgressStatus {
				t.Errorf("with an unobserved generation: kstatus = %s, want InProgress", got)
			}
		})
	}
}
