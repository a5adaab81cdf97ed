package v1

// Condition types kept on every Task.
const (
	// ConditionReady is True when the Task is where its spec wants it: a one-shot Task once its
	// run succeeded, a scheduled Task while its schedule is valid and its latest finished run
	// did not fail. A one-shot Task that has not succeeded yet is not Ready.
	ConditionReady = "Ready"
	// ConditionProgressing is True while a run is active or a retry or scheduled run is pending.
	ConditionProgressing = "Progressing"
	// ConditionSucceeded is True once a run succeeded (for scheduled Tasks: the last run).
	ConditionSucceeded = "Succeeded"
	// ConditionFailed is True once retries are exhausted (for scheduled Tasks: the last run failed).
	ConditionFailed = "Failed"
	// ConditionReconciling is kstatus' "not there yet": True while a one-shot Task has a run to
	// start, running or to retry. Tools built on kstatus (Flux, kpt, Argo CD health checks via
	// cli-utils) report such a Task InProgress.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is kstatus' "cannot get there without help": True when a one-shot Task
	// failed for good or a schedule cannot be parsed. kstatus reports such a Task Failed.
	ConditionStalled = "Stalled"
	// ConditionAdmitted is kept on Tasks with spec.queueName only: True once Kueue admitted the
	// current attempt's Job, False with Kueue's reason and message while it waits (Pending,
	// Inadmissible, Preempted, ...), or KueueNotInstalled.
	ConditionAdmitted = "Admitted"
)

// Condition reasons.
const (
	ReasonPending            = "Pending"
	ReasonRunning            = "Running"
	ReasonJobActive          = "JobActive"
	ReasonRetrying           = "Retrying"
	ReasonRetryPending       = "RetryPending"
	ReasonSuspended          = "Suspended"
	ReasonSucceeded          = "Succeeded"
	ReasonRunSucceeded       = "RunSucceeded"
	ReasonRunFailed          = "RunFailed"
	ReasonRetriesExhausted   = "RetriesExhausted"
	ReasonInvalidSchedule    = "InvalidSchedule"
	ReasonWaitingForSchedule = "WaitingForSchedule"
	ReasonNoRunFinished      = "NoRunFinished"
	ReasonLastRunFailed      = "LastRunFailed"
	ReasonHealthy            = "Healthy"
	// ReasonAsExpected is the reason of a Reconciling or Stalled condition that is False.
	ReasonAsExpected = "AsExpected"
	// ReasonQueued: the current attempt's Job waits in its Kueue queue.
	ReasonQueued = "Queued"
	// ReasonAdmitted: Kueue admitted the current attempt's Job.
	ReasonAdmitted = "Admitted"
	// ReasonQueuePending: a queued Job waits and Kueue has not said why yet.
	ReasonQueuePending = "QueuePending"
	// ReasonKueueNotInstalled: spec.queueName is set but Kueue's API is not served; no Job is
	// created until it is.
	ReasonKueueNotInstalled = "KueueNotInstalled"
	// ReasonJobNameTaken: the run due cannot start because a Job of its name exists and is not
	// the Task's; deleting (or renaming) that Job lets it start.
	ReasonJobNameTaken = "JobNameTaken"
	// ReasonInvalidSpec: the stored spec has a value no typed client can read
	// (AnnotationUnreadable names it); no run starts until it is fixed.
	ReasonInvalidSpec = "InvalidSpec"
)

// Event reasons the operator records on Tasks.
const (
	EventJobCreated       = "JobCreated"
	EventJobCreateFailed  = "JobCreateFailed"
	EventJobReplaced      = "JobReplaced"
	EventSucceeded        = "Succeeded"
	EventRunFailed        = "RunFailed"
	EventRetryScheduled   = "RetryScheduled"
	EventRetriesExhausted = "RetriesExhausted"
	// EventMissedRun tells, when a run starts, how many earlier schedule times passed without one.
	EventMissedRun = "MissedRun"
	// EventTooManyMissedTimes replaces EventMissedRun when more than 100 times were missed, as
	// a CronJob's TooManyMissedTimes: the clock, the schedule or startingDeadlineSeconds
	// deserves a look.
	EventTooManyMissedTimes = "TooManyMissedTimes"
	// EventJobNameTaken: a Job of the run's name exists and is not the Task's (see
	// ReasonJobNameTaken).
	EventJobNameTaken = "JobNameTaken"
	// EventRunRequested (Normal): a run started for a request (AnnotationRunRequested).
	EventRunRequested = "RunRequested"
	// EventRunCancelled (Warning): the current run's active Jobs were deleted for a request
	// (AnnotationCancelRequested); the run ends Failed without a retry.
	EventRunCancelled = "RunCancelled"
	// EventInvalidRequest (Warning): a request annotation's value is not an RFC 3339 time; it
	// is ignored.
	EventInvalidRequest = "InvalidRequest"
)
