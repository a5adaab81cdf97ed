package reconciler_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/config"
	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/reconciler"
)

// TestUninstall is issue #14 item 13 and the order of the README's "Uninstall" (make undeploy:
// every Task deleted while the operator still runs, then the operator and the CRD), on a control
// plane of its own (it deletes the CRD). e2e/install runs `make undeploy` itself; this test
// checks what that order relies on, with Tasks in every state:
//
//  1. kubectl delete tasks.example.com --all -A --wait, while the operator runs;
//  2. the operator goes, then the CRD.
//
// Nothing is left holding a finalizer, the CRD and the namespaces go. Then the other order, for
// finished Tasks: the operator goes first, and the Tasks and the CRD still delete.
func TestUninstall(t *testing.T) {
	t.Parallel()
	cp := testenv.StartT(t, testenv.Options{Full: true})
	u := &uninstallEnv{t: t, cfg: cp.Config}
	u.connect()

	// Tasks in every state, in two namespaces, with the operator running.
	stopOperator := u.startOperator()
	nsA, nsB := u.namespace(), u.namespace()
	hangs := map[string]string{outcome: hang}
	fails := map[string]string{outcome: fail}
	u.create(nsA, "done", nil, nil)
	u.create(nsA, "running", hangs, nil)
	u.create(nsB, "retrying", fails, func(t *v1.Task) {
		t.Spec.Retry.MaxRetries = 3
		t.Spec.Retry.Backoff.Initial = &metav1.Duration{Duration: time.Hour}
		t.Spec.Retry.Backoff.Max = &metav1.Duration{Duration: time.Hour}
	})
	u.create(nsB, "cron-idle", nil, func(t *v1.Task) { t.Spec.Schedule = &v1.Schedule{Cron: "@every 1h"} })
	u.create(nsB, "cron-running", hangs, func(t *v1.Task) {
		t.Spec.Schedule = &v1.Schedule{Cron: "@every 2s", ConcurrencyPolicy: v1.ForbidConcurrent}
	})
	u.waitPhases(map[string]v1.Phase{
		nsA + "/done": v1.PhaseSucceeded, nsA + "/running": v1.PhaseRunning, nsB + "/retrying": v1.PhaseRetrying,
		nsB + "/cron-idle": v1.PhaseScheduled, nsB + "/cron-running": v1.PhaseRunning,
	})

	// 1. kubectl delete tasks --all --all-namespaces: it returns once they are gone.
	u.deleteAllTasks()
	// 2. kubectl delete -k config/default: the operator, then the CRD.
	stopOperator()
	u.deleteCRD()
	u.noFinalizersLeft()
	u.deleteNamespaces(nsA, nsB)

	// The other order, for finished Tasks: the operator is gone before its Tasks and the CRD.
	u.installCRD()
	stopOperator = u.startOperator()
	nsC := u.namespace()
	u.create(nsC, "done", nil, nil)
	u.create(nsC, "cron-idle", nil, func(t *v1.Task) { t.Spec.Schedule = &v1.Schedule{Cron: "@every 1h"} })
	u.waitPhases(map[string]v1.Phase{nsC + "/done": v1.PhaseSucceeded, nsC + "/cron-idle": v1.PhaseScheduled})
	testenv.Eventually(u.t, waitTimeout, "finished Tasks to hold no finalizer", func(context.Context) (bool, error) {
		var tasks v1.TaskList
		if err := u.c.List(context.Background(), &tasks); err != nil {
			return false, err
		}
		for _, task := range tasks.Items {
			if len(task.Finalizers) > 0 {
				return false, fmt.Errorf("%s holds %v", task.Name, task.Finalizers)
			}
		}
		return true, nil
	})
	stopOperator()
	u.deleteCRD()
	u.noFinalizersLeft()
	u.deleteNamespaces(nsC)
}

// uninstallEnv drives a whole control plane the way a cluster admin would.
type uninstallEnv struct {
	t   *testing.T
	cfg *rest.Config
	c   client.Client
}

func (u *uninstallEnv) connect() {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, batchv1.AddToScheme, corev1.AddToScheme, apix.AddToScheme} {
		if err := add(s); err != nil {
			u.t.Fatal(err)
		}
	}
	c, err := client.New(u.cfg, client.Options{Scheme: s})
	if err != nil {
		u.t.Fatal(err)
	}
	u.c = c
}

// startOperator runs the controller for every namespace and returns how to stop it.
func (u *uninstallEnv) startOperator() func() {
	u.t.Helper()
	mgr, err := ctrl.NewManager(u.cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  reconciler.CacheOptions(),
		NewCache:               reconciler.NewCache,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		Logger:                 ctrl.Log.WithName("uninstall"),
	})
	if err != nil {
		u.t.Fatalf("new manager: %v", err)
	}
	if err := reconciler.SetupWithManager(mgr, reconciler.Options{}); err != nil {
		u.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			u.t.Errorf("manager: %v", err)
		}
	}
	u.t.Cleanup(stop)
	return stop
}

func (u *uninstallEnv) namespace() string {
	u.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "uninstall-"}}
	if err := u.c.Create(context.Background(), ns); err != nil {
		u.t.Fatal(err)
	}
	return ns.Name
}

func (u *uninstallEnv) create(ns, name string, labels map[string]string, mut func(*v1.Task)) {
	u.t.Helper()
	task := &v1.Task{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: v1.TaskSpec{
			Runner: v1.Runner{Type: v1.RunnerShell, Shell: &v1.ShellRunner{Script: "true"}},
			Retry:  &v1.RetryPolicy{Backoff: v1.DefaultBackoff()},
		},
	}
	if mut != nil {
		mut(task)
	}
	if err := u.c.Create(context.Background(), task); err != nil {
		u.t.Fatalf("create %s/%s: %v", ns, name, err)
	}
}

func (u *uninstallEnv) waitPhases(want map[string]v1.Phase) {
	u.t.Helper()
	testenv.Eventually(u.t, waitTimeout, "the Tasks' phases", func(context.Context) (bool, error) {
		var tasks v1.TaskList
		if err := u.c.List(context.Background(), &tasks); err != nil {
			return false, err
		}
		got := map[string]v1.Phase{}
		for _, task := range tasks.Items {
			got[task.Namespace+"/"+task.Name] = task.Status.Phase
		}
		for key, phase := range want {
			if got[key] != phase {
				return false, fmt.Errorf("%v", got)
			}
		}
		return true, nil
	})
}

// deleteAllTasks is `kubectl delete tasks --all --all-namespaces`: delete each, wait for none.
func (u *uninstallEnv) deleteAllTasks() {
	u.t.Helper()
	var tasks v1.TaskList
	if err := u.c.List(context.Background(), &tasks); err != nil {
		u.t.Fatal(err)
	}
	for i := range tasks.Items {
		if err := u.c.Delete(context.Background(), &tasks.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			u.t.Fatal(err)
		}
	}
	testenv.Eventually(u.t, waitTimeout, "every Task to be gone", func(context.Context) (bool, error) {
		var left v1.TaskList
		if err := u.c.List(context.Background(), &left); err != nil {
			return false, err
		}
		return len(left.Items) == 0, fmt.Errorf("%d Tasks left", len(left.Items))
	})
}

func (u *uninstallEnv) deleteCRD() {
	u.t.Helper()
	crd := &apix.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: v1.CRDName}}
	if err := u.c.Delete(context.Background(), crd); err != nil {
		u.t.Fatalf("delete CRD: %v", err)
	}
	testenv.Eventually(u.t, waitTimeout, "the CRD to be gone", func(context.Context) (bool, error) {
		err := u.c.Get(context.Background(), client.ObjectKeyFromObject(crd), crd)
		return apierrors.IsNotFound(err), fmt.Errorf("err %v, deletion %v, conditions %+v", err, crd.DeletionTimestamp, crd.Status.Conditions)
	})
}

func (u *uninstallEnv) installCRD() {
	u.t.Helper()
	crd := &apix.CustomResourceDefinition{}
	if err := yaml.Unmarshal(config.CRD, crd); err != nil {
		u.t.Fatal(err)
	}
	if err := u.c.Create(context.Background(), crd); err != nil {
		u.t.Fatalf("install CRD: %v", err)
	}
	testenv.Eventually(u.t, waitTimeout, "the CRD to be established", func(context.Context) (bool, error) {
		if err := u.c.Get(context.Background(), client.ObjectKeyFromObject(crd), crd); err != nil {
			return false, err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apix.Established && c.Status == apix.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("%+v", crd.Status.Conditions)
	})
	// Established comes before discovery lists the resource; a manager started in between cannot
	// map the Task kind.
	dc, err := discovery.NewDiscoveryClientForConfig(u.cfg)
	if err != nil {
		u.t.Fatal(err)
	}
	testenv.Eventually(u.t, waitTimeout, "discovery to list the Tasks", func(context.Context) (bool, error) {
		list, err := dc.ServerResourcesForGroupVersion(v1.GroupVersion.String())
		return err == nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == v1.Resource }), err
	})
	u.connect() // a fresh REST mapping for the Task kind
}

// noFinalizersLeft: no Job anywhere still holds the run-outcome finalizer.
func (u *uninstallEnv) noFinalizersLeft() {
	u.t.Helper()
	testenv.Eventually(u.t, waitTimeout, "no Job to hold the run-outcome finalizer", func(context.Context) (bool, error) {
		var jobs batchv1.JobList
		if err := u.c.List(context.Background(), &jobs); err != nil {
			return false, err
		}
		for _, job := range jobs.Items {
			if controllerutil.ContainsFinalizer(&job, v1.FinalizerRunOutcome) {
				return false, fmt.Errorf("%s/%s holds it", job.Namespace, job.Name)
			}
		}
		return true, nil
	})
}

func (u *uninstallEnv) deleteNamespaces(names ...string) {
	u.t.Helper()
	for _, name := range names {
		if err := u.c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			u.t.Fatal(err)
		}
	}
	testenv.Eventually(u.t, waitTimeout, "the namespaces to be gone", func(context.Context) (bool, error) {
		for _, name := range names {
			ns := &corev1.Namespace{}
			if err := u.c.Get(context.Background(), client.ObjectKey{Name: name}, ns); !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("%s: %v %v", name, ns.Status.Phase, ns.Status.Conditions)
			}
		}
		return true, nil
	})
}
