package versions_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/versions"
)

// TestREADMERetiringAVersionRunsAsWritten runs the blocks of the README's "Retiring a version"
// as written, on a cluster of the previous release upgraded by the operator (and
// kube-controller-manager restarted, as the runbook says): Tasks stored at v1alpha1 and a
// ConfigMap owned through a v1alpha1 ownerReference.
func TestREADMERetiringAVersionRunsAsWritten(t *testing.T) {
	blocks := testenv.READMEBlocks(t, "retire-report", "retire-deprecate", "retire", "retire-rollback")
	env := cluster(t)
	ctx := t.Context()
	const ns = "versions-readme"
	keys := env.previousRelease(ctx, t, ns, 6)
	env.startOperator(ctx, t, "readme")
	env.waitStoredAtV1(ctx, t)
	env.restartControllerManager(t)
	env.waitGarbageCollector(ctx, t, ns)
	env.awaitReport(t, "no watch left at v1alpha1", func(r *versions.Report) error {
		if w := r.Version("v1alpha1").LiveWatches; w != 0 {
			return fmt.Errorf("%v watches open at v1alpha1", w)
		}
		return nil
	})
	owner, err := env.upgrade.Tasks("v1alpha1", ns).Get(ctx, strings.TrimPrefix(keys[0], ns+"/"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.kube.CoreV1().ConfigMaps(ns).Create(ctx, ownedConfigMap(ns, "readme-dependent", "example.com/v1alpha1", owner), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	out := testenv.RunREADME(t, env.cp, "retire-report", blocks["retire-report"], 5*time.Minute)
	for _, want := range []string{"v1alpha1: served, deprecated, in storedVersions", "readme-dependent"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	testenv.RunREADME(t, env.cp, "retire-deprecate", blocks["retire-deprecate"], time.Minute)
	// The garbage collector GETs the dependent's owner at v1alpha1 when it sees the
	// dependent, backing off while it has not observed the owner: the retire block would
	// rightly refuse while it does. Wait for a quiet stretch of three --observe windows.
	env.awaitQuiet(t, "v1alpha1", 3*versions.DefaultObserve)
	out = testenv.RunREADME(t, env.cp, "retire", blocks["retire"], 3*time.Minute)
	if !strings.Contains(out, "v1alpha1 is no longer served") || served(ctx, t, env.cfg, "v1alpha1") {
		t.Errorf("v1alpha1 still served after the retire block")
	}
	cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "readme-dependent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.OwnerReferences[0].APIVersion; got != "example.com/v1" {
		t.Errorf("the dependent's owner is %s, want example.com/v1", got)
	}
	testenv.RunREADME(t, env.cp, "retire-rollback", blocks["retire-rollback"], time.Minute)
	if !served(ctx, t, env.cfg, "v1alpha1") {
		t.Errorf("v1alpha1 not served after the rollback block")
	}
	env.deleteTasks(ctx, t, ns)
}
