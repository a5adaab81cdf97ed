// Package reconciler is the Task controller: it runs each Task of example.com/v1 as batch/v1
// Jobs, retries failed attempts with exponential backoff, starts scheduled runs like a CronJob,
// and reports the outcome in the Task's status.
//
// The package is split into pure decision functions, each in its own file and unit-tested
// without a cluster, and a thin reconciler that wires them to the API:
//
//   - naming.go:     deterministic Job names and label values, and the run a name stands for
//   - job.go:        the Job for one attempt (buildJob)
//   - backoff.go:    the delay before a retry (nextRetryDelay)
//   - schedule.go:   which schedule time is due, in one pass, and how many were missed
//   - observe.go:    what a Job says about its attempt (observeJob)
//   - analysis.go:   the durable run record brought up to date with the Jobs (analyze, fold)
//   - status.go:     the status fields (computeStatus)
//   - conditions.go: the conditions, kstatus' Reconciling and Stalled included
//   - plan.go:       what to do now: create, replace, suspend, prune, release (planRuns)
//   - events.go:     which Events a status transition deserves (transitionEvents)
//   - eventbudget.go: the budget of Normal Events (Warnings pass always)
//   - ownership.go:  which Jobs are the Task's: taken back after losing their owner reference,
//     someone else's Job of a run's name reported (JobNameTaken) and waited for
//   - request.go:    run and cancel requests (annotations): which is pending, the run one
//     starts, the Jobs a cancel stops, what the status records
//   - kueue.go:      queued Tasks (spec.queueName): Kueue's labels, why a Job waits (its
//     Workload's conditions), whether Kueue's API is served
//
// The reconciler (reconciler.go) reads from the manager's cache, reads past it what the cache
// cannot vouch for (lookup.go), runs a short list of phase functions over a scope, and patches
// the Task's status once, in a deferred call, with only what changed and guarded by its
// resourceVersion (patch.go); then it lets go of what the stored status made safe to let go
// (finalizers.go). In-memory expectations (expectations.go) keep it from acting on a cache that has
// not caught up with its own writes. setup.go wires it into a manager (SetupWithManager;
// CacheOptions and NewCache build the cache it needs: cache.go, and jobcache.go for Jobs, which
// are cached in a compact form and read through an index of their own); metrics.go holds its
// Prometheus metrics. The cache keeps only what the controller reads: no managed fields, a
// Task's run and cancel requests and what its client could not read (internal/readguard) but
// no other annotation (kubectl apply's last-applied-configuration is a second copy of the
// Task), a Job's annotations under
// v1.AnnotationPrefix alone. Every write is a merge patch of what the controller changed, so
// what the cache leaves out is never written back; and nothing writes to a cached object (Tasks
// with the same labels share one cached map).
//
// How a run is executed exactly once:
//
//   - status.currentRun is the durable record of the current run: its latest attempt, that
//     attempt's Job, its outcome and, once it failed, whether and when a retry follows.
//     Decisions are made from it; Jobs are only evidence, folded into it (a Job newer than the
//     record is adopted; the recorded attempt's Job tells how it ended; a recorded outcome is
//     final).
//   - Every Job carries FinalizerRunOutcome from its creation until the stored status records
//     its outcome, so a TTL, a user or the garbage collector can delete it, but it stays
//     readable until then. The Task's own finalizer is held only while some Job may run or
//     still holds FinalizerRunOutcome. The admission webhook places it on a Task created at v1 to
//     run at once, which saves the write before the first Job; ensureFinalizer writes it
//     before any Job otherwise (no webhook, or a user took it off), and releaseAfterStatus
//     takes it off.
//   - A Job the stored status says may run, or one created longer ago than the expectation
//     timeout, that the cache does not show is read from the API server before anything is
//     decided; a Job found that way (its labels stripped) is polled.
//   - Job names are "<task>-<schedule unix seconds, 0 for one-shot>-<attempt>" when shorter than
//     63 characters, else exactly 63 (the name cut, a hash of the whole, the suffix): a
//     repeated creation is an AlreadyExists of the same attempt, and two Tasks share a name
//     only if their long names are cut alike and their 32-bit hashes collide. A Job of that
//     name that is not the Task's is never adopted: the run waits, the Task Stalled with
//     reason JobNameTaken, until the Job is gone.
//   - Every Job names its Task's UID (v1.AnnotationTaskUID), and its Task's name where the
//     label holds only a cut of it (v1.AnnotationTaskName). A Job that lost its owner
//     reference is taken back by that Task; one whose Task is gone, or was deleted with
//     --cascade=orphan, has its FinalizerRunOutcome released and is not deleted.
//   - The status subresource is the operator's record, trusted as the Job controller trusts a
//     Job's status: a record cleared by another client is rebuilt from the Jobs that remain.
//
// Run and cancel requests (`kubectl task rerun|run|cancel`):
//
//   - A request is an annotation on the Task whose value, an RFC 3339 time R, is its identity
//     (v1.AnnotationRunRequested, v1.AnnotationCancelRequested); it is pending while R is later
//     than what the status records as honoured (status.runRequest, status.cancelRequest), and
//     a run request also while no current run is of R's time or later. A value that does not
//     parse is ignored with a Warning Event.
//   - A pending run request starts, once nothing of the Task is active and it is not
//     suspended, the run runID{Scheduled: R, Attempt: 1}: its Job's name is deterministic like
//     every run's, so a creation repeated after a lost status write is an AlreadyExists, and
//     the fold adopts that Job as the current run, which answers the request. The status
//     written with the run's record records runRequest = R. Its Jobs carry the request
//     annotation, which tells a requested run from a schedule time's: lastScheduleTime, where
//     the search for due times starts and the missed count stay the schedule's. A schedule
//     time later than R due at once starts instead and answers R; one at or before the current
//     requested run that never started does not start after it (it would be older).
//   - A pending cancel request marks the current run's active Jobs with it and deletes them;
//     judged after deletionSettleTime like any deleted Job, a marked one ends its attempt
//     Failed with no retry. A retry due is dropped the same way. Once nothing of the current
//     run is left unmarked, cancelRequest = R is recorded. It drops a pending run request
//     earlier than it; one of the same second stands (the plugin never writes two such).
//   - A run request later than the operator's clock is pending from its time; a cancel is
//     pending from v1.RequestClockSkew before its time, so one made now on a clock a little
//     ahead (or stamped by the plugin a second after a run request of this second) stops the
//     run the user saw and drops that run request at once, rather than stopping whichever run
//     is current when its time comes. The Task is looked at again when a request set for
//     later becomes pending (a hanging run's Job sends no event that would do it).
//
// Limits, by design:
//
//   - The cache holds only Jobs labelled v1.LabelTaskName: a Job without it that holds a run's
//     name sends no event when deleted, so the Task looks again every nameTakenPollInterval.
//   - A Job of an earlier release that lost its owner reference, for a Task name over 63
//     characters, names its Task only by a cut of the name: its FinalizerRunOutcome is released
//     by that Task's reconcile, and kept (released by hand) if the Task is already gone.
//   - A Job that lost its owner reference is taken back only under one of the Task's run names,
//     as the Job the status recorded (by UID) or, where none is recorded, with the Task's UID in
//     v1.AnnotationTaskUID. An earlier release's Job the status no longer records (an older
//     attempt) is not taken back: its finalizer is released. Earlier releases kept names of
//     exactly 63 characters whole and trimmed a cut's '-' and '.': such Jobs are still read
//     (runFromAnyName, labelValue keeps their rule), and the next attempt gets a name of the
//     new form.
//   - A status record cleared by a client with tasks/status rights after the run's Jobs are gone
//     cannot be told from a Task that never ran: that run runs again.
//   - A queued Job's spec.suspend is Kueue's: suspending the Task stops new runs, not one
//     already queued (an admitted one runs on, Kueue would unsuspend it again; a waiting one
//     starts when admitted).
//   - A Job whose labels a policy strips is invisible to the cache. It is found as long as the
//     status or the expectations name it; if the operator dies between creating it and
//     recording it, and the next decision differs (a spec change, a passed starting deadline),
//     it runs unrecorded, its finalizer released only with the Task.
//   - An attempt whose Job vanished without a trace (its finalizer removed by hand, or a Job
//     of an earlier release deleted before it was adopted) counts as failed: its outcome cannot
//     be known, and a retry follows if one is left.
//   - A Job deleted before it finished is a cancelled attempt unless the Job controller had
//     counted its success when it is judged, deletionSettleTime after the deletion. At its first
//     sync of the deleted Job the Job controller stops tracking every pod of it and counts only
//     those that had ended by then: a pod still running is never counted, whatever it does next
//     (its work may finish beside the retry). A success of a pod that ended before that sync can
//     still be written late, while FinalizerRunOutcome holds the Job, by a controller that lags;
//     so for the current attempt's Job the finalizer goes first, by a patch that tests the
//     resourceVersion judged (settleDeletedJobs): a success counted meanwhile fails it and is
//     seen; after it, nothing can be counted. If
//     the status write that records the attempt is then lost, the Job is missing and the
//     attempt still fails with a retry ("disappeared before its outcome was recorded",
//     backoff from then). A Job marked by a cancel request or replaced by a newer run keeps
//     the old order (status, then release), so its mark outlives a lost write, and so does a
//     Job another finalizer (foregroundDeletion) also holds, or whose release is refused; a
//     success counted for those in that moment is not seen. The pods of a released Job run
//     on until the garbage collector stops them: the work may still finish while a retry runs.
//   - Within one attempt, the Job controller may run a pod's work again: after an eviction (a
//     disruption does not spend a retry) and when a suspended Task is resumed (suspending a Job
//     stops its pods).
//   - A scheduled run's retries stop once a later schedule time comes due; a time missed while
//     the operator was away starts only if within startingDeadlineSeconds, as with a CronJob.
//     Until a later run starts, the record keeps the retry's time (currentRun.retryTime, past
//     or not): it is the retry the run gets back if the schedule is removed.
//   - A cancel stops the current run only: with concurrency policy Allow, older runs still
//     active run on. A run request waits while anything of the Task is active.
//   - A Task with a run in progress needs the operator to be deleted (it lets the Jobs go);
//     delete Tasks before uninstalling the operator.
package reconciler

// RBAC: exactly what the controller does, nothing more. Tasks are read from the cache and only
// their finalizers are patched; tasks/finalizers update lets a Job carry an owner reference with
// blockOwnerDeletion; Jobs are created, patched (spec.suspend, the run-outcome finalizer) and
// deleted; a failed run's pod is read once, for why its container ended; Kueue's Workloads are only watched (why a queued Job waits); Events are recorded
// through both the events.k8s.io API and, by client-go's fallback, the core API.
//
// +kubebuilder:rbac:groups=example.com,resources=tasks,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=example.com,resources=tasks/status,verbs=patch
// +kubebuilder:rbac:groups=example.com,resources=tasks/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
