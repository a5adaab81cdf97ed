package v1

import "k8s.io/apimachinery/pkg/runtime/schema"

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

	// AnnotationTaskUID is on every Job the operator creates: the UID of the Task it runs for.
	// A Job whose ownerReference was removed (by hand, or by a delete with --cascade=orphan)
	// is taken back by that Task alone, and its FinalizerRunOutcome released by the operator
	// once no such Task remains to record its outcome.
	AnnotationTaskUID = "task.example.com/task-uid"

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
