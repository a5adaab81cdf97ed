// Package reconciler is the Task controller: it runs each Task of example.com/v1 as batch/v1
// Jobs, retries failed runs with exponential backoff, starts scheduled runs like a CronJob, and
// reports the outcome in the Task's status.
//
// The package is split into pure decision functions, each in its own file and unit-tested
// without a cluster, and a thin reconciler that wires them to the API:
//
//   - naming.go:   deterministic Job names and label values (jobName, labelValue)
//   - job.go:      the Job for one run (buildJob)
//   - backoff.go:  the delay before a retry (nextRetryDelay)
//   - schedule.go: cron parsing and which schedule times are due (parseSchedule, dueRun)
//   - observe.go:  what a Job says about its run (observeJob)
//   - status.go:   what the Jobs and the previous status say about the Task (analyze, computeStatus)
//   - plan.go:     what to do now: create, replace, suspend, prune (planRuns)
//   - events.go:   which Events a status transition deserves (transitionEvents)
//
// The reconciler (reconciler.go) reads everything from the manager's cache, runs a short list of
// phase functions over a scope, and patches the Task once, in a deferred call, with only what
// changed (patch.go). In-memory expectations (expectations.go) keep it from acting on a cache
// that has not yet caught up with its own writes. setup.go wires it into a manager
// (SetupWithManager, CacheOptions); metrics.go holds its Prometheus metrics.
//
// Semantics worth knowing:
//
//   - Each run is a Job named after the Task and the run (see jobName): "<task>-<attempt>" for a
//     one-shot Task, "<task>-<unix seconds of the schedule time>[-<attempt>]" for a scheduled one.
//     Creating a name that exists is a no-op, which makes every decision idempotent.
//   - A one-shot Task that Succeeded or Failed is finished for good: later spec changes do not
//     run it again (delete and recreate it to run again). Labels are copied when a Job is created.
//   - Retries: a failed attempt is retried as a new Job after the backoff, up to maxRetries. For
//     a scheduled Task, retries apply to the latest scheduled run only, while no later schedule
//     time has come due; the retry needs the failed Job to still exist (a TTL of 0 can remove it).
//     status.attempts of a scheduled Task counts the attempts of its latest run.
//   - Schedules: when several schedule times passed (the operator was down, or the Task was
//     suspended), only the latest runs, if within startingDeadlineSeconds; the others count in
//     status.missedRuns, as do times skipped by concurrency policy Forbid or a passed deadline.
//     status.lastScheduleTime is the latest schedule time acted on, started or skipped.
//   - History limits prune finished Jobs (scheduled Tasks: 3 succeeded, 1 failed by default;
//     one-shot Tasks only when set); the newest Job of the current run is always kept.
package reconciler

// RBAC: exactly what the controller does, nothing more. Tasks are read from the cache and only
// their finalizers are patched; tasks/finalizers update lets a Job carry an owner reference with
// blockOwnerDeletion; Jobs are created, patched (spec.suspend) and deleted; Events are recorded
// through both the events.k8s.io API and, by client-go's fallback, the core API.
//
// +kubebuilder:rbac:groups=example.com,resources=tasks,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=example.com,resources=tasks/status,verbs=patch
// +kubebuilder:rbac:groups=example.com,resources=tasks/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
