// Package e2e_test drives the operator the way a user does: a real control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, KWOK), the operator binary running
// with its webhooks on loopback exactly as `make run` starts it, and kubectl.
package e2e_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"example.com/task-operator/apis/install"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"example.com/task-operator/e2e/controlplane"
)

var (
	cluster  *controlplane.ControlPlane
	operator *operatorProcess
	kube     client.Client
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) (code int) {
	ctrllog.SetLogger(logr.Discard())
	ctx := context.Background()
	var err error
	cluster, err = controlplane.Start(ctx, controlplane.Options{Full: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() {
		if code != 0 {
			fmt.Fprintln(os.Stderr, cluster.TailLogs(40))
		}
		_ = cluster.Stop()
	}()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := install.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if kube, err = client.New(cluster.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: client:", err)
		return 1
	}
	operator, err = startOperator(ctx, cluster)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() {
		if code != 0 {
			fmt.Fprintln(os.Stderr, "--- operator log (tail) ---\n"+operator.tail(80))
		}
		operator.stop()
	}()
	return m.Run()
}
