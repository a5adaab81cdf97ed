package migrate

import (
	"context"
	"fmt"
	"slices"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	taskv1 "example.com/task-operator/apis/v1"
)

// svmPollInterval is how often RunStorageVersionMigration looks at the migration's status.
const svmPollInterval = 200 * time.Millisecond

// RunStorageVersionMigration migrates the Tasks with the apiserver's own machinery: it creates
// the StorageVersionMigration name (storagemigration.k8s.io/v1) for tasks.example.com and waits
// until kube-controller-manager's storage-version-migrator controller has rewritten every Task
// and trimmed the CRD's status.storedVersions to its storage version. It returns the time from
// creating the object to the trim.
//
// The controller requires kube-controller-manager's garbage collector (it migrates the objects
// of the garbage collector's cache); like Run it only trims storedVersions when the CRD's
// generation did not change during the migration, and RunStorageVersionMigration reports an
// error when it did not trim. Set a deadline on ctx: a controller that is not running leaves
// the migration pending forever.
func RunStorageVersionMigration(ctx context.Context, cfg *rest.Config, name string) (time.Duration, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, fmt.Errorf("storage version migration: %w", err)
	}
	ax, err := apiextclient.NewForConfig(cfg)
	if err != nil {
		return 0, fmt.Errorf("storage version migration: %w", err)
	}
	crdName := taskv1.CRDName
	crd, err := ax.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("storage version migration: read CRD %s: %w", crdName, err)
	}
	if storage := storageVersion(crd); storage != TargetVersion {
		return 0, fmt.Errorf("storage version migration: %w: CRD %s stores new objects at %q", ErrNotStorageVersion, crdName, storage)
	}

	start := time.Now()
	svms := kube.StoragemigrationV1().StorageVersionMigrations()
	_, err = svms.Create(ctx, &svmv1.StorageVersionMigration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource(taskv1.GroupResource)},
	}, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil {
		return 0, fmt.Errorf("storage version migration: create %s: %w", name, err)
	}

	// The migration is over when it succeeded (or failed) and the controller has cleared its
	// Running condition: it does that right after writing the CRD's storedVersions.
	var conds []metav1.Condition
	err = wait.PollUntilContextCancel(ctx, svmPollInterval, true, func(ctx context.Context) (bool, error) {
		svm, err := svms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("storage version migration: read %s: %w", name, err)
		}
		conds = svm.Status.Conditions
		if c := meta.FindStatusCondition(conds, string(svmv1.MigrationFailed)); c != nil && c.Status == metav1.ConditionTrue {
			return false, fmt.Errorf("storage version migration %s failed: %s: %s", name, c.Reason, c.Message)
		}
		return meta.IsStatusConditionTrue(conds, string(svmv1.MigrationSucceeded)) && !meta.IsStatusConditionTrue(conds, string(svmv1.MigrationRunning)), nil
	})
	if ctx.Err() != nil {
		return time.Since(start), fmt.Errorf("storage version migration %s: %w (conditions %s)", name, context.Cause(ctx), describeConditions(conds))
	}
	if err != nil {
		return time.Since(start), err
	}
	elapsed := time.Since(start)

	crd, err = ax.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		return elapsed, fmt.Errorf("storage version migration: re-read CRD %s: %w", crdName, err)
	}
	if want := []string{storageVersion(crd)}; !slices.Equal(crd.Status.StoredVersions, want) {
		msg := ""
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextv1.StorageMigrating {
				msg = ": " + c.Message
			}
		}
		return elapsed, fmt.Errorf("storage version migration %s succeeded but storedVersions is %v, not %v%s",
			name, crd.Status.StoredVersions, want, msg)
	}
	return elapsed, nil
}

func describeConditions(conds []metav1.Condition) string {
	if len(conds) == 0 {
		return "none yet"
	}
	s := ""
	for i, c := range conds {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Message)
	}
	return s
}
