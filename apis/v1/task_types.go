package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	// ForbidConcurrent skips the new run while one is active.
	ForbidConcurrent ConcurrencyPolicy = "Forbid"
	// ReplaceConcurrent deletes the active run and starts the new one.
	ReplaceConcurrent ConcurrencyPolicy = "Replace"
)

// Phase is the one-word summary of a Task's life, for humans and printer columns.
// Automation should read conditions instead.
// +kubebuilder:validation:Enum=Pending;Running;Retrying;Scheduled;Suspended;Succeeded;Failed
type Phase string

const (
	PhasePending   Phase = "Pending"
	PhaseRunning   Phase = "Running"
	PhaseRetrying  Phase = "Retrying"
	PhaseScheduled Phase = "Scheduled"
	PhaseSuspended Phase = "Suspended"
	PhaseSucceeded Phase = "Succeeded"
	PhaseFailed    Phase = "Failed"
)

// Runner is a one-of: Type names the member that must be set, and only that one.
// +kubebuilder:validation:XValidation:rule="self.type == 'Shell' ? has(self.shell) : !has(self.shell)",message="runner.shell must be set when runner.type is Shell, and only then",fieldPath=".shell",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="self.type == 'HTTP' ? has(self.http) : !has(self.http)",message="runner.http must be set when runner.type is HTTP, and only then",fieldPath=".http",reason=FieldValueInvalid
type Runner struct {
	// Type selects the runner.
	// +required
	Type RunnerType `json:"type"`

	// Shell runs a script with `sh -c` in a container image.
	// +optional
	Shell *ShellRunner `json:"shell,omitempty"`

	// HTTP performs one HTTP request and succeeds when the response status is accepted.
	// +optional
	HTTP *HTTPRunner `json:"http,omitempty"`
}

// ShellRunner runs a script in a container.
type ShellRunner struct {
	// Script is passed to `sh -c`.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	Script string `json:"script"`

	// Image holds the shell. Empty means the operator's default shell image.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// Env is set in the script's environment.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Env []EnvVar `json:"env,omitempty"`
}

// EnvVar is one environment variable.
type EnvVar struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	Name string `json:"name"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value,omitempty"`
}

// HTTPRunner performs one HTTP request.
type HTTPRunner struct {
	// URL to call, http or https.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="must be an absolute http or https URL"
	URL string `json:"url"`

	// Method is the HTTP method.
	// +optional
	// +kubebuilder:default=GET
	// +kubebuilder:validation:Enum=GET;HEAD;POST;PUT;PATCH;DELETE
	Method string `json:"method,omitempty"`

	// Headers are sent with the request.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Headers []HTTPHeader `json:"headers,omitempty"`

	// Body is sent as the request body.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	Body string `json:"body,omitempty"`

	// Timeout bounds the whole request. Empty means 30s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('1h')",message="must be a duration between 0s and 1h, such as 30s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// AcceptedStatusCodes are the response codes that count as success. Empty means any 2xx.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Minimum=100
	// +kubebuilder:validation:items:Maximum=599
	AcceptedStatusCodes []int32 `json:"acceptedStatusCodes,omitempty"`
}

// HTTPHeader is one request header.
type HTTPHeader struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[!#$%&'*+.^_|~0-9A-Za-z-]+$`
	Name string `json:"name"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value,omitempty"`
}

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

	// StartingDeadlineSeconds is how late a missed run may still start; later ones are skipped
	// and counted as missed.
	// +optional
	// +kubebuilder:validation:Minimum=1
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`
}

// TaskSpec is what the user wants run.
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
}

// JobReference points at a Job the Task owns, in the Task's namespace.
type JobReference struct {
	// +required
	Name string `json:"name"`
	// +optional
	UID types.UID `json:"uid,omitempty"`
}

// TaskStatus is what the operator observed.
type TaskStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase summarises the conditions for humans.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// LastPhaseTransitionTime is when Phase last changed.
	// +optional
	LastPhaseTransitionTime *metav1.Time `json:"lastPhaseTransitionTime,omitempty"`

	// Conditions: Ready, Progressing, Succeeded, Failed.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Attempts counts the runs started for the current spec (first run plus retries).
	// +optional
	Attempts int32 `json:"attempts,omitempty"`

	// ActiveJobs are the Jobs running now.
	// +optional
	// +listType=atomic
	ActiveJobs []JobReference `json:"activeJobs,omitempty"`

	// LastJob is the most recently created Job.
	// +optional
	LastJob *JobReference `json:"lastJob,omitempty"`

	// LastError says why the last run failed.
	// +optional
	LastError string `json:"lastError,omitempty"`

	// StartTime is when the first run started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the Task reached Succeeded or Failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// NextRunTime is when the next retry or scheduled run is due.
	// +optional
	NextRunTime *metav1.Time `json:"nextRunTime,omitempty"`

	// LastScheduleTime is the scheduled time of the latest scheduled run.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`

	// MissedRuns counts scheduled runs skipped because their starting deadline passed or
	// the concurrency policy forbade them.
	// +optional
	MissedRuns int32 `json:"missedRuns,omitempty"`
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
