package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RunnerType names the kind of work a Task runs.
// +kubebuilder:validation:Enum=Shell;HTTP
type RunnerType string

const (
	RunnerShell RunnerType = "Shell"
	RunnerHTTP  RunnerType = "HTTP"
)

// ConcurrencyPolicy says what a scheduled Task does when a run is due while another is active.
// +kubebuilder:validation:Enum=Allow;Forbid;Replace
type ConcurrencyPolicy string

const (
	// AllowConcurrent starts the new run beside the active ones.
	AllowConcurrent ConcurrencyPolicy = "Allow"
	// ForbidConcurrent holds a due run back while another is active, and starts it when that
	// one ends if it is still within startingDeadlineSeconds (as a CronJob does).
	ForbidConcurrent ConcurrencyPolicy = "Forbid"
	// ReplaceConcurrent deletes the active run and starts the new one.
	ReplaceConcurrent ConcurrencyPolicy = "Replace"
)

// Phase is the one-word summary of a Task's life, for humans and printer columns.
// Automation should read conditions instead.
// +kubebuilder:validation:Enum=Pending;Queued;Running;Retrying;Scheduled;Suspended;Succeeded;Failed
type Phase string

const (
	PhasePending Phase = "Pending"
	// PhaseQueued: the current attempt's Job waits in its Kueue queue (spec.queueName) for
	// quota, or was preempted and waits again.
	PhaseQueued    Phase = "Queued"
	PhaseRunning   Phase = "Running"
	PhaseRetrying  Phase = "Retrying"
	PhaseScheduled Phase = "Scheduled"
	PhaseSuspended Phase = "Suspended"
	PhaseSucceeded Phase = "Succeeded"
	PhaseFailed    Phase = "Failed"
)

// RetryPolicy says how often and how patiently a failed run is tried again.
type RetryPolicy struct {
	// MaxRetries is how many times a failed run is retried; 0 never retries.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MaxRetries int32 `json:"maxRetries"`

	// Backoff spaces the retries: by default 10s, doubling, at most 5m. Defaults are spelled as Go
	// writes durations ("5m0s"), so that a Task read at an old version needs no preserved fields.
	// +optional
	// +kubebuilder:default={}
	Backoff *Backoff `json:"backoff,omitempty"`
}

// Backoff is an exponential delay: initial, then multiplied by factor per retry, capped at max.
// +kubebuilder:validation:XValidation:rule="!has(self.initial) || !has(self.max) || duration(self.initial) <= duration(self.max)",message="backoff.initial must not exceed backoff.max",fieldPath=".initial"
type Backoff struct {
	// +optional
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="must be a duration between 0s and 24h"
	Initial *metav1.Duration `json:"initial,omitempty"`
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	Factor int32 `json:"factor,omitempty"`
	// +optional
	// +kubebuilder:default="5m0s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="must be a duration between 0s and 24h"
	Max *metav1.Duration `json:"max,omitempty"`
}

// Schedule runs a Task repeatedly, like a CronJob.
type Schedule struct {
	// Cron is a five-field cron expression or a descriptor such as @hourly.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Cron string `json:"cron"`

	// TimeZone is an IANA time zone name; empty means UTC.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`

	// ConcurrencyPolicy decides what happens when a run is due while another is active.
	// +optional
	// +kubebuilder:default=Allow
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`

	// StartingDeadlineSeconds is how late a run may still start after its schedule time; a run
	// that could not start in time is skipped and counted as missed.
	// +optional
	// +kubebuilder:validation:Minimum=1
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`
}

// TaskSpec is what the user wants run.
// +kubebuilder:validation:XValidation:rule="!has(self.priorityClassName) || has(self.queueName)",message="priorityClassName needs queueName: priorities order a Kueue queue",fieldPath=".priorityClassName",reason=FieldValueInvalid
type TaskSpec struct {
	// Runner is the work each run does.
	// +required
	Runner Runner `json:"runner"`

	// Parallelism is how many pods each run starts at once.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Parallelism int32 `json:"parallelism,omitempty"`

	// Retry governs retries of failed runs.
	// +optional
	// +kubebuilder:default={}
	Retry *RetryPolicy `json:"retry,omitempty"`

	// Schedule makes the Task run repeatedly. Without it the Task runs once.
	// +optional
	Schedule *Schedule `json:"schedule,omitempty"`

	// Timeout bounds one run (the Job's activeDeadlineSeconds).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="must be a duration of at least 1s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// TTLSecondsAfterFinished deletes a finished Job this long after it finished.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// SuccessfulJobsHistoryLimit keeps this many succeeded Jobs of a scheduled Task.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	SuccessfulJobsHistoryLimit *int32 `json:"successfulJobsHistoryLimit,omitempty"`

	// FailedJobsHistoryLimit keeps this many failed Jobs of a Task.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	FailedJobsHistoryLimit *int32 `json:"failedJobsHistoryLimit,omitempty"`

	// Suspend stops new runs from starting; active runs are suspended too.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// QueueName is a Kueue LocalQueue in the Task's namespace. Each run's Job is created
	// suspended in that queue and starts when Kueue admits it (quota, priority, preemption and
	// fair sharing are Kueue's). Empty: Jobs start at once.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	QueueName string `json:"queueName,omitempty"`

	// PriorityClassName is a Kueue WorkloadPriorityClass: it orders the Task's Jobs in their
	// queue and lets them preempt lower ones. Needs queueName.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// Resources are the requests and limits of the container of each run's pods. Kueue's quotas
	// count requests, and a namespace with a ResourceQuota refuses pods without them.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.claims)",message="resource claims are not supported: a run's pod claims no resources"
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// Task runs a shell script or an HTTP call as Kubernetes Jobs, with retries and schedules.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=tsk,categories=tasks
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.runner.type`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Attempts",type=integer,JSONPath=`.status.attempts`
// +kubebuilder:printcolumn:name="Last Job",type=string,JSONPath=`.status.lastJob.name`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule.cron`,priority=1
// +kubebuilder:printcolumn:name="Last Success",type=date,JSONPath=`.status.lastSuccessfulTime`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Task struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TaskSpec `json:"spec"`
	// +optional
	Status TaskStatus `json:"status,omitempty"`
}

// TaskList is a list of Tasks.
// +kubebuilder:object:root=true
type TaskList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Task `json:"items"`
}
