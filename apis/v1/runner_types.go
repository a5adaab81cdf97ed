package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Runner is a one-of: Type names the member that must be set, and only that one.
// +kubebuilder:validation:XValidation:rule="self.type == 'Shell' ? has(self.shell) : !has(self.shell)",message="runner.shell must be set when runner.type is Shell, and only then",fieldPath=".shell",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="self.type == 'HTTP' ? has(self.http) : !has(self.http)",message="runner.http must be set when runner.type is HTTP, and only then",fieldPath=".http",reason=FieldValueInvalid
type Runner struct {
	// Type selects the runner.
	// +required
	Type RunnerType `json:"type"`

	// Shell runs a script with `sh -c` in a container image.
	// +optional
	Shell *ShellRunner `json:"shell,omitempty"`

	// HTTP performs one HTTP request and succeeds when the response status is accepted.
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

	// Env is set in the script's environment.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Env []EnvVar `json:"env,omitempty"`
}

// EnvVar is one environment variable.
type EnvVar struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	Name string `json:"name"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value,omitempty"`
}

// HTTPRunner performs one HTTP request.
type HTTPRunner struct {
	// URL to call, http or https.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="must be an absolute http or https URL"
	URL string `json:"url"`

	// Method is the HTTP method.
	// +optional
	// +kubebuilder:default=GET
	// +kubebuilder:validation:Enum=GET;HEAD;POST;PUT;PATCH;DELETE
	Method string `json:"method,omitempty"`

	// Headers are sent with the request.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Headers []HTTPHeader `json:"headers,omitempty"`

	// Body is sent as the request body.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	Body string `json:"body,omitempty"`

	// Timeout bounds the whole request. Empty means 30s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('1h')",message="must be a duration between 0s and 1h, such as 30s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// AcceptedStatusCodes are the response codes that count as success. Empty means any 2xx.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Minimum=100
	// +kubebuilder:validation:items:Maximum=599
	AcceptedStatusCodes []int32 `json:"acceptedStatusCodes,omitempty"`
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
