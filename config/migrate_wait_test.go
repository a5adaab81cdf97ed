package config_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"example.com/task-operator/internal/testenv"
)

// TestMigrateFailsAsSoonAsItsJobFails: the README's upgrade runs `make migrate`, which "waits for
// the Job and prints its log". When the migration fails for good (its Job reaches Failed: say a
// Task cannot be rewritten, or the ServiceAccount is forbidden), `kubectl wait
// --for=condition=Complete` never returns: the command sits silent for MIGRATE_TIMEOUT (30m) and
// only then prints the log. It must fail as soon as the Job has failed. The control plane here
// runs no Job controller: the test marks the Job Failed as the controller would.
func TestMigrateFailsAsSoonAsItsJobFails(t *testing.T) {
	cp := testenv.StartT(t, testenv.Options{})
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(mctx, "make", "--no-print-directory", "migrate", "IMG=registry.example.com/task-operator:v1.1.0", "MIGRATE_TIMEOUT=3m")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.KubeconfigPath)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// make and the kubectl it runs form one process group, killed together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// The Job is applied; then it fails for good, as the Job controller records it.
	var job *batchv1.Job
	testenv.Eventually(t, 2*time.Minute, "the migration Job", func(ctx context.Context) (bool, error) {
		job, err = cs.BatchV1().Jobs(namespace).Get(ctx, "task-operator-migrate", metav1.GetOptions{})
		return err == nil, err
	})
	now := metav1.Now()
	job.Status = batchv1.JobStatus{
		StartTime: &now,
		Failed:    7,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now, LastProbeTime: now},
		},
	}
	if _, err := cs.BatchV1().Jobs(namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("mark the Job failed: %v", err)
	}
	marked := time.Now()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("make migrate succeeded although the migration Job failed:\n%s", out.String())
		}
		t.Logf("make migrate failed %s after the Job did (as it should): %v\n%s", time.Since(marked).Round(time.Second), err, out.String())
	case <-time.After(60 * time.Second):
		cancel()
		<-done
		t.Errorf("make migrate still waits a minute after its Job failed (it would wait MIGRATE_TIMEOUT, 30m by default):\n%s", out.String())
	}
}
