package reconciler

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "example.com/task-operator/apis/v1"
)

// jobState is where a Job is in its life, as far as its Task cares.
type jobState int

const (
	jobActive jobState = iota
	jobSucceeded
	jobFailed
)

func (s jobState) finished() bool { return s != jobActive }

// observedJob is what the controller knows about one of a Task's Jobs: the Job as read from the
// cache or, when the cache does not show it, from the API server.
type observedJob struct {
	Name string
	UID  types.UID
	Run  runID
	// Created is the Job's creation time.
	Created time.Time
	State   jobState
	// Suspended mirrors the Job's spec.suspend.
	Suspended bool
	// Finished is when the Job completed or failed.
	Finished time.Time
	// Reason and Message come from the Job's Failed condition.
	Reason, Message string
	// Terminated is why the failed pod's container ended (Error, OOMKilled), read from the pod
	// while the failure is not recorded yet (podFailures); empty when not known.
	Terminated string
	// Deleting says the Job has a deletion timestamp (a TTL, a user, the controller itself):
	// it still tells its outcome, but no longer runs.
	Deleting bool
	// Missing says the status named this Job but the API server no longer has it: its outcome
	// is unknown.
	Missing bool
	// Protected says the Job carries v1.FinalizerRunOutcome.
	Protected bool
	// Uncached says the Job was read past the cache (its labels were stripped, or the cache
	// lags): no watch event will announce its changes, so the controller polls it.
	Uncached bool
	// Replaced says the controller deleted the active Job for a newer run (policy Replace).
	Replaced bool
	// Queue is the Kueue LocalQueue the Job was created in (its queue label); empty: none.
	Queue string
	// Admitted is when Kueue last admitted a queued Job: its status.startTime once it is
	// unsuspended (the Job controller resets it on every resume). Zero while it waits.
	Admitted time.Time
	// QueueReason and QueueMessage say, in Kueue's words, why a queued Job waits.
	QueueReason, QueueMessage string
	// Requested is the run request (v1.AnnotationRunRequested) the Job's run was started for;
	// zero for a run of the schedule or the one-shot Task's first run.
	Requested time.Time
	// Cancelled is the cancel request (v1.AnnotationCancelRequested) the Job was deleted for;
	// zero if none.
	Cancelled time.Time
}

// cancelled says j's attempt was stopped by a cancel request: it ends Failed and no retry
// follows. A Job whose success was counted before the deletion still succeeded.
func (j observedJob) cancelled() bool { return !j.Cancelled.IsZero() && j.State != jobSucceeded }

// waiting says j is a queued Job that Kueue has not admitted (or has preempted): it is active
// but suspended, and nothing of it runs.
func (j observedJob) waiting() bool { return j.Queue != "" && j.Suspended && j.active() }

// gone says the Job no longer runs: it is being deleted or no longer exists.
func (j observedJob) gone() bool { return j.Deleting || j.Missing }

func (j observedJob) active() bool { return j.State == jobActive && !j.gone() }

// unjudged says j was deleted before it finished less than deletionSettleTime ago: its pods may
// still run and its outcome is not decided yet, so it still counts as active.
func (j observedJob) unjudged(now time.Time) bool {
	return j.Deleting && !j.Missing && !j.Replaced && j.State == jobActive && now.Before(j.Finished.Add(deletionSettleTime))
}

// failure is the one-line reason a failed Job gives, for status.lastError.
func (j observedJob) failure() string {
	switch {
	case j.Missing:
		return fmt.Sprintf("Job %s disappeared before its outcome was recorded", j.Name)
	case j.cancelled():
		return cancelledError(j.Cancelled)
	case j.State == jobActive && j.Replaced:
		return fmt.Sprintf("Job %s was replaced by a newer run", j.Name)
	case j.State == jobActive && j.Deleting:
		return fmt.Sprintf("Job %s was deleted before it finished", j.Name)
	case j.Reason != "" && j.Message != "" && j.Terminated != "":
		return fmt.Sprintf("Job %s failed: %s: %s (%s)", j.Name, j.Reason, j.Message, j.Terminated)
	case j.Reason != "" && j.Message != "":
		return fmt.Sprintf("Job %s failed: %s: %s", j.Name, j.Reason, j.Message)
	case j.Reason != "":
		return fmt.Sprintf("Job %s failed: %s", j.Name, j.Reason)
	default:
		return fmt.Sprintf("Job %s failed", j.Name)
	}
}

// observeJob reads a Job of taskName: its run from the controller's labels and annotation (or,
// when they were stripped, from its name), its state from its terminal conditions (the Job
// controller sets Complete or Failed only once every pod has terminated, so a finished Job has
// nothing left running).
func observeJob(taskName string, job *batchv1.Job) observedJob {
	o := observedJob{
		Name:      job.Name,
		UID:       job.UID,
		Run:       runOfJob(taskName, job),
		Created:   job.CreationTimestamp.Time,
		Suspended: job.Spec.Suspend != nil && *job.Spec.Suspend,
		Deleting:  job.DeletionTimestamp != nil,
		Protected: controllerutil.ContainsFinalizer(job, v1.FinalizerRunOutcome),
		Queue:     job.Labels[kueueQueueLabel],
	}
	if o.Queue != "" && !o.Suspended && job.Status.StartTime != nil {
		o.Admitted = job.Status.StartTime.Time
	}
	o.Requested = annotationTime(job.Annotations, v1.AnnotationRunRequested)
	o.Cancelled = annotationTime(job.Annotations, v1.AnnotationCancelRequested)
	// A Job that policy Replace deleted says so (see AnnotationReplacedBy): a scheduled run's, or
	// the one-shot run a schedule with Replace was added to.
	o.Replaced = job.DeletionTimestamp != nil && job.Annotations[v1.AnnotationReplacedBy] != ""
	if job.DeletionTimestamp != nil {
		// Until a terminal condition says otherwise, a Job being deleted ended then.
		o.Finished = job.DeletionTimestamp.Time
	}
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			o.State, o.Finished = jobSucceeded, c.LastTransitionTime.Time
			if job.Status.CompletionTime != nil {
				o.Finished = job.Status.CompletionTime.Time
			}
		case batchv1.JobFailed:
			o.State, o.Finished = jobFailed, c.LastTransitionTime.Time
			o.Reason, o.Message = c.Reason, c.Message
		}
	}
	if o.State == jobActive && o.Deleting && succeededBeforeDeletion(job) {
		o.State = jobSucceeded
	}
	if o.State.finished() && o.Finished.IsZero() {
		o.Finished = o.Created // a condition without a time: the backoff counts from creation
	}
	return o
}

// annotationTime is the RFC 3339 time of annotation key, or zero if absent or unreadable (the
// operator writes these annotations on Jobs; a hand-edited one is disregarded).
func annotationTime(annotations map[string]string, key string) time.Time {
	t, err := time.Parse(time.RFC3339, annotations[key])
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// succeededBeforeDeletion says the Job controller had counted the Job's success when the Job
// was deleted: it had set SuccessCriteriaMet or counted every completion, and would have set
// Complete next; the Job may be gone before it does. For a Job that is not being deleted the
// controller waits for Complete, which comes once no pod runs any more.
func succeededBeforeDeletion(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobSuccessCriteriaMet && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return job.Spec.Completions != nil && *job.Spec.Completions > 0 && job.Status.Succeeded >= *job.Spec.Completions
}

// runOfJob reads the run a Job was created for. Its name says it (names are immutable and made
// by jobName); a Job named by an earlier release is read from its labels and scheduled-time
// annotation instead. A Job that tells neither reads as attempt 0 of a one-shot run, which sorts
// before every real run.
func runOfJob(taskName string, job *batchv1.Job) runID {
	if named, ok := runFromAnyName(taskName, job.Name); ok {
		return named
	}
	var r runID
	if n, err := strconv.ParseInt(job.Labels[v1.LabelAttempt], 10, 32); err == nil && n > 0 {
		r.Attempt = int32(n)
	}
	if ts, ok := job.Annotations[v1.AnnotationScheduledTime]; ok {
		if t, err := time.Parse(time.RFC3339, ts); err == nil {
			r.Scheduled = t.UTC()
		}
	}
	return r
}

// sortJobs orders jobs by run, oldest first; the name breaks ties.
func sortJobs(jobs []observedJob) {
	slices.SortFunc(jobs, func(a, b observedJob) int {
		switch {
		case a.Run.less(b.Run):
			return -1
		case b.Run.less(a.Run):
			return 1
		}
		return cmp.Compare(a.Name, b.Name)
	})
}

// findJob returns the job called name, or nil.
func findJob(jobs []observedJob, name string) *observedJob {
	for i := range jobs {
		if jobs[i].Name == name {
			return &jobs[i]
		}
	}
	return nil
}
