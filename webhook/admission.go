package webhook

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	taskv1 "example.com/task-operator/apis/v1"
)

// TaskDefaulter fills in the defaults the schema cannot express because they depend on other
// fields (history limits of scheduled Tasks, the HTTP timeout); see taskv1.SetDefaults.
type TaskDefaulter struct{}

var _ admission.Defaulter[*taskv1.Task] = TaskDefaulter{}

// Default applies taskv1.SetDefaults.
func (TaskDefaulter) Default(_ context.Context, task *taskv1.Task) error {
	taskv1.SetDefaults(task)
	return nil
}

// TaskValidator checks what neither the OpenAPI schema nor CEL can (taskv1.Validate): that a cron
// expression parses and a time zone exists, with the same parser the reconciler schedules with.
type TaskValidator struct{}

var _ admission.Validator[*taskv1.Task] = TaskValidator{}

func (TaskValidator) ValidateCreate(_ context.Context, task *taskv1.Task) (admission.Warnings, error) {
	return nil, invalid(task, taskv1.Validate(task))
}

func (TaskValidator) ValidateUpdate(_ context.Context, _, task *taskv1.Task) (admission.Warnings, error) {
	return nil, invalid(task, taskv1.Validate(task))
}

func (TaskValidator) ValidateDelete(context.Context, *taskv1.Task) (admission.Warnings, error) {
	return nil, nil
}

func invalid(task *taskv1.Task, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(taskv1.GroupKind, task.Name, errs)
}

// The webhook configurations are generated from these markers into config/webhook.
// +kubebuilder:webhook:path=/mutate-example-com-v1-task,mutating=true,failurePolicy=fail,sideEffects=None,groups=example.com,resources=tasks,verbs=create;update,versions=v1,name=mtask.example.com,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-example-com-v1-task,mutating=false,failurePolicy=fail,sideEffects=None,groups=example.com,resources=tasks,verbs=create;update,versions=v1,name=vtask.example.com,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=10
