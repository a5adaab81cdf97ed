package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"example.com/task-operator/apis/install"
	"example.com/task-operator/internal/readguard"
	"example.com/task-operator/internal/version"
	"example.com/task-operator/reconciler"
	"example.com/task-operator/webhook"
	"example.com/task-operator/webhook/cert"
	"example.com/task-operator/webhook/local"
)

// Leader election is granted by its own Role in config/rbac, the metrics endpoint's token and
// access reviews by metrics-auth-role; the webhook certificate's permissions are declared in
// package webhook/cert and the local-run ones in webhook/local.

type managerFlags struct {
	metricsAddr      string
	metricsSecure    bool
	metricsCertDir   string
	metricsCertName  string
	metricsKeyName   string
	probeAddr        string
	pprofAddr        string
	leaderElect      bool
	leaderElectID    string
	leaderElectNS    string
	qps              float64
	burst            int
	syncPeriod       time.Duration
	shutdownDelay    time.Duration
	gracefulShutdown time.Duration
	certManagement   string
	local            local.Options
	webhook          webhook.Options
	reconciler       reconciler.Options
	zap              zap.Options
}

// Defaults of the shutdown flags; config/manager/manager.yaml's terminationGracePeriodSeconds
// covers their sum.
const (
	defaultShutdownDelay    = 10 * time.Second
	defaultGracefulShutdown = 20 * time.Second
)

// parseManagerFlags parses args as `task-operator manager` does.
func parseManagerFlags(args []string) (*managerFlags, error) {
	f, fs := newManagerFlags()
	cmd := &cobra.Command{Use: "manager"}
	cmd.Flags().AddGoFlagSet(fs)
	if err := cmd.ParseFlags(args); err != nil {
		return nil, err
	}
	return f, f.completeFlags(cmd.Flags())
}

// newManagerFlags defines the manager's flags; completeFlags finishes them once parsed.
func newManagerFlags() (*managerFlags, *flag.FlagSet) {
	f := &managerFlags{webhook: webhook.DefaultOptions()}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.Func("kubeconfig", "kubeconfig file; default $KUBECONFIG, then in-cluster", setKubeconfig)
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8443", "address of the metrics endpoint; 0 disables it")
	fs.BoolVar(&f.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS, authenticated and authorized through the apiserver")
	fs.StringVar(&f.metricsCertDir, "metrics-cert-dir", "", "directory of the metrics serving certificate (reloaded on change); empty means a self-signed one")
	fs.StringVar(&f.metricsCertName, "metrics-cert-name", "tls.crt", "certificate file in --metrics-cert-dir")
	fs.StringVar(&f.metricsKeyName, "metrics-cert-key", "tls.key", "key file in --metrics-cert-dir")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.StringVar(&f.pprofAddr, "pprof-bind-address", "", "address of Go's /debug/pprof endpoints (unauthenticated: bind to loopback); empty disables them")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "elect one active controller among replicas (webhooks are served by all)")
	fs.StringVar(&f.leaderElectID, "leader-election-id", "task-operator.example.com", "name of the leader election Lease")
	fs.StringVar(&f.leaderElectNS, "leader-election-namespace", "", "namespace of the Lease; empty means the operator's namespace")
	fs.Float64Var(&f.qps, "kube-api-qps", 50, "client queries per second to the apiserver, per client (Events have a client of their own); negative: no client-side limit")
	fs.IntVar(&f.burst, "kube-api-burst", 100, "client burst to the apiserver")
	fs.Float64Var(&f.reconciler.NormalEventQPS, "normal-event-qps", reconciler.DefaultNormalEventQPS, "Normal Events recorded per second, all Tasks together, once the burst is spent (the rest are dropped and counted; Warnings are never limited); negative: no limit; 0: the default")
	fs.IntVar(&f.reconciler.NormalEventBurst, "normal-event-burst", reconciler.DefaultNormalEventBurst, "Normal Events recorded at once before --normal-event-qps applies (0 or less: the default)")
	fs.DurationVar(&f.syncPeriod, "sync-period", 10*time.Hour, "how often every Task is reconciled even without changes")
	fs.DurationVar(&f.shutdownDelay, "shutdown-delay", defaultShutdownDelay, "on SIGTERM, fail readiness and keep serving this long before stopping, so the Service stops sending webhook requests first (default 0 with --webhook-local-url)")
	fs.DurationVar(&f.gracefulShutdown, "graceful-shutdown-timeout", defaultGracefulShutdown, "after the shutdown delay, how long in-flight work may take to finish")
	fs.IntVar(&f.reconciler.MaxConcurrentReconciles, "max-concurrent-reconciles", reconciler.DefaultMaxConcurrentReconciles, "Tasks reconciled in parallel")
	fs.DurationVar(&f.reconciler.RateLimiterBaseDelay, "rate-limiter-base-delay", reconciler.DefaultRateLimiterBaseDelay, "first retry delay of a failing reconcile (per item, exponential)")
	fs.DurationVar(&f.reconciler.RateLimiterMaxDelay, "rate-limiter-max-delay", reconciler.DefaultRateLimiterMaxDelay, "longest retry delay of a failing reconcile")
	fs.StringVar(&f.reconciler.ShellImage, "shell-image", reconciler.DefaultShellImage, "image that runs shell Tasks without an image of their own")
	// The Deployment sets RUNNER_IMAGE next to the container's image, and kustomize's images:
	// rewrites both (config/manager/kustomizeconfig.yaml): one setting moves manager and runner.
	fs.StringVar(&f.reconciler.RunnerImage, "runner-image", envOr("RUNNER_IMAGE", reconciler.DefaultRunnerImage), "this operator's image, which runs HTTP Tasks (default $RUNNER_IMAGE)")
	fs.StringVar(&f.certManagement, "cert-management", "self", "webhook certificates: self (created, rotated and injected by the operator) or external (cert-manager)")
	fs.BoolVar(&f.webhook.EnableHTTP2, "enable-http2", false, "offer HTTP/2 on the webhook and metrics servers (off: HTTP/1.1 only, which is what the apiserver uses for a webhook behind a Service)")
	fs.DurationVar(&f.webhook.UsageInterval, "usage-record-interval", f.webhook.UsageInterval, "how often the validating webhook writes its record of Task writes per API version and user to the ConfigMap task-operator-version-usage (read by task-operator versions status); 0 keeps none")
	fs.StringVar(&f.webhook.Host, "webhook-host", "", "address the webhook server binds to")
	fs.IntVar(&f.webhook.Port, "webhook-port", f.webhook.Port, "webhook server port")
	fs.StringVar(&f.webhook.CertDir, "webhook-cert-dir", f.webhook.CertDir, "directory of tls.crt and tls.key")
	fs.StringVar(&f.webhook.Namespace, "webhook-namespace", envOr("POD_NAMESPACE", f.webhook.Namespace), "namespace of the webhook Service and certificate Secret")
	fs.StringVar(&f.webhook.SecretName, "webhook-secret", f.webhook.SecretName, "Secret holding the webhook CA and serving certificate")
	fs.StringVar(&f.webhook.ServiceName, "webhook-service", f.webhook.ServiceName, "Service in front of the webhook server")
	fs.StringVar(&f.webhook.MutatingConfigName, "mutating-webhook-configuration", f.webhook.MutatingConfigName, "name of the MutatingWebhookConfiguration")
	fs.StringVar(&f.webhook.ValidatingConfigName, "validating-webhook-configuration", f.webhook.ValidatingConfigName, "name of the ValidatingWebhookConfiguration")
	fs.DurationVar(&f.webhook.CertValidity, "cert-validity", f.webhook.CertValidity, "lifetime of a serving certificate")
	fs.DurationVar(&f.webhook.CertLookahead, "cert-lookahead", f.webhook.CertLookahead, "renew a certificate this long before it expires")
	fs.DurationVar(&f.webhook.CertCheckInterval, "cert-check-interval", f.webhook.CertCheckInterval, "how often certificates are checked for renewal")
	fs.StringVar(&f.local.URL, "webhook-local-url", "", "run outside the cluster: the apiserver reaches the webhooks at this https URL (e.g. https://localhost:9443)")
	fs.BoolVar(&f.local.InstallCRD, "install-crd", false, "with --webhook-local-url: apply the embedded Task CRD before starting")
	f.zap.BindFlags(fs)
	return f, fs
}

// completeFlags checks the parsed flags (fs says which were given) and derives the rest.
func (f *managerFlags) completeFlags(fs *pflag.FlagSet) error {
	if err := f.complete(); err != nil {
		return err
	}
	if f.local.URL != "" && !fs.Changed("shutdown-delay") {
		// Called by URL, not through a Service: there is no endpoint to leave first.
		f.shutdownDelay = 0
	}
	return nil
}

// complete checks the flags against each other and derives the settings that follow from them.
func (f *managerFlags) complete() error {
	switch f.certManagement {
	case "self":
		f.webhook.SelfManagedCerts = true
	case "external":
		f.webhook.SelfManagedCerts = false
	default:
		return fmt.Errorf("--cert-management=%q: want self or external", f.certManagement)
	}
	f.webhook.LeaderElection = f.leaderElect
	if f.local.InstallCRD && f.local.URL == "" {
		return errors.New("--install-crd is for local runs: give --webhook-local-url too")
	}
	if f.local.URL != "" {
		if err := f.local.Validate(); err != nil {
			return err
		}
		f.webhook.DNSNames = f.local.DNSNames()
	}
	if f.metricsCertDir != "" {
		for _, name := range []string{f.metricsCertName, f.metricsKeyName} {
			if _, err := os.Stat(filepath.Join(f.metricsCertDir, name)); err != nil {
				return fmt.Errorf("--metrics-cert-dir: %w", err)
			}
		}
	}
	return nil
}

// runManager runs the controller and webhooks until a signal stops them.
func runManager(f *managerFlags) error {
	// The certificate rotator logs expected states as errors on every start; see
	// cert.QuietExpectedErrors.
	ctrl.SetLogger(cert.QuietExpectedErrors(zap.New(zap.UseFlagOptions(&f.zap))))
	applyDefaultGCPercent(os.LookupEnv)
	var stop shutdown
	ctx := stop.context(signals(), f.shutdownDelay, ctrl.Log.WithName("shutdown"))
	if err := startManager(ctx, f, &stop); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		return errAlreadyReported
	}
	return nil
}

func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apix.AddToScheme, admissionv1.AddToScheme, install.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

func startManager(ctx context.Context, f *managerFlags, stop *shutdown) error {
	scheme, err := newScheme()
	if err != nil {
		return fmt.Errorf("build scheme: %w", err)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(f.qps), f.burst
	// One Task no typed decoding can read must not stop the informer, and with it every Task
	// and the webhooks this process serves.
	readguard.Wrap(cfg)
	if err := prepareLocal(ctx, cfg, scheme, f); err != nil {
		return err
	}
	served := &cert.Served{}
	mgr, err := ctrl.NewManager(cfg, managerOptions(f, scheme, served))
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	f.webhook.Draining = stop.draining.Load
	if err := webhook.Setup(mgr, f.webhook, served); err != nil {
		return err
	}
	if err := reconciler.SetupWithManager(mgr, f.reconciler); err != nil {
		return fmt.Errorf("set up task controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("shutdown", stop.readyCheck); err != nil {
		return fmt.Errorf("add shutdown readiness check: %w", err)
	}
	ctrl.Log.Info("starting manager", "version", version.Get().Version, "revision", version.Get().Revision,
		"webhookPort", f.webhook.Port, "leaderElection", f.leaderElect, "runnerImage", f.reconciler.RunnerImage)
	return mgr.Start(ctx)
}

func managerOptions(f *managerFlags, scheme *runtime.Scheme, served *cert.Served) ctrl.Options {
	metrics := metricsserver.Options{BindAddress: f.metricsAddr, SecureServing: f.metricsSecure}
	if !f.webhook.EnableHTTP2 {
		metrics.TLSOpts = append(metrics.TLSOpts, webhook.HTTP1Only)
	}
	if f.metricsSecure {
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	if f.metricsCertDir != "" {
		metrics.CertDir, metrics.CertName, metrics.KeyName = f.metricsCertDir, f.metricsCertName, f.metricsKeyName
	}
	cacheOpts := reconciler.CacheOptions()
	if cacheOpts.ByObject == nil {
		cacheOpts.ByObject = map[client.Object]cache.ByObject{}
	}
	for obj, by := range webhook.CacheByObject(f.webhook) {
		cacheOpts.ByObject[obj] = by
	}
	cacheOpts.SyncPeriod = &f.syncPeriod
	return ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metrics,
		HealthProbeBindAddress:        f.probeAddr,
		PprofBindAddress:              f.pprofAddr,
		LeaderElection:                f.leaderElect,
		LeaderElectionID:              f.leaderElectID,
		LeaderElectionNamespace:       f.leaderElectNS,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &f.gracefulShutdown,
		WebhookServer:                 webhook.Server(f.webhook, served),
		Cache:                         cacheOpts,
		NewCache:                      reconciler.NewCache,
	}
}

// prepareLocal points the apiserver at this process when it runs outside the cluster.
func prepareLocal(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, f *managerFlags) error {
	if f.local.URL == "" {
		return nil
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	return local.Prepare(ctx, c, f.local, f.webhook)
}

// setKubeconfig hands --kubeconfig to controller-runtime's loader, which reads $KUBECONFIG.
func setKubeconfig(path string) error { return os.Setenv("KUBECONFIG", path) }

func envOr(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}
