package reconciler

// Labels, annotations and the finalizer the controller puts on objects.
const (
	// LabelTaskName is on every Job (and its pods) the controller creates; its value is the
	// Task's name (see labelValue for names longer than a label value allows). The cache only
	// holds Jobs that carry it.
	LabelTaskName = "task.example.com/name"
	// LabelRun identifies the run: the attempt number for a one-shot Task, the scheduled time
	// in Unix seconds for a scheduled Task.
	LabelRun = "task.example.com/run"
	// LabelAttempt is the attempt within the run, from 1.
	LabelAttempt = "task.example.com/attempt"
	// AnnotationScheduledTime is the scheduled time (RFC 3339) of a scheduled Task's run.
	AnnotationScheduledTime = "task.example.com/scheduled-time"

	// FinalizerJobs keeps a Task until the controller has deleted its Jobs.
	FinalizerJobs = "task.example.com/jobs"

	// ControllerName names the controller (metrics, logs) and the reporter of its Events.
	ControllerName = "task"
	eventReporter  = "task-operator"
)
