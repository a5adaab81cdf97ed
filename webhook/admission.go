package webhook

import (
	"context"
	"time"

	"github.com/robfig/cron/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	taskv1 "example.com/task-operator/apis/v1"
)

// Defaults that depend on other fields, which the schema's static defaults cannot express.
const (
	defaultSuccessfulJobsHistoryLimit = 3
	defaultFailedJobsHistoryLimit     = 1
	defaultHTTPTimeout                = 30 * time.Second
)

// cronParser accepts what the reconciler schedules with: five fields or a descriptor.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// TaskDefaulter fills in defaults that depend on other fields of the Task.
type TaskDefaulter struct{}

var _ admission.Defaulter[*taskv1.Task] = TaskDefaulter{}

// Default sets history limits on scheduled Tasks and the timeout of HTTP runners.
func (TaskDefaulter) Default(_ context.Context, task *taskv1.Task) error {
	spec := &task.Spec
	if spec.Schedule != nil {
		if spec.SuccessfulJobsHistoryLimit == nil {
			spec.SuccessfulJobsHistoryLimit = ptr(int32(defaultSuccessfulJobsHistoryLimit))
		}
		if spec.FailedJobsHistoryLimit == nil {
			spec.FailedJobsHistoryLimit = ptr(int32(defaultFailedJobsHistoryLimit))
		}
	}
	if h := spec.Runner.HTTP; h != nil && h.Timeout == nil {
		h.Timeout = &metav1.Duration{Duration: defaultHTTPTimeout}
	}
	return nil
}

// TaskValidator checks what neither the OpenAPI schema nor CEL can: that a cron expression
// parses and a time zone exists.
type TaskValidator struct{}

var _ admission.Validator[*taskv1.Task] = TaskValidator{}

func (TaskValidator) ValidateCreate(_ context.Context, task *taskv1.Task) (admission.Warnings, error) {
	return nil, invalid(task, validateSpec(&task.Spec))
}

func (TaskValidator) ValidateUpdate(_ context.Context, _, task *taskv1.Task) (admission.Warnings, error) {
	return nil, invalid(task, validateSpec(&task.Spec))
}

func (TaskValidator) ValidateDelete(context.Context, *taskv1.Task) (admission.Warnings, error) {
	return nil, nil
}

// ValidateSpec returns every problem of spec, each naming its field.
func validateSpec(spec *taskv1.TaskSpec) field.ErrorList {
	var errs field.ErrorList
	if s := spec.Schedule; s != nil {
		path := field.NewPath("spec", "schedule")
		if _, err := cronParser.Parse(s.Cron); err != nil {
			errs = append(errs, field.Invalid(path.Child("cron"), s.Cron, err.Error()))
		}
		if _, err := time.LoadLocation(s.TimeZone); err != nil {
			errs = append(errs, field.Invalid(path.Child("timeZone"), s.TimeZone, "unknown time zone: "+err.Error()))
		}
	}
	return errs
}

func invalid(task *taskv1.Task, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(taskv1.GroupVersion.WithKind("Task").GroupKind(), task.Name, errs)
}

func ptr[T any](v T) *T { return &v }

// The webhook configurations are generated from these markers into config/webhook.
// +kubebuilder:webhook:path=/mutate-example-com-v1-task,mutating=true,failurePolicy=fail,sideEffects=None,groups=example.com,resources=tasks,verbs=create;update,versions=v1,name=mtask.example.com,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-example-com-v1-task,mutating=false,failurePolicy=fail,sideEffects=None,groups=example.com,resources=tasks,verbs=create;update,versions=v1,name=vtask.example.com,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10
