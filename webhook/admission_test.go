package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	jsonpatch5 "github.com/evanphx/json-patch/v5"
	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/conversion"
	"example.com/task-operator/conversion/fuzzer"
)

func shellTask(mutate func(*taskv1.TaskSpec)) *taskv1.Task {
	task := &taskv1.Task{
		TypeMeta:   metav1.TypeMeta{APIVersion: taskv1.GroupVersion.String(), Kind: taskv1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns"},
		Spec:       taskv1.TaskSpec{Runner: taskv1.Runner{Type: taskv1.RunnerShell, Shell: &taskv1.ShellRunner{Script: "true"}}},
	}
	if mutate != nil {
		mutate(&task.Spec)
	}
	return task
}

func request(t *testing.T, op admissionv1.Operation, subresource string, task *taskv1.Task) admission.Request {
	t.Helper()
	raw, err := json.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	gvk := metav1.GroupVersionKind{Group: taskv1.Group, Version: "v1", Kind: taskv1.Kind}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op, SubResource: subresource, Kind: gvk, RequestKind: &gvk, Name: task.Name,
		Object: runtime.RawExtension{Raw: raw},
	}}
	if op == admissionv1.Update {
		req.OldObject = runtime.RawExtension{Raw: raw}
	}
	return req
}

func TestValidator(t *testing.T) {
	huge := func(s *taskv1.TaskSpec) {
		for i := range 64 {
			s.Runner.Shell.Env = append(s.Runner.Shell.Env, taskv1.EnvVar{Name: fmt.Sprintf("V%d", i), Value: fuzzer.IncompressibleText(i, 4096)})
		}
	}
	tests := []struct {
		name        string
		subresource string
		mutate      func(*taskv1.TaskSpec)
		wantField   string // empty: valid
	}{
		{"no schedule", "", nil, ""},
		{"five fields", "", func(s *taskv1.TaskSpec) { s.Schedule = &taskv1.Schedule{Cron: "*/5 * * * *"} }, ""},
		{"bad cron", "", func(s *taskv1.TaskSpec) { s.Schedule = &taskv1.Schedule{Cron: "every tuesday"} }, "spec.schedule.cron"},
		{"TZ prefix", "", func(s *taskv1.TaskSpec) { s.Schedule = &taskv1.Schedule{Cron: "TZ=UTC"} }, "spec.schedule.cron"},
		{"unknown zone", "", func(s *taskv1.TaskSpec) { s.Schedule = &taskv1.Schedule{Cron: "@daily", TimeZone: "Mars/Olympus_Mons"} }, "spec.schedule.timeZone"},
		{"unreadable at old versions", "", huge, "spec.runner.shell.env"},
		{"status write of an unreadable Task", "status", huge, "spec.runner.shell.env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update} {
				if tt.subresource != "" && op == admissionv1.Create {
					continue
				}
				resp := Validator{}.Handle(context.Background(), request(t, op, tt.subresource, shellTask(tt.mutate)))
				switch {
				case tt.wantField == "" && !resp.Allowed:
					t.Errorf("%s: rejected a valid Task: %v", op, resp.Result)
				case tt.wantField != "" && resp.Allowed:
					t.Errorf("%s: allowed, want an error naming %s", op, tt.wantField)
				case tt.wantField != "" && !strings.Contains(resp.Result.Message, tt.wantField):
					t.Errorf("%s: error %q does not name %s", op, resp.Result.Message, tt.wantField)
				}
			}
		})
	}
}

// TestValidatorRefusesJobControllerLabels: a Task's labels are copied to its runs' pods, and
// the API server refuses a Job whose pod template carries the Job controller's own labels. A
// Task adding one is refused naming the label; one stored with it before keeps taking writes.
func TestValidatorRefusesJobControllerLabels(t *testing.T) {
	withLabels := func(kv ...string) *taskv1.Task {
		task := shellTask(nil)
		task.Labels = map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			task.Labels[kv[i]] = kv[i+1]
		}
		return task
	}
	tests := []struct {
		name      string
		op        admissionv1.Operation
		old, task *taskv1.Task
		wantField string // empty: allowed
	}{
		{"job-name on create", admissionv1.Create, nil, withLabels("job-name", "x"), "metadata.labels[job-name]"},
		{"controller-uid on create", admissionv1.Create, nil, withLabels("controller-uid", "u"), "metadata.labels[controller-uid]"},
		{"batch.kubernetes.io/ on create", admissionv1.Create, nil, withLabels("batch.kubernetes.io/job-name", "x"), "metadata.labels[batch.kubernetes.io/job-name]"},
		{"added by an update", admissionv1.Update, withLabels("team", "a"), withLabels("team", "a", "job-name", "x"), "metadata.labels[job-name]"},
		{"changed by an update", admissionv1.Update, withLabels("job-name", "x"), withLabels("job-name", "y"), "metadata.labels[job-name]"},
		{"kept by an update", admissionv1.Update, withLabels("job-name", "x"), withLabels("job-name", "x", "team", "b"), ""},
		{"removed by an update", admissionv1.Update, withLabels("job-name", "x"), withLabels("team", "b"), ""},
		{"look-alikes are fine", admissionv1.Create, nil, withLabels("my-job-name", "x", "example.com/batch.kubernetes.io", "y"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := request(t, tt.op, "", tt.task)
			if tt.old != nil {
				raw, err := json.Marshal(tt.old)
				if err != nil {
					t.Fatal(err)
				}
				req.OldObject = runtime.RawExtension{Raw: raw}
			}
			resp := Validator{}.Handle(context.Background(), req)
			switch {
			case tt.wantField == "" && !resp.Allowed:
				t.Errorf("refused: %v", resp.Result)
			case tt.wantField != "" && resp.Allowed:
				t.Errorf("allowed, want an error naming %s", tt.wantField)
			case tt.wantField != "" && !strings.Contains(resp.Result.Message, tt.wantField):
				t.Errorf("error %q does not name %s", resp.Result.Message, tt.wantField)
			}
		})
	}
}

func TestMutator(t *testing.T) {
	task := shellTask(func(s *taskv1.TaskSpec) { s.Schedule = &taskv1.Schedule{Cron: "@daily"} })
	task.Annotations = map[string]string{conversion.PreservedAnnotation: `{"v":2}`, "keep": "me"}
	resp := Mutator{}.Handle(context.Background(), request(t, admissionv1.Create, "", task))
	if !resp.Allowed {
		t.Fatalf("denied: %v", resp.Result)
	}
	ops := map[string]jsonpatch.Operation{}
	for _, op := range resp.Patches {
		ops[op.Path] = op
	}
	for _, want := range []string{
		"/metadata/annotations/task.example.com~1preserved-v1-fields", // removed
		"/spec/successfulJobsHistoryLimit", "/spec/failedJobsHistoryLimit", "/spec/retry",
	} {
		if _, ok := ops[want]; !ok {
			t.Errorf("no patch of %s in %v", want, resp.Patches)
		}
	}
	if op := ops["/metadata/annotations/task.example.com~1preserved-v1-fields"]; op.Operation != "remove" {
		t.Errorf("preserved annotation: %s, want remove", op.Operation)
	}
	if _, ok := ops["/metadata/annotations/keep"]; ok {
		t.Errorf("touched an annotation it has no business with")
	}
}

func TestMutatorRejectsGarbage(t *testing.T) {
	req := request(t, admissionv1.Create, "", shellTask(nil))
	req.Object.Raw = []byte("{not json")
	if resp := (Mutator{}).Handle(context.Background(), req); resp.Allowed {
		t.Fatal("allowed an object that is not JSON")
	}
}

// TestMutatorPlacesFinalizerOnCreate: a Task created at v1 to run at once gets the operator's
// finalizer at admission, so the operator needs no write of its own before the run's Job (issue
// #13); the others, creates at older versions (a patch there would hide invalid old-version
// values from their schema), and every update are left alone.
func TestMutatorPlacesFinalizerOnCreate(t *testing.T) {
	tests := []struct {
		name    string
		op      admissionv1.Operation
		version string
		task    *taskv1.Task
		want    bool
	}{
		{"one-shot at v1", admissionv1.Create, "v1", shellTask(nil), true},
		{"one-shot at v1alpha1", admissionv1.Create, "v1alpha1", shellTask(nil), false},
		{"one-shot at v1beta1", admissionv1.Create, "v1beta1", shellTask(nil), false},
		{"suspended", admissionv1.Create, "v1", shellTask(func(s *taskv1.TaskSpec) { s.Suspend = true }), false},
		{"scheduled", admissionv1.Create, "v1", shellTask(func(s *taskv1.TaskSpec) { s.Schedule = &taskv1.Schedule{Cron: "@daily"} }), false},
		{"update of a one-shot", admissionv1.Update, "v1", shellTask(nil), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := request(t, tt.op, "", tt.task)
			req.RequestKind = &metav1.GroupVersionKind{Group: taskv1.Group, Version: tt.version, Kind: taskv1.Kind}
			got := finalizersAfter(t, req)
			if want := []string(nil); tt.want {
				want = []string{taskv1.FinalizerJobs}
				if !slices.Equal(got, want) {
					t.Errorf("finalizers %v, want %v", got, want)
				}
			} else if len(got) != 0 {
				t.Errorf("finalizers %v, want none", got)
			}
		})
	}
	t.Run("kept, not repeated", func(t *testing.T) {
		task := shellTask(nil)
		task.Finalizers = []string{"example.org/mine", taskv1.FinalizerJobs}
		got := finalizersAfter(t, request(t, admissionv1.Create, "", task))
		if !slices.Equal(got, task.Finalizers) {
			t.Errorf("finalizers %v, want %v", got, task.Finalizers)
		}
	})
	t.Run("beside the user's", func(t *testing.T) {
		task := shellTask(nil)
		task.Finalizers = []string{"example.org/mine"}
		got := finalizersAfter(t, request(t, admissionv1.Create, "", task))
		if want := []string{"example.org/mine", taskv1.FinalizerJobs}; !slices.Equal(got, want) {
			t.Errorf("finalizers %v, want %v", got, want)
		}
	})
}

// finalizersAfter runs the Mutator on req and applies its patch to the object sent.
func finalizersAfter(t *testing.T, req admission.Request) []string {
	t.Helper()
	resp := Mutator{}.Handle(context.Background(), req)
	if !resp.Allowed {
		t.Fatalf("denied: %v", resp.Result)
	}
	ops, err := json.Marshal(resp.Patches)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := jsonpatch5.DecodePatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	out, err := patch.Apply(req.Object.Raw)
	if err != nil {
		t.Fatalf("apply %s: %v", ops, err)
	}
	var task taskv1.Task
	if err := json.Unmarshal(out, &task); err != nil {
		t.Fatal(err)
	}
	return task.Finalizers
}

// rawCreate is a CREATE at v1 of the JSON given, as the apiserver would send it (or as a
// hostile or buggy caller of the webhook's endpoint might).
func rawCreate(raw string, dryRun bool) admission.Request {
	gvk := metav1.GroupVersionKind{Group: taskv1.Group, Version: "v1", Kind: taskv1.Kind}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Kind: gvk, RequestKind: &gvk, Name: "t", DryRun: &dryRun,
		Object: runtime.RawExtension{Raw: []byte(raw)},
	}}
}

// patchedMeta applies the Mutator's answer and returns the resulting metadata (nil if denied).
func patchedMeta(t *testing.T, req admission.Request) (map[string]any, admission.Response) {
	t.Helper()
	var resp admission.Response
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("Mutator panicked on %s: %v", req.Object.Raw, p)
			}
		}()
		resp = Mutator{}.Handle(context.Background(), req)
	}()
	if !resp.Allowed {
		return nil, resp
	}
	ops, _ := json.Marshal(resp.Patches)
	patch, err := jsonpatch5.DecodePatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	out, err := patch.Apply(req.Object.Raw)
	if err != nil {
		t.Fatalf("apply %s to %s: %v", ops, req.Object.Raw, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(out, &obj); err != nil {
		t.Fatal(err)
	}
	meta, _ := obj["metadata"].(map[string]any)
	return meta, resp
}

const runnableSpec = `"spec":{"runner":{"type":"Shell","shell":{"script":"true"}}}`

func TestCreateFinalizerAddedOnlyToAWellFormedList(t *testing.T) {
	head := `{"apiVersion":"example.com/v1","kind":"Task",`
	for _, tt := range []struct {
		name, meta string
		want       []any // nil: denied or not checked
	}{
		{"null list", `"metadata":{"name":"t","namespace":"ns","finalizers":null}`, []any{taskv1.FinalizerJobs}},
		{"empty list", `"metadata":{"name":"t","namespace":"ns","finalizers":[]}`, []any{taskv1.FinalizerJobs}},
		{"duplicates of another kept", `"metadata":{"name":"t","namespace":"ns","finalizers":["a/b","a/b"]}`, []any{"a/b", "a/b", taskv1.FinalizerJobs}},
		{"ours twice left alone", `"metadata":{"name":"t","namespace":"ns","finalizers":["` + taskv1.FinalizerJobs + `","` + taskv1.FinalizerJobs + `"]}`, []any{taskv1.FinalizerJobs, taskv1.FinalizerJobs}},
		{"non-string elements", `"metadata":{"name":"t","namespace":"ns","finalizers":[1,{"x":1},null]}`, nil},
		{"a string, not a list", `"metadata":{"name":"t","namespace":"ns","finalizers":"a/b"}`, nil},
		{"an object, not a list", `"metadata":{"name":"t","namespace":"ns","finalizers":{"a":"b"}}`, nil},
		{"metadata a string", `"metadata":"x"`, nil},
		{"metadata null", `"metadata":null`, nil},
		{"no metadata", `"x":1`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			meta, resp := patchedMeta(t, rawCreate(head+tt.meta+","+runnableSpec+"}", false))
			t.Logf("allowed=%v result=%v finalizers=%#v", resp.Allowed, resp.Result, meta["finalizers"])
			if _, isList := meta["finalizers"].([]any); isList && (tt.name == "a string, not a list" || tt.name == "an object, not a list") {
				t.Errorf("a malformed finalizers value was replaced by %#v, not left to be refused", meta["finalizers"])
			}
			if tt.want != nil {
				if got, _ := meta["finalizers"].([]any); !slices.Equal(got, tt.want) {
					t.Errorf("finalizers %#v, want %#v", meta["finalizers"], tt.want)
				}
			}
		})
	}
}

// TestDryRunCreateGetsTheFinalizerLikeAnyOther: a dry-run create is answered like any other (sideEffects=None), no state.
func TestDryRunCreateGetsTheFinalizerLikeAnyOther(t *testing.T) {
	meta, resp := patchedMeta(t, rawCreate(`{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"t","namespace":"ns"},`+runnableSpec+`}`, true))
	if !resp.Allowed {
		t.Fatalf("denied: %v", resp.Result)
	}
	if got, _ := meta["finalizers"].([]any); !slices.Equal(got, []any{taskv1.FinalizerJobs}) {
		t.Errorf("finalizers %#v", meta["finalizers"])
	}
}

// TestOddSpecShapesAreAnsweredWithoutPanic: what counts as "runs at once" for odd but possible specs.
func TestOddSpecShapesAreAnsweredWithoutPanic(t *testing.T) {
	for _, tt := range []struct{ name, spec string }{
		{"schedule null", `"spec":{"schedule":null,"runner":{"type":"Shell","shell":{"script":"true"}}}`},
		{"suspend null", `"spec":{"suspend":null,"runner":{"type":"Shell","shell":{"script":"true"}}}`},
		{"suspend string", `"spec":{"suspend":"true","runner":{"type":"Shell","shell":{"script":"true"}}}`},
		{"spec null", `"spec":null`},
		{"spec a string", `"spec":"x"`},
		{"queueName", `"spec":{"queueName":"q","runner":{"type":"Shell","shell":{"script":"true"}}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			meta, resp := patchedMeta(t, rawCreate(`{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"t","namespace":"ns"},`+tt.spec+`}`, false))
			t.Logf("allowed=%v result=%v finalizers=%#v", resp.Allowed, resp.Result, meta["finalizers"])
		})
	}
}
