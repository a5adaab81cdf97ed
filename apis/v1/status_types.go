package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

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
