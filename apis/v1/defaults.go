package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of the v1 API. The schema markers on the types (+kubebuilder:default) cannot name Go
// constants, so TestSchemaDefaultsMatchConstants holds the generated CRD to these values.
const (
	DefaultParallelism       = 1
	DefaultMaxRetries        = 3
	DefaultBackoffInitial    = 10 * time.Second
	DefaultBackoffFactor     = 2
	DefaultBackoffMax        = 5 * time.Minute
	DefaultHTTPMethod        = "GET"
	DefaultConcurrencyPolicy = AllowConcurrent

	// Defaults that depend on other fields, which the schema cannot express; the defaulting
	// webhook applies them (SetDefaults).

	// DefaultHTTPTimeout bounds an HTTP runner's request when spec.runner.http.timeout is unset.
	DefaultHTTPTimeout = 30 * time.Second
	// DefaultSuccessfulJobsHistoryLimit and DefaultFailedJobsHistoryLimit are a scheduled
	// Task's history limits, as a CronJob's. A one-shot Task keeps all its Jobs unless set.
	DefaultSuccessfulJobsHistoryLimit = 3
	DefaultFailedJobsHistoryLimit     = 1
)

// DefaultBackoff is the backoff the schema gives a retry policy that names none.
func DefaultBackoff() *Backoff {
	return &Backoff{
		Initial: &metav1.Duration{Duration: DefaultBackoffInitial},
		Factor:  DefaultBackoffFactor,
		Max:     &metav1.Duration{Duration: DefaultBackoffMax},
	}
}

// SetDefaults fills every unset field that has a default, the schema's and the webhook's alike,
// so that a Task built in Go (or read from an old version) means what the API server would store.
func SetDefaults(task *Task) {
	SetFieldDefaults(task)
	if spec := &task.Spec; spec.Schedule != nil {
		if spec.SuccessfulJobsHistoryLimit == nil {
			spec.SuccessfulJobsHistoryLimit = ptrTo[int32](DefaultSuccessfulJobsHistoryLimit)
		}
		if spec.FailedJobsHistoryLimit == nil {
			spec.FailedJobsHistoryLimit = ptrTo[int32](DefaultFailedJobsHistoryLimit)
		}
	}
}

// SetFieldDefaults fills the defaults that depend on nothing outside the object they are in:
// all but the history limits, which a Task gets for having a schedule. A field defaulted for a
// reason that may go away (a removed schedule) is not the same as an unset one.
func SetFieldDefaults(task *Task) {
	spec := &task.Spec
	if spec.Parallelism == 0 {
		spec.Parallelism = DefaultParallelism
	}
	if spec.Retry == nil {
		spec.Retry = &RetryPolicy{MaxRetries: DefaultMaxRetries}
	}
	setBackoffDefaults(spec.Retry)
	if h := spec.Runner.HTTP; h != nil {
		if h.Method == "" {
			h.Method = DefaultHTTPMethod
		}
		if h.Timeout == nil {
			h.Timeout = &metav1.Duration{Duration: DefaultHTTPTimeout}
		}
	}
	if s := spec.Schedule; s != nil && s.ConcurrencyPolicy == "" {
		s.ConcurrencyPolicy = DefaultConcurrencyPolicy
	}
}

func setBackoffDefaults(r *RetryPolicy) {
	if r.Backoff == nil {
		r.Backoff = DefaultBackoff()
		return
	}
	b := r.Backoff
	if b.Initial == nil {
		b.Initial = &metav1.Duration{Duration: DefaultBackoffInitial}
	}
	if b.Factor == 0 {
		b.Factor = DefaultBackoffFactor
	}
	if b.Max == nil {
		b.Max = &metav1.Duration{Duration: DefaultBackoffMax}
	}
}

// MaxRetriesOf is how many times a failed run of task may be retried.
func MaxRetriesOf(task *Task) int32 {
	if task.Spec.Retry == nil {
		return DefaultMaxRetries
	}
	return max(0, task.Spec.Retry.MaxRetries)
}

func ptrTo[T any](v T) *T { return &v }
