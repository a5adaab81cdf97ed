package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TaskType names the kind of work a Task runs.
// +kubebuilder:validation:Enum=shell;http
type TaskType string

// TaskSpec is the original, flat shape of a Task.
// +kubebuilder:validation:XValidation:rule="self.type == 'shell' ? has(self.shell) : !has(self.shell)",message="shell must be set when type is shell, and only then",fieldPath=".shell",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="self.type == 'http' ? has(self.url) : !has(self.url)",message="url must be set when type is http, and only then",fieldPath=".url",reason=FieldValueInvalid
type TaskSpec struct {
	// Type is shell or http.
	// +required
	Type TaskType `json:"type"`

	// Replicas is how many pods run at once.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Replicas int32 `json:"replicas,omitempty"`

	// Shell is the script run with `sh -c` when type is shell.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	Shell string `json:"shell,omitempty"`

	// URL is fetched with GET when type is http.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="must be an absolute http or https URL"
	URL string `json:"url,omitempty"`

	// MaxRetry is how many times a failed run is retried.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MaxRetry int32 `json:"maxRetry"`
}

// TaskStatus is the original status: a state string and counters.
type TaskStatus struct {
	// State takes v1's status.phase values: a status write at this version is held to them.
	// +optional
	// +kubebuilder:validation:Enum=Pending;Queued;Running;Retrying;Scheduled;Suspended;Succeeded;Failed
	State string `json:"state,omitempty"`
	// +optional
	LastJobName string `json:"lastJobName,omitempty"`
	// RetryCount is v1's status.attempts less one, so at most one less than int32 holds.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483646
	RetryCount int32 `json:"retryCount,omitempty"`
	// +optional
	LastError string `json:"lastError,omitempty"`
	// +optional
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`
}

// v1alpha1 is deprecated: the apiserver sends the warning below on every request at it (kubectl
// prints it); versions.DefaultWarning writes the same one, and a test keeps them equal.

// Task runs a shell script or an HTTP GET as Kubernetes Jobs.
// +kubebuilder:deprecatedversion:warning="example.com/v1alpha1 Task is deprecated and will stop being served; use example.com/v1 (task-operator versions status shows who still uses v1alpha1)"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tsk,categories=tasks
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Retries",type=integer,JSONPath=`.status.retryCount`
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
