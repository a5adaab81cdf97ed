package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RunnerType names the kind of work a Task runs.
// +kubebuilder:validation:Enum=Shell;HTTP
type RunnerType string

// Runner is a one-of: Type names the member that must be set, and only that one.
// +kubebuilder:validation:XValidation:rule="self.type == 'Shell' ? has(self.shell) : !has(self.shell)",message="runner.shell must be set when runner.type is Shell, and only then",fieldPath=".shell",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="self.type == 'HTTP' ? has(self.http) : !has(self.http)",message="runner.http must be set when runner.type is HTTP, and only then",fieldPath=".http",reason=FieldValueInvalid
type Runner struct {
	// Type selects the runner.
	// +required
	Type RunnerType `json:"type"`
	// +optional
	Shell *ShellRunner `json:"shell,omitempty"`
	// +optional
	HTTP *HTTPRunner `json:"http,omitempty"`
}

// ShellRunner runs a script in a container.
type ShellRunner struct {
	// Script is passed to `sh -c`.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	Script string `json:"script"`
	// Image holds the shell. Empty means the operator's default shell image.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`
}

// HTTPRunner performs one HTTP request; any 2xx response is success.
type HTTPRunner struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="must be an absolute http or https URL"
	URL string `json:"url"`
	// +optional
	// +kubebuilder:default=GET
	// +kubebuilder:validation:Enum=GET;HEAD;POST;PUT;PATCH;DELETE
	Method string `json:"method,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Headers []HTTPHeader `json:"headers,omitempty"`
}

// HTTPHeader is one request header.
type HTTPHeader struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[!#$%&'*+.^_|~0-9A-Za-z-]+$`
	Name string `json:"name"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value,omitempty"`
}

// TaskSpec is what the user wants run.
type TaskSpec struct {
	// +required
	Runner Runner `json:"runner"`

	// Parallelism is how many pods each run starts at once.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Parallelism int32 `json:"parallelism,omitempty"`

	// MaxRetries is how many times a failed run is retried.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MaxRetries int32 `json:"maxRetries"`

	// Schedule is a cron expression, evaluated in UTC. Empty runs the Task once.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Schedule string `json:"schedule,omitempty"`

	// Suspend stops new runs from starting.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// TaskStatus is what the operator observed.
type TaskStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase takes v1's status.phase values: a status write at this version is held to them.
	// +optional
	// +kubebuilder:validation:Enum=Pending;Queued;Running;Retrying;Scheduled;Suspended;Succeeded;Failed
	Phase string `json:"phase,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	Attempts int32 `json:"attempts,omitempty"`
	// +optional
	LastJobName string `json:"lastJobName,omitempty"`
	// +optional
	LastError string `json:"lastError,omitempty"`
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// Task runs a shell script or an HTTP call as Kubernetes Jobs.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tsk,categories=tasks
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.runner.type`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Attempts",type=integer,JSONPath=`.status.attempts`
// +kubebuilder:printcolumn:name="Last Job",type=string,JSONPath=`.status.lastJobName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Task struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TaskSpec `json:"spec"`
	// +optional
	Status TaskStatus `json:"status,omitempty"`
}

// TaskList is a list of Tasks.
// +kubebuilder:object:root=true
type TaskList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Task `json:"items"`
}
