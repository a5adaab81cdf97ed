package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/conversion"
)

// Both webhooks see every write of a Task at v1 (matchPolicy Equivalent: the apiserver converts
// a write made at an old version, and the stored object, to v1 for them), the status
// subresource included. They work on the JSON as sent rather than on typed objects, so that
// what they leave alone keeps the client's spelling (a "5m" stays "5m").

// The webhook configurations are generated from these markers into config/webhook. A status write
// at v1 (the operator's own, every few seconds) has nothing for the mutating webhook to decide:
// its match condition spares the apiserver the call.
// +kubebuilder:webhook:path=/mutate-example-com-v1-task,mutating=true,failurePolicy=fail,sideEffects=None,groups=example.com,resources=tasks;tasks/status,verbs=create;update,versions=v1,name=mtask.example.com,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10,patch=`{"matchConditions":[{"name":"not-a-v1-status-write","expression":"!(has(request.subResource) && request.subResource == 'status' && has(request.requestKind) && request.requestKind.version == 'v1')"}]}`
// +kubebuilder:webhook:path=/validate-example-com-v1-task,mutating=false,failurePolicy=fail,sideEffects=None,groups=example.com,resources=tasks;tasks/status,verbs=create;update,versions=v1,name=vtask.example.com,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10

const (
	mutatePath   = "/mutate-example-com-v1-task"
	validatePath = "/validate-example-com-v1-task"
)

// Mutator decides what is stored (conversion.Decide): the fields an old version cannot express
// come from the stored object, status only from the status subresource, defaults are filled in.
// A Task created at v1 to run at once also gets the operator's finalizer here (withRunFinalizer).
type Mutator struct{}

func (Mutator) Handle(_ context.Context, req admission.Request) admission.Response {
	w, err := writeOf(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if errs := conversion.CheckQuantities(w.Object, w.OldObject); len(errs) > 0 {
		return refused(nameIn(w.Object), errs) // at once: the validating webhook would, after this one
	}
	decided, err := conversion.Decide(w)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	// Only at v1: at an older version a patch makes the apiserver convert the patched object
	// back to that version, and a value the old version's schema would have refused (replicas:
	// 0 at v1alpha1, which v1 defaults) no longer reaches its validation. The operator places
	// the finalizer itself there, one write more.
	if w.Create && !w.Status && w.Version == taskv1.GroupVersion.Version {
		withRunFinalizer(decided)
	}
	raw, err := json.Marshal(decided)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	resp := admission.PatchResponseFromRaw(req.Object.Raw, raw)
	if w.Version != taskv1.GroupVersion.Version && len(resp.Patches) == 0 {
		convertBack(&resp)
	}
	return resp
}

// convertBack makes resp patch the object even when the decision changes nothing: on a write at
// an old version the apiserver converts a patched object back to that version, and only then is
// what it stores the conversion of this decision. Without a patch it stores the client's own
// object at that version, converted with the client's preserved annotation after the
// apiserver's own changes (status reset on the main resource, spec on the status subresource):
// a forged annotation could then set status (issue #27, item 3), and a field the old version's
// type cannot tell from unset (suspend: false) counted as a spec change and bumped
// metadata.generation on a write that changed nothing (item 4). The cost is one conversion call
// more per old-version write.
func convertBack(resp *admission.Response) {
	resp.Patches = []jsonpatch.JsonPatchOperation{{Operation: "test", Path: "/apiVersion", Value: taskv1.GroupVersion.String()}}
	pt := admissionv1.PatchTypeJSONPatch
	resp.PatchType = &pt
}

// withRunFinalizer adds taskv1.FinalizerJobs to a Task being created that starts a run as soon
// as the operator sees it: one without a schedule, not suspended (after defaulting, at any
// version the client wrote). The operator would otherwise have to write it before creating the
// run's Job (reconciler's ensureFinalizer), one write more on the way to Running. The rest get
// none: the operator would only take it off again, a write for nothing; it adds the finalizer
// itself before their first Job. Only CREATE is touched: a finalizer taken off later (by the
// operator when the run is recorded, or by a user) is never put back here.
func withRunFinalizer(task map[string]any) {
	spec, _ := task["spec"].(map[string]any)
	if suspend, _ := spec["suspend"].(bool); suspend || spec["schedule"] != nil {
		return
	}
	meta, _ := task["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		task["metadata"] = meta
	}
	list, ok := meta["finalizers"].([]any)
	if !ok && meta["finalizers"] != nil {
		return // not a list: the apiserver never sends one; leave it to be refused, not replaced
	}
	for _, f := range list {
		if f == taskv1.FinalizerJobs {
			return
		}
	}
	meta["finalizers"] = append(list, taskv1.FinalizerJobs)
}

// Validator checks what neither the OpenAPI schema nor CEL can: that a cron expression parses,
// a time zone exists (taskv1.Validate), and that the Task stays readable at every old version
// (conversion.CheckReadable). It also counts the write per version and user (UsageRecorder;
// Usage may be nil: the metric is counted all the same).
type Validator struct {
	Usage *UsageRecorder
}

func (v Validator) Handle(_ context.Context, req admission.Request) admission.Response {
	v.Usage.observe(req)
	obj, err := conversion.DecodeObject(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if unfit, err := quantityErrors(req, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	} else if len(unfit) > 0 {
		return refused(nameIn(obj), unfit) // before any typed decoding, which would spin on such a quantity
	}
	// What is left out of bounds is as stored: no check below reads it, and no decoding could.
	conversion.DropUnfitQuantities(obj)
	// Typed from obj, what the checks above read, and with its keys matched exactly, as the
	// apiserver reads them: not again from the raw bytes, where a key in another case or
	// repeated would bring a value no check saw.
	canonical, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	task := &taskv1.Task{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(canonical, task); err != nil {
		at := conversion.UnreadableField(obj)
		if at == "" {
			return admission.Errored(http.StatusBadRequest, err)
		}
		return refused(nameIn(obj), field.ErrorList{field.Invalid(field.NewPath(at), field.OmitValueType{}, err.Error())})
	}
	var errs field.ErrorList
	if req.SubResource == "" {
		specErrs := taskv1.Validate(task)
		if req.RequestKind != nil {
			specErrs = atClientVersion(specErrs, req.RequestKind.Version)
		}
		errs = append(errs, specErrs...)
		old, err := oldLabels(req)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		errs = append(errs, taskv1.ValidateLabels(task.Labels, old)...)
	}
	var stored []byte
	if req.Operation == admissionv1.Update {
		stored = req.OldObject.Raw
	}
	errs = append(errs, conversion.CheckTimes(req.Object.Raw, obj, stored)...)
	errs = append(errs, conversion.CheckReadable(obj)...)
	if len(errs) == 0 {
		return admission.Allowed("")
	}
	return refused(task.Name, errs)
}

// quantityErrors is conversion.CheckQuantities of obj against the stored Task of an update,
// which is decoded only when obj has a quantity out of bounds: most writes have none.
func quantityErrors(req admission.Request, obj map[string]any) (field.ErrorList, error) {
	errs := conversion.CheckQuantities(obj, nil)
	if len(errs) == 0 || req.Operation != admissionv1.Update {
		return errs, nil
	}
	old, err := conversion.DecodeObject(req.OldObject.Raw)
	if err != nil {
		return nil, fmt.Errorf("decode the stored Task: %w", err)
	}
	return conversion.CheckQuantities(obj, old), nil
}

// atClientVersion names each field of errs (v1 paths: the checks read the Task at v1) as the
// client's version spells it, for a write at an old version: spec.schedule for v1's
// spec.schedule.cron at v1beta1. A field the old version has no place for keeps its v1 path,
// marked as such.
func atClientVersion(errs field.ErrorList, version string) field.ErrorList {
	fields, old := conversion.FieldMaps(version)
	if !old {
		return errs
	}
	for _, e := range errs {
		if at, ok := fields.SpokePath(e.Field); ok {
			e.Field = at
		} else {
			e.Field += " (at " + taskv1.GroupVersion.Version + ")"
		}
	}
	return errs
}

// refused denies a write of the Task named name as Invalid, naming the fields in errs.
func refused(name string, errs field.ErrorList) admission.Response {
	invalid := apierrors.NewInvalid(taskv1.GroupKind, name, errs)
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &invalid.ErrStatus}}
}

// nameIn is the name in a decoded object's metadata, "" if none.
func nameIn(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	return name
}

// oldLabels are the labels of the stored Task an update replaces; nil on create.
func oldLabels(req admission.Request) (map[string]string, error) {
	if req.Operation != admissionv1.Update || len(req.OldObject.Raw) == 0 {
		return nil, nil
	}
	var old struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return nil, fmt.Errorf("decode the stored Task: %w", err)
	}
	return old.Metadata.Labels, nil
}

// writeOf reads a write of a Task from an admission request.
func writeOf(req admission.Request) (conversion.Write, error) {
	w := conversion.Write{
		Version: req.Kind.Version,
		Create:  req.Operation == admissionv1.Create,
		Status:  req.SubResource == "status",
	}
	if req.RequestKind != nil {
		w.Version = req.RequestKind.Version
	}
	w.FieldManager = fieldManagerOf(req)
	var err error
	if w.Object, err = conversion.DecodeObject(req.Object.Raw); err != nil {
		return w, err
	}
	if !w.Create {
		w.OldObject, err = conversion.DecodeObject(req.OldObject.Raw)
	}
	return w, err
}

// fieldManagerOf returns the fieldManager of the request's options (UpdateOptions for an update
// or a patch, server-side apply included; CreateOptions for a create), "" if none.
func fieldManagerOf(req admission.Request) string {
	var opts struct {
		FieldManager string `json:"fieldManager"`
	}
	if len(req.Options.Raw) == 0 || json.Unmarshal(req.Options.Raw, &opts) != nil {
		return ""
	}
	return opts.FieldManager
}
