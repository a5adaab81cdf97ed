package reconciler

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "example.com/task-operator/apis/v1"
)

// sentPatch is one patch a test client received.
type sentPatch struct {
	subresource string
	data        string
}

func patchClient(t *testing.T, task *v1.Task) (client.Client, *[]sentPatch) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	task.ResourceVersion = ""
	var sent []sentPatch
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(task).WithStatusSubresource(&v1.Task{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				data, _ := patch.Data(obj)
				sent = append(sent, sentPatch{data: string(data)})
				return c.Patch(ctx, obj, patch, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				data, _ := patch.Data(obj)
				sent = append(sent, sentPatch{subresource: sub, data: string(data)})
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(task), task); err != nil {
		t.Fatal(err)
	}
	return c, &sent
}

func TestPatchHelper(t *testing.T) {
	tests := []struct {
		name   string
		change func(*v1.Task)
		want   []sentPatch
	}{
		{name: "nothing changed, nothing sent", change: func(*v1.Task) {}},
		{
			name:   "a spec change is never sent",
			change: func(t *v1.Task) { t.Spec.Suspend = true; t.Labels = map[string]string{"x": "y"} },
		},
		{
			name:   "status only",
			change: func(t *v1.Task) { t.Status.Phase = v1.PhaseRunning; t.Status.Attempts = 1 },
			want:   []sentPatch{{subresource: "status", data: `{"metadata":{"resourceVersion":"RV"},"status":{"attempts":1,"phase":"Running"}}`}},
		},
		{
			name:   "a status field removed is sent as null",
			change: func(t *v1.Task) { t.Status.LastError = "" },
			want:   []sentPatch{{subresource: "status", data: `{"metadata":{"resourceVersion":"RV"},"status":{"lastError":null}}`}},
		},
		{
			name:   "finalizer only, guarded by the resourceVersion",
			change: func(t *v1.Task) { t.Finalizers = append(t.Finalizers, v1.FinalizerJobs) },
			want:   []sentPatch{{data: `{"metadata":{"finalizers":["` + v1.FinalizerJobs + `"],"resourceVersion":"RV"}}`}},
		},
		{
			name: "finalizer and status",
			change: func(t *v1.Task) {
				t.Finalizers = append(t.Finalizers, v1.FinalizerJobs)
				t.Status.Phase = v1.PhasePending
			},
			want: []sentPatch{
				{data: `{"metadata":{"finalizers":["` + v1.FinalizerJobs + `"],"resourceVersion":"RV"}}`},
				{subresource: "status", data: `{"metadata":{"resourceVersion":"RV+1"},"status":{"phase":"Pending"}}`},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			task := newTask(withStatus(v1.TaskStatus{LastError: "old"}))
			c, sent := patchClient(t, task)
			rv := task.ResourceVersion
			var written []string
			h := newPatchHelper(c, task, func(t *v1.Task) { written = append(written, t.ResourceVersion) })
			tc.change(task)
			if err := h.Patch(context.Background(), task); err != nil {
				t.Fatalf("Patch: %v", err)
			}
			if len(*sent) != len(tc.want) {
				t.Fatalf("sent %+v, want %+v", *sent, tc.want)
			}
			for i := range tc.want {
				tc.want[i].data = strings.ReplaceAll(tc.want[i].data, "RV+1", written[0])
				tc.want[i].data = strings.ReplaceAll(tc.want[i].data, "RV", rv)
				if (*sent)[i] != tc.want[i] {
					t.Errorf("patch %d = %+v, want %+v", i, (*sent)[i], tc.want[i])
				}
			}
			if len(written) != len(tc.want) {
				t.Errorf("onWrite called %d times, want %d", len(written), len(tc.want))
			}
			// The helper takes the result as its new snapshot: a second Patch sends nothing.
			*sent = nil
			if err := h.Patch(context.Background(), task); err != nil || len(*sent) != 0 {
				t.Errorf("second Patch sent %+v (err %v), want nothing", *sent, err)
			}
		})
	}
}

func TestPatchHelperConflict(t *testing.T) {
	task := newTask()
	c, _ := patchClient(t, task)
	stale := task.DeepCopy()
	// Someone else changes the Task.
	task.Annotations = map[string]string{"other": "writer"}
	if err := c.Update(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	h := newPatchHelper(c, stale, nil)
	stale.Finalizers = append(stale.Finalizers, v1.FinalizerJobs)
	if err := h.Patch(context.Background(), stale); err == nil {
		t.Fatal("a finalizer patch from a stale copy went through")
	}
	// The status too: a record computed from a stale read must not overwrite a newer one.
	stale = task.DeepCopy()
	stale.ResourceVersion = "1"
	h = newPatchHelper(c, stale, nil)
	stale.Status.CurrentRun = &v1.RunRecord{Attempt: 1, Outcome: v1.RunActive}
	if err := h.Patch(context.Background(), stale); err == nil {
		t.Fatal("a status patch from a stale copy went through")
	}
}
