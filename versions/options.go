// Package versions drives the lifecycle of an old version of the Task API: report who and what
// still uses it (Status), mark it deprecated (Deprecate), stop serving it once nothing does
// (Retire, with preflight checks that name each blocker), and serve it again (Serve, the
// rollback). It knows the Task CRD and talks to the apiserver through discovery, the metadata
// and dynamic clients; it never touches the reconciler. Storage migration is package migrate's,
// which Retire reuses (Options.Migrate).
//
// What it can and cannot know about the clients of a version:
//   - Writes (create, update, patch, apply; the status subresource too) pass the operator's
//     admission webhooks, which see the request's version, the user and the field manager: the
//     webhook counts them (taskoperator_admission_requests_total) and keeps a rolling record
//     in a ConfigMap (UsageConfigMap) that Status reads.
//   - Reads (GET, LIST, WATCH) and deletes never reach admission. The apiserver counts them
//     per version (apiserver_request_total) and gauges open watches
//     (apiserver_longrunning_requests), without naming the client, and per apiserver: on a
//     control plane with several apiservers each one counts only what it served, and Status
//     reads the one its request reaches. Only the audit log names the reader (user, userAgent,
//     requestURI): Options.AuditLog reads one.
package versions

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/rest"

	taskv1 "example.com/task-operator/apis/v1"
)

// Defaults applied to zero-valued Options fields.
const (
	DefaultOperatorNamespace = "task-operator-system"
	DefaultRecentWindow      = 24 * time.Hour
	DefaultObserve           = 5 * time.Second
	DefaultQPS               = 20
	DefaultPageSize          = 500
	DefaultDiscoveryTimeout  = 2 * time.Minute
)

// FieldManager is the field manager and user agent of every request the commands make.
const FieldManager = "task-operator-versions"

// Options configure Status, Deprecate, Retire and Serve. The zero value works on the Task CRD
// with the defaults above.
type Options struct {
	// CRDName is the Task CRD. Default tasks.example.com.
	CRDName string
	// OperatorNamespace holds the webhook's usage record (UsageConfigMap).
	OperatorNamespace string
	// AuditLog, if set, is an apiserver audit log (JSON lines, audit.k8s.io/v1 Events) whose
	// requests to the CRD's group are counted per version, user and user agent.
	AuditLog string
	// RecentWindow: a write recorded by the webhook this recently blocks Retire (unless Force).
	RecentWindow time.Duration
	// Observe is how long Retire watches the apiserver's request counters for requests at the
	// version before it decides; negative skips the observation.
	Observe time.Duration
	// PageSize is the limit of each metadata LIST.
	PageSize int64
	// QPS limits the ownerReference rewrites (and migrate's rewrites with Migrate).
	QPS float64

	// Warning is the deprecation warning Deprecate sets.
	Warning string

	// DryRun: Retire runs the checks and prints the plan, and changes nothing.
	DryRun bool
	// Force: live watches and recent requests at the version do not block Retire.
	Force bool
	// Migrate: Retire first runs migrate.Run when objects or managedFields are at the version.
	Migrate bool
	// MigrateCheckpoint is migrate's checkpoint file with Migrate.
	MigrateCheckpoint string
	// RewriteOwnerRefs: Retire first rewrites dependents' ownerReferences that name the
	// version to the storage version.
	RewriteOwnerRefs bool

	// Out receives the report, the plan and progress; nil discards them.
	Out io.Writer
}

func (o Options) withDefaults() Options {
	if o.CRDName == "" {
		o.CRDName = taskv1.CRDName
	}
	if o.OperatorNamespace == "" {
		o.OperatorNamespace = DefaultOperatorNamespace
	}
	if o.RecentWindow <= 0 {
		o.RecentWindow = DefaultRecentWindow
	}
	if o.Observe == 0 {
		o.Observe = DefaultObserve
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.QPS <= 0 {
		o.QPS = DefaultQPS
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	return o
}

// BindFlags registers the flags of the versions commands on fs and returns the Options they
// fill in. Connection flags such as --kubeconfig are the caller's; so is Out.
func BindFlags(fs *flag.FlagSet) *Options {
	o := &Options{}
	fs.StringVar(&o.CRDName, "crd-name", taskv1.CRDName, "name of the Task CustomResourceDefinition")
	fs.StringVar(&o.OperatorNamespace, "operator-namespace", DefaultOperatorNamespace, "namespace of the operator, whose ConfigMap "+UsageConfigMap+" records writes per version")
	fs.StringVar(&o.AuditLog, "audit-log", "", "apiserver audit log (JSON lines) to count requests per version, user and user agent from")
	fs.DurationVar(&o.RecentWindow, "recent-window", DefaultRecentWindow, "retire: a write at the version recorded this recently blocks (unless --force)")
	fs.DurationVar(&o.Observe, "observe", DefaultObserve, "retire: watch the apiserver's request counters at the version this long; negative skips it")
	fs.Int64Var(&o.PageSize, "page-size", DefaultPageSize, "objects per metadata LIST page")
	fs.Float64Var(&o.QPS, "qps", DefaultQPS, "retire: ownerReference rewrites (and --migrate's rewrites) per second")
	fs.StringVar(&o.Warning, "warning", "", "deprecate: the warning the apiserver sends on every request at the version (default names the replacement)")
	fs.BoolVar(&o.DryRun, "dry-run", false, "print the plan, change nothing")
	fs.BoolVar(&o.Force, "force", false, "retire: live watches, recent requests and unscanned resources do not block")
	fs.BoolVar(&o.Migrate, "migrate", false, "retire: first migrate the Tasks (and their managedFields) off the version, as task-operator migrate does")
	fs.StringVar(&o.MigrateCheckpoint, "checkpoint", "", "retire --migrate: migrate's checkpoint file")
	fs.BoolVar(&o.RewriteOwnerRefs, "rewrite-owner-refs", false, "retire: first rewrite dependents' ownerReferences naming the version to the storage version")
	return o
}

// Command runs one versions subcommand: status, deprecate VERSION, retire VERSION, serve
// VERSION. It is what a CLI wires its flags to.
func Command(ctx context.Context, cfg *rest.Config, sub string, args []string, opts Options) error {
	if err := CheckArgs(sub, args); err != nil {
		return err
	}
	switch sub {
	case "status":
		_, err := Status(ctx, cfg, opts)
		return err
	case "deprecate":
		return Deprecate(ctx, cfg, args[0], opts)
	case "retire":
		_, err := Retire(ctx, cfg, args[0], opts)
		return err
	default: // serve
		return Serve(ctx, cfg, args[0], opts)
	}
}

// CheckArgs checks a subcommand and its arguments before anything is asked of the apiserver:
// status takes none, deprecate, retire and serve one VERSION.
func CheckArgs(sub string, args []string) error {
	switch sub {
	case "status":
		if len(args) != 0 {
			return fmt.Errorf("versions status takes no arguments, got %v", args)
		}
	case "deprecate", "retire", "serve":
		if len(args) != 1 {
			return fmt.Errorf("versions %s: want one VERSION argument, got %d", sub, len(args))
		}
	default:
		return fmt.Errorf("versions: unknown subcommand %q (want status, deprecate, retire or serve)", sub)
	}
	return nil
}
