package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"example.com/task-operator/apis/install"

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

	"example.com/task-operator/reconciler"
	"example.com/task-operator/webhook"
)

// The webhook certificate Secret lives in the operator's namespace; leader election and the
// metrics endpoint's token and access reviews are granted by their own roles in config/rbac.
// +kubebuilder:rbac:groups="",namespace=task-operator-system,resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;list;watch;create;update;patch

type managerFlags struct {
	metricsAddr    string
	metricsSecure  bool
	probeAddr      string
	leaderElect    bool
	leaderElectID  string
	leaderElectNS  string
	qps            float64
	burst          int
	syncPeriod     time.Duration
	certManagement string
	installCRD     bool
	webhook        webhook.Options
	reconciler     reconciler.Options
	zap            zap.Options
}

func parseManagerFlags(args []string) (*managerFlags, error) {
	f := &managerFlags{webhook: webhook.DefaultOptions()}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.Func("kubeconfig", "kubeconfig file; default $KUBECONFIG, then in-cluster", setKubeconfig)
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8443", "address of the metrics endpoint; 0 disables it")
	fs.BoolVar(&f.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS, authenticated and authorized through the apiserver")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "elect one active controller among replicas (webhooks are served by all)")
	fs.StringVar(&f.leaderElectID, "leader-election-id", "task-operator.example.com", "name of the leader election Lease")
	fs.StringVar(&f.leaderElectNS, "leader-election-namespace", "", "namespace of the Lease; empty means the operator's namespace")
	fs.Float64Var(&f.qps, "kube-api-qps", 50, "client queries per second to the apiserver")
	fs.IntVar(&f.burst, "kube-api-burst", 100, "client burst to the apiserver")
	fs.DurationVar(&f.syncPeriod, "sync-period", 10*time.Hour, "how often every Task is reconciled even without changes")
	fs.IntVar(&f.reconciler.MaxConcurrentReconciles, "max-concurrent-reconciles", reconciler.DefaultMaxConcurrentReconciles, "Tasks reconciled in parallel")
	fs.DurationVar(&f.reconciler.RateLimiterBaseDelay, "rate-limiter-base-delay", reconciler.DefaultRateLimiterBaseDelay, "first retry delay of a failing reconcile (per item, exponential)")
	fs.DurationVar(&f.reconciler.RateLimiterMaxDelay, "rate-limiter-max-delay", reconciler.DefaultRateLimiterMaxDelay, "longest retry delay of a failing reconcile")
	fs.StringVar(&f.reconciler.ShellImage, "shell-image", reconciler.DefaultShellImage, "image that runs shell Tasks without an image of their own")
	fs.StringVar(&f.reconciler.RunnerImage, "runner-image", reconciler.DefaultRunnerImage, "this operator's image, which runs HTTP Tasks")
	fs.StringVar(&f.certManagement, "cert-management", "self", "webhook certificates: self (created, rotated and injected by the operator) or external (cert-manager)")
	fs.StringVar(&f.webhook.Host, "webhook-host", "", "address the webhook server binds to")
	fs.IntVar(&f.webhook.Port, "webhook-port", f.webhook.Port, "webhook server port")
	fs.StringVar(&f.webhook.CertDir, "webhook-cert-dir", f.webhook.CertDir, "directory of tls.crt and tls.key")
	fs.StringVar(&f.webhook.Namespace, "webhook-namespace", envOr("POD_NAMESPACE", f.webhook.Namespace), "namespace of the webhook Service and certificate Secret")
	fs.StringVar(&f.webhook.SecretName, "webhook-secret", f.webhook.SecretName, "Secret holding the webhook CA and serving certificate")
	fs.StringVar(&f.webhook.ServiceName, "webhook-service", f.webhook.ServiceName, "Service in front of the webhook server")
	fs.StringVar(&f.webhook.LocalURL, "webhook-local-url", "", "run outside the cluster: the apiserver reaches the webhooks at this https URL (e.g. https://localhost:9443)")
	fs.StringVar(&f.webhook.MutatingConfigName, "mutating-webhook-configuration", f.webhook.MutatingConfigName, "name of the MutatingWebhookConfiguration")
	fs.StringVar(&f.webhook.ValidatingConfigName, "validating-webhook-configuration", f.webhook.ValidatingConfigName, "name of the ValidatingWebhookConfiguration")
	fs.DurationVar(&f.webhook.CertValidity, "cert-validity", f.webhook.CertValidity, "lifetime of a serving certificate")
	fs.DurationVar(&f.webhook.CertLookahead, "cert-lookahead", f.webhook.CertLookahead, "renew a certificate this long before it expires")
	fs.DurationVar(&f.webhook.CertCheckInterval, "cert-check-interval", f.webhook.CertCheckInterval, "how often certificates are checked for renewal")
	fs.BoolVar(&f.installCRD, "install-crd", false, "apply the embedded Task CRD before starting (local runs)")
	f.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch f.certManagement {
	case "self":
		f.webhook.SelfManagedCerts = true
	case "external":
		f.webhook.SelfManagedCerts = false
	default:
		return nil, fmt.Errorf("-cert-management=%q: want self or external", f.certManagement)
	}
	f.webhook.LeaderElection = f.leaderElect
	return f, nil
}

func runManager(args []string) int {
	f, err := parseManagerFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&f.zap)))
	if err := startManager(ctrl.SetupSignalHandler(), f); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		return 1
	}
	return 0
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

func startManager(ctx context.Context, f *managerFlags) error {
	scheme, err := newScheme()
	if err != nil {
		return fmt.Errorf("build scheme: %w", err)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(f.qps), f.burst
	if err := prepare(ctx, cfg, scheme, f); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, managerOptions(f, scheme))
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := webhook.Setup(mgr, f.webhook, certificate); err != nil {
		return err
	}
	if err := reconciler.SetupWithManager(mgr, f.reconciler); err != nil {
		return fmt.Errorf("set up task controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	ctrl.Log.Info("starting manager", "webhookPort", f.webhook.Port, "leaderElection", f.leaderElect)
	return mgr.Start(ctx)
}

// certificate is shared by the webhook server (which serves it) and the webhook setup (which
// loads it from the rotator's Secret).
var certificate = &webhook.Certificate{}

func managerOptions(f *managerFlags, scheme *runtime.Scheme) ctrl.Options {
	metrics := metricsserver.Options{BindAddress: f.metricsAddr, SecureServing: f.metricsSecure}
	if f.metricsSecure {
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
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
		LeaderElection:                f.leaderElect,
		LeaderElectionID:              f.leaderElectID,
		LeaderElectionNamespace:       f.leaderElectNS,
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhook.Server(f.webhook, certificate),
		Cache:                         cacheOpts,
	}
}

// prepare does what must happen before the manager starts: installing the CRD and pointing
// the webhooks at this process when it runs outside the cluster, and creating the Secret the
// certificate rotator fills.
func prepare(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, f *managerFlags) error {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	if f.installCRD {
		if err := installCRD(ctx, c); err != nil {
			return err
		}
	}
	if err := webhook.EnsureCertSecret(ctx, c, f.webhook); err != nil {
		return err
	}
	if f.webhook.LocalURL == "" {
		return nil
	}
	return webhook.PointAtLocalServer(ctx, c, f.webhook)
}

// setKubeconfig hands --kubeconfig to controller-runtime's loader, which reads $KUBECONFIG.
func setKubeconfig(path string) error { return os.Setenv("KUBECONFIG", path) }

func envOr(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}
