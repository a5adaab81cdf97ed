package v1

import (
	"fmt"
	"hash/fnv"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Names of the Task API: the CRD, its resource, and how other versions and clients address it.
const (
	// Group is the API group of every served version.
	Group = "example.com"
	// Kind is the kind of the one resource of the group.
	Kind = "Task"
	// Resource is the plural resource name.
	Resource = "tasks"
	// CRDName is the name of the CustomResourceDefinition: <resource>.<group>.
	CRDName = Resource + "." + Group
)

// GroupResource is the Task resource, independent of version.
var GroupResource = schema.GroupResource{Group: Group, Resource: Resource}

// GroupKind is the Task kind, independent of version.
var GroupKind = schema.GroupKind{Group: Group, Kind: Kind}

// ResourceAt is the Task resource at version.
func ResourceAt(version string) schema.GroupVersionResource {
	return GroupResource.WithVersion(version)
}

// Labels, annotations and the finalizer the operator puts on objects. Users select Jobs and pods
// by LabelTaskName, so these are part of the API.
const (
	// LabelTaskName is on every Job (and its pods) the operator creates; its value is the
	// Task's name, or a cut of it plus a hash when the name exceeds 63 characters.
	LabelTaskName = "task.example.com/name"
	// LabelRun identifies the run: the attempt number for a one-shot Task, the scheduled time
	// in Unix seconds for a scheduled Task.
	LabelRun = "task.example.com/run"
	// LabelAttempt is the attempt within the run, from 1.
	LabelAttempt = "task.example.com/attempt"
	// AnnotationPrefix begins every annotation the operator reads or writes; the operator's
	// cache keeps no other annotation of a Job.
	AnnotationPrefix = "task.example.com/"
	// AnnotationScheduledTime is the scheduled time (RFC 3339) of a scheduled Task's run.
	AnnotationScheduledTime = "task.example.com/scheduled-time"
	// AnnotationReplacedBy is put on an active Job just before concurrency policy Replace
	// deletes it; its value is the Job of the run that replaces it. It says, durably, that the
	// run ended by being replaced, not by failing.
	AnnotationReplacedBy = "task.example.com/replaced-by"

	// AnnotationRunRequested, on a Task, asks for a new run now: its value is an RFC 3339 time,
	// the request's identity (`kubectl task rerun|run` set it to the current second). A request
	// later than status.runRequest is pending; the operator starts one run for it once nothing
	// of the Task is active, records it in status.runRequest and puts the same annotation on
	// that run's Jobs. An annotation, not a spec field: a request is an imperative event (like
	// `kubectl rollout restart`'s restartedAt), and server-side apply or GitOps tools leave
	// other managers' annotations alone. See the README's "Run semantics".
	AnnotationRunRequested = "task.example.com/run-requested"
	// AnnotationCancelRequested, on a Task, asks to stop its current run: its value is an RFC
	// 3339 time. A request later than status.cancelRequest is pending; the operator deletes the
	// current run's active Jobs, which end Failed without a retry, and records the request in
	// status.cancelRequest. The same annotation on a Job says it was deleted for that request.
	AnnotationCancelRequested = "task.example.com/cancel-requested"

	// AnnotationUnreadable is set on a Task as a client reads it, never stored: the operator's
	// and kubectl task's clients (internal/readguard) drop a spec.resources quantity out of
	// QuantityFits' bounds, which no typed decoding parses in bounded time, and name it here.
	// The operator starts no run of such a Task and says why in its conditions (reason
	// ReasonInvalidSpec). A stored value is removed as the Task is read.
	AnnotationUnreadable = "task.example.com/unreadable"

	// AnnotationTaskUID is on every Job the operator creates: the UID of the Task it runs for.
	// A Job whose ownerReference was removed (by hand, or by a delete with --cascade=orphan)
	// is taken back by that Task alone, and its FinalizerRunOutcome released by the operator
	// once no such Task remains to record its outcome.
	AnnotationTaskUID = "task.example.com/task-uid"
	// AnnotationTaskName is on a Job whose Task's name is longer than a label value may be
	// (63 characters): the name, which LabelTaskName's cut and hash of it cannot give back. A
	// Job that lost its ownerReference finds its Task by it, to be taken back or, the Task
	// gone, to have FinalizerRunOutcome released.
	AnnotationTaskName = "task.example.com/task-name"

	// FinalizerJobs is on a Task only while it protects something: a run whose Job may exist
	// and whose outcome the status does not record yet, or a Job still holding
	// FinalizerRunOutcome. The mutating webhook places it on a Task created at v1 to run at
	// once (one-shot, not suspended), so the operator need not write it before the first Job; the
	// operator adds it itself otherwise. A Task whose runs are finished and recorded carries
	// none, so it deletes without the operator.
	FinalizerJobs = "task.example.com/jobs"
	// FinalizerRunOutcome is on every Job the operator creates, from its creation until the
	// Task's status records how that Job's attempt ended (like the Job controller's
	// batch.kubernetes.io/job-tracking finalizer on pods). A TTL, a user or the garbage
	// collector can delete the Job, but it stays readable until its outcome is recorded.
	FinalizerRunOutcome = "task.example.com/run-outcome"
)

// MaxJobNameLength bounds the names of the Jobs the operator creates: the Job controller copies
// a Job's name into the batch.kubernetes.io/job-name label of every pod, and a label value is
// at most 63 characters.
const MaxJobNameLength = 63

// JobName is the name of the Job that runs attempt (from 1) of a Task's run, scheduleKey being
// the run's schedule time in Unix seconds, 0 for a one-shot run: "<task>-<schedule>-<attempt>"
// when that is shorter than MaxJobNameLength, else exactly that long, "<cut task name>-<8 hex
// of the whole name>-<schedule>-<attempt>". The operator names Jobs by it, and `kubectl task`
// the Job it announces for a run request.
func JobName(taskName string, scheduleKey int64, attempt int32) string {
	return fitName(taskName, fmt.Sprintf("-%d-%d", scheduleKey, attempt), MaxJobNameLength)
}

// fitName joins base and suffix when the result is shorter than limit; otherwise it is exactly
// limit long: base cut, a hash of the whole base, then suffix. A joined name is never limit long
// and a hashed one always is, so no base can produce another base's hashed name (a Task named
// like another's cut-and-hashed form would otherwise share its Jobs' names). Dots at the end
// of the cut become '-', so the result stays a valid DNS subdomain and label value.
func fitName(base, suffix string, limit int) string {
	if len(base)+len(suffix) < limit {
		return base + suffix
	}
	hash := "-" + NameHash(base)
	keep := max(1, limit-len(suffix)-len(hash))
	cut := []byte(base[:min(keep, len(base))])
	for i := len(cut) - 1; i >= 0 && cut[i] == '.'; i-- {
		cut[i] = '-'
	}
	return string(cut) + hash + suffix
}

// NameHash is the 8 hex digits of the FNV-1a hash of name that a cut name carries, so that two
// long names with the same beginning stay apart.
func NameHash(name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return fmt.Sprintf("%08x", h.Sum32())
}

// RequestClockSkew is how far ahead of the operator's clock a request's time may be and still
// be one made now on a clock a little ahead (or stamped a second after another request by the
// plugin, which orders a run request and a cancel made in the same second that way). A request
// further ahead was set by hand for then. Both the operator and `kubectl task` read it: a cancel
// this close ahead is carried out at once (and drops a pending run request earlier than it),
// and the plugin puts a request made now after a pending one this close ahead.
const RequestClockSkew = time.Minute
