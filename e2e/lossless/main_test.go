// Package lossless_test writes Tasks at the old versions through a real kube-apiserver in every
// way a client can, and checks what is stored at v1: the conversion webhook, the admission
// webhooks and the apiserver's own steps (strategies, managed fields) together.
//
// The operator runs as a process serving its webhooks, but never reconciles: the test holds the
// leader election Lease, so nothing but the test writes a Task and each stored object is
// exactly the result of the write under test.
package lossless_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

// leaseName is the operator's leader election Lease (its --leader-election-id default).
const leaseName = "task-operator.example.com"

var (
	cluster  *testenv.ControlPlane
	kube     client.Client
	dyn      dynamic.Interface
	operator *testenv.Operator
	suite    = testenv.Fixture{Name: "lossless suite", Start: startSuite}
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	testenv.Main(m, testenv.Options{})
}

// setUp brings the suite up on first use and returns a namespace of the test's own.
func setUp(tb testing.TB) string {
	tb.Helper()
	suite.Use(tb)
	return testenv.NewNamespace(tb, kube)
}

func startSuite(cp *testenv.ControlPlane) error {
	ctx := context.Background()
	cluster = cp
	var err error
	if kube, err = testenv.NewClient(cp.Config); err != nil {
		return err
	}
	if dyn, err = dynamic.NewForConfig(cp.Config); err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	if err := testenv.CreateNamespace(ctx, kube, testenv.OperatorNamespace); err != nil {
		return err
	}
	// The certificate rotator runs only on the leader: one operator leads long enough to issue
	// the certificate and inject the CA, then steps down and the test takes the Lease.
	bootstrap, err := testenv.StartOperator(ctx, testenv.OperatorOptions{Name: "bootstrap", Kubeconfig: cp.KubeconfigPath, LeaderElect: true})
	if err != nil {
		return err
	}
	if err := testenv.WaitWebhooks(ctx, cp.Config, 2*time.Minute); err != nil {
		return err
	}
	if err := bootstrap.Stop(15 * time.Second); err != nil {
		return fmt.Errorf("stop the bootstrap operator: %w", err)
	}
	if err := holdLease(ctx); err != nil {
		return err
	}
	operator, err = testenv.StartOperator(ctx, testenv.OperatorOptions{Name: "lossless", Kubeconfig: cp.KubeconfigPath, LeaderElect: true})
	if err != nil {
		return err
	}
	operator.StopAtExit(60)
	return testenv.WaitWebhooks(ctx, cp.Config, 2*time.Minute)
}

// holdLease takes the operator's leader election Lease for the whole run, so that its
// controller never starts: the webhooks, which every replica serves, are what is tested.
func holdLease(ctx context.Context) error {
	lease := &coordinationv1.Lease{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: testenv.OperatorNamespace, Name: leaseName}, lease); err != nil {
		return fmt.Errorf("read the leader election lease: %w", err)
	}
	now := metav1.NewMicroTime(time.Now())
	lease.Spec = coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To("lossless-tests"),
		LeaseDurationSeconds: ptr.To[int32](24 * 3600),
		AcquireTime:          &now,
		RenewTime:            &now,
	}
	if err := kube.Update(ctx, lease); err != nil {
		return fmt.Errorf("hold the leader election lease: %w", err)
	}
	return nil
}

// tasks is the Task resource at version in namespace ns.
func tasks(version, ns string) dynamic.ResourceInterface {
	return dyn.Resource(taskv1.ResourceAt(version)).Namespace(ns)
}
