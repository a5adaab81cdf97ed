package reconciler

const (
	// ControllerName names the controller (metrics, logs) and the reporter of its Events.
	ControllerName = "task"
	eventReporter  = "task-operator"
)
