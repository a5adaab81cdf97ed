package v1

import (
	corev1 "k8s.io/api/core/v1"
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

// JobReference points at a Job the Task owns, in the Task's namespace.
type JobReference struct {
	// +required
	Name string `json:"name"`
	// +optional
	UID types.UID `json:"uid,omitempty"`
}

// RunOutcome is where the latest attempt of a run stands.
// +kubebuilder:validation:Enum=Active;Succeeded;Failed
type RunOutcome string

const (
	// RunActive: the attempt's Job has been created and has not finished.
	RunActive RunOutcome = "Active"
	// RunSucceeded: the attempt's Job completed.
	RunSucceeded RunOutcome = "Succeeded"
	// RunFailed: the attempt's Job failed, timed out, was deleted before it finished, or
	// disappeared.
	RunFailed RunOutcome = "Failed"
)

// RunRecord is the durable record of a Task's current run: the only run of a one-shot Task, the
// latest started run of a scheduled one. The operator decides from it, not from which Jobs
// still exist, so a Job deleted by its TTL, by a user or while the operator was away never
// turns a finished attempt into a new one.
type RunRecord struct {
	// ScheduledTime is the schedule time the run is for; unset for a one-shot run.
	// +optional
	ScheduledTime *metav1.Time `json:"scheduledTime,omitempty"`

	// Attempt is the latest attempt started, from 1; attempts after the first are retries.
	// +required
	// +kubebuilder:validation:Minimum=1
	Attempt int32 `json:"attempt"`

	// Job is the latest attempt's Job.
	// +required
	Job JobReference `json:"job"`

	// Outcome is how the latest attempt stands. Once Succeeded or Failed it never changes.
	// +required
	Outcome RunOutcome `json:"outcome"`

	// FinishTime is when the latest attempt ended.
	// +optional
	FinishTime *metav1.Time `json:"finishTime,omitempty"`

	// AdmittedTime is when Kueue last admitted the latest attempt's Job (spec.queueName): the
	// attempt's pods start then, and its timeout counts from then. Unset while it waits.
	// +optional
	AdmittedTime *metav1.Time `json:"admittedTime,omitempty"`

	// RetryTime is when the next attempt is due, decided when the latest attempt failed; unset
	// when no retry follows. Lowering maxRetries, suspending the Task or a later schedule time
	// coming due still cancels it; raising maxRetries after the run failed for good does not
	// bring it back.
	// +optional
	RetryTime *metav1.Time `json:"retryTime,omitempty"`
}

// ObservedSchedule is the schedule the status was computed for, and since when it applies:
// schedule times before Since never run. Since is the Task's creation for a Task created with
// its schedule, and the moment the operator first saw the schedule when it was added to a Task
// or its cron expression or time zone changed.
type ObservedSchedule struct {
	// +required
	Cron string `json:"cron"`
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
	// +required
	Since metav1.Time `json:"since"`
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

	// Conditions: Ready, Progressing, Succeeded, Failed, and kstatus' Reconciling and Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Attempts counts the attempts of the current run (first attempt plus retries); it equals
	// currentRun.attempt.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`

	// ActiveJobs are the Jobs running now, of any run.
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

	// LastScheduleTime is the schedule time of the latest run started, as a CronJob's.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`

	// LastSuccessfulTime is when the latest successful attempt finished, as a CronJob's; later
	// failures keep it.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`

	// MissedRuns counts schedule times that passed without a run (the operator was away, the
	// Task was suspended, the starting deadline passed, or concurrency policy Forbid held them
	// back until it was too late). They are counted when the next run starts.
	// +optional
	MissedRuns int32 `json:"missedRuns,omitempty"`

	// CurrentRun is the durable record of the current run: its latest attempt, that attempt's
	// Job and outcome.
	// +optional
	CurrentRun *RunRecord `json:"currentRun,omitempty"`

	// ObservedSchedule is the schedule in force and since when (scheduled Tasks only).
	// +optional
	ObservedSchedule *ObservedSchedule `json:"observedSchedule,omitempty"`

	// RunRequest is the latest run request (annotation task.example.com/run-requested) the
	// operator honoured: a run started for it, or one that started at or after it.
	// +optional
	RunRequest *metav1.Time `json:"runRequest,omitempty"`

	// CancelRequest is the latest cancel request (annotation task.example.com/cancel-requested)
	// the operator honoured: the run then active was stopped, or nothing was active.
	// +optional
	CancelRequest *metav1.Time `json:"cancelRequest,omitempty"`
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
