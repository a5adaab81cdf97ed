package v1

// Condition types kept on every Task.
const (
	// ConditionReady is True while the Task is healthy: its spec is accepted and it has not failed.
	ConditionReady = "Ready"
	// ConditionProgressing is True while a run is active or a retry or scheduled run is pending.
	ConditionProgressing = "Progressing"
	// ConditionSucceeded is True once a run succeeded (for scheduled Tasks: the last run).
	ConditionSucceeded = "Succeeded"
	// ConditionFailed is True once retries are exhausted (for scheduled Tasks: the last run failed).
	ConditionFailed = "Failed"
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
	EventMissedRun        = "MissedRun"
)
