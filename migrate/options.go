// Package migrate moves every stored Task to the storage version of the Task CRD (v1) and then
// trims the CRD's status.storedVersions to [v1], so that older versions can later be removed
// from the CRD.
//
// The apiserver encodes an object at the current storage version whenever it writes it, so a
// write that changes nothing is enough: Run lists the Tasks page by page at v1 and sends each
// one back unchanged with an Update carrying the resourceVersion it was read at. Optimistic
// concurrency makes that safe beside concurrent writers: a Task changed since it was read is
// answered with a Conflict, read again and rewritten, and never overwritten with stale data.
//
// The rewrite also moves the object's managedFields entries recorded at v1alpha1 or v1beta1 to
// v1, their field paths translated by conversion.FieldMaps (see movedManagedFields): the
// apiserver converts to the version of every such entry on each later write of the object. An
// object with a path that has no v1 counterpart keeps its managedFields as they were, and the
// summary names it.
//
// Only when every object has been rewritten, and the CRD's generation and storage version are
// still what they were when the run started, is status.storedVersions set to [v1].
//
// RunStorageVersionMigration does the same with the apiserver's own StorageVersionMigration
// API (storagemigration.k8s.io/v1), run by kube-controller-manager.
package migrate

import (
	"flag"
	"fmt"
	"io"
	"time"

	taskv1 "example.com/task-operator/apis/v1"
)

// Defaults applied by Run to zero-valued Options fields.
const (
	DefaultCRDName          = taskv1.CRDName
	DefaultPageSize         = 500
	DefaultConcurrency      = 4
	DefaultProgressInterval = 10 * time.Second
)

// FieldManager is the field manager and user agent of the writes Run makes.
const FieldManager = "task-operator-migrate"

// TargetVersion is the version every Task must be stored at when Run finishes.
var TargetVersion = taskv1.GroupVersion.Version

// Options configures Run. The zero value migrates all namespaces with the defaults above.
type Options struct {
	// Namespace limits the migration to one namespace; "" migrates all of them. A migration
	// of one namespace never trims storedVersions: the other namespaces are not migrated.
	Namespace string
	// PageSize is the limit of each LIST request. Default 500.
	PageSize int64
	// Concurrency is how many rewrites are in flight at once. Default 4.
	Concurrency int
	// QPS limits the rate of rewrites (retries included); 0 means unlimited. The apiserver's
	// API Priority and Fairness still applies.
	QPS float64
	// DryRun lists and counts the Tasks and reports what would be done; it writes nothing,
	// not even the checkpoint.
	DryRun bool
	// CheckpointFile, if set, records progress after each fully processed page so that an
	// interrupted run resumes where it stopped. It is removed when the run succeeds.
	CheckpointFile string
	// Progress receives progress lines and notable events; nil discards them.
	Progress io.Writer
	// ProgressInterval is the period of progress lines. Default 10s.
	ProgressInterval time.Duration
	// CRDName is the name of the Task CRD. Default tasks.example.com.
	CRDName string
	// Force rewrites the Tasks even when storedVersions already is [v1].
	Force bool
}

func (o Options) withDefaults() Options {
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = DefaultProgressInterval
	}
	if o.CRDName == "" {
		o.CRDName = DefaultCRDName
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.QPS < 0 {
		o.QPS = 0
	}
	return o
}

// BindFlags registers the migration flags on fs and returns the Options they fill in:
// --namespace --page-size --concurrency --qps --dry-run --checkpoint --progress-interval
// --crd-name --force. Connection flags such as --kubeconfig are the caller's; so is Progress.
func BindFlags(fs *flag.FlagSet) *Options {
	o := &Options{}
	fs.StringVar(&o.Namespace, "namespace", "", "migrate only this namespace (storedVersions is then left alone); empty means all namespaces")
	fs.Int64Var(&o.PageSize, "page-size", DefaultPageSize, "objects per LIST page")
	fs.IntVar(&o.Concurrency, "concurrency", DefaultConcurrency, "rewrites in flight at once")
	fs.Float64Var(&o.QPS, "qps", 0, "maximum rewrites per second; 0 means unlimited")
	fs.BoolVar(&o.DryRun, "dry-run", false, "list and count the Tasks, write nothing")
	fs.StringVar(&o.CheckpointFile, "checkpoint", "", "file that records progress so an interrupted run can resume")
	fs.DurationVar(&o.ProgressInterval, "progress-interval", DefaultProgressInterval, "how often to print progress")
	fs.StringVar(&o.CRDName, "crd-name", DefaultCRDName, "name of the Task CustomResourceDefinition")
	fs.BoolVar(&o.Force, "force", false, "rewrite the Tasks even if storedVersions is already [v1]")
	return o
}

// CheckFlags refuses values BindFlags's flags do not take, naming the flag: where Run reads a
// zero as "the default" (a library caller's unset field), a command line that says 0 or less
// asked for something Run would not do.
func (o Options) CheckFlags() error {
	switch {
	case o.PageSize < 1:
		return fmt.Errorf("--page-size must be at least 1, not %d", o.PageSize)
	case o.Concurrency < 1:
		return fmt.Errorf("--concurrency must be at least 1, not %d", o.Concurrency)
	case o.QPS < 0:
		return fmt.Errorf("--qps must be 0 (unlimited) or more, not %g", o.QPS)
	case o.ProgressInterval <= 0:
		return fmt.Errorf("--progress-interval must be positive, not %s", o.ProgressInterval)
	}
	return nil
}
