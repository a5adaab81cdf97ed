package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	taskv1 "example.com/task-operator/apis/v1"
)

// A watch whose resourceVersion expired (410 Gone) lists again and goes on from the new list's
// version: a run that changed meanwhile is printed once, one printed already as it is is not,
// and every watch starts at the version of the list (or event) before it.
func TestRunsWatchRelistsAfterGoneWithoutPrintingRunsAgain(t *testing.T) {
	task := &taskv1.Task{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns", UID: "uid-t"}}
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	job := func(name, rv string, done bool) batchv1.Job {
		j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", ResourceVersion: rv, CreationTimestamp: t0,
			Labels:          map[string]string{taskv1.LabelTaskName: "t", taskv1.LabelAttempt: "1"},
			OwnerReferences: []metav1.OwnerReference{{UID: "uid-t", Controller: ptr.To(true)}},
		}}
		if done {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: t0}}
			j.Status.CompletionTime = &t0
		}
		return j
	}
	kube := fake.NewClientset()
	// The relist: t-0-1 as the first watch showed it, t-0-2 finished while no watch ran.
	kube.PrependReactor("list", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &batchv1.JobList{ListMeta: metav1.ListMeta{ResourceVersion: "30"},
			Items: []batchv1.Job{job("t-0-1", "12", true), job("t-0-2", "25", true)}}, nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var watchedFrom []string
	kube.PrependWatchReactor("jobs", func(a k8stesting.Action) (bool, watch.Interface, error) {
		watchedFrom = append(watchedFrom, a.(k8stesting.WatchActionImpl).WatchRestrictions.ResourceVersion)
		w := watch.NewFakeWithChanSize(3, false)
		switch len(watchedFrom) {
		case 1:
			done := job("t-0-1", "12", true)
			w.Modify(&done)
			w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 10 (20)"})
			w.Stop()
		case 2:
			w.Stop()
		default:
			cancel()
		}
		return true, w, nil
	})
	var out bytes.Buffer
	listed := []batchv1.Job{job("t-0-1", "10", false), job("t-0-2", "11", false)}
	if err := watchRuns(ctx, &clients{kube: kube}, task, listed, "10", nil, &out); err != nil {
		t.Fatal(err)
	}
	if want := []string{"10", "30", "30"}; strings.Join(watchedFrom, ",") != strings.Join(want, ",") {
		t.Errorf("watched from resourceVersions %v, want %v", watchedFrom, want)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "t-0-1") || !strings.Contains(lines[1], "t-0-2") {
		t.Fatalf("printed:\n%s\nwant t-0-1 then t-0-2, each once", out.String())
	}
	for _, l := range lines {
		if !strings.Contains(l, "Succeeded") {
			t.Errorf("row %q is not the Succeeded run", l)
		}
	}
}
