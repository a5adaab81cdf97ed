package migrate

import (
	"context"
	"fmt"
	"slices"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// trim sets storedVersions to [v1] if the CRD is still the one the run started on: same UID,
// same generation (no spec change, so no other storage version was ever in effect), v1 storage.
// The UpdateStatus carries the resourceVersion of that check, so a change in between conflicts.
func (m *migration) trim(ctx context.Context, generation int64, uid types.UID) (after []string, trimmed bool, err error) {
	err = retry.RetryOnConflict(conflictRetry, func() error {
		crd, err := m.crds.Get(ctx, m.opts.CRDName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("migrate: re-read CRD %s: %w", m.opts.CRDName, err)
		}
		after = slices.Clone(crd.Status.StoredVersions)
		if why := changedSince(crd, generation, uid); why != "" {
			m.note("storedVersions NOT trimmed: %s during the run; objects may have been written at another version, run the migration again", why)
			return fmt.Errorf("migrate: %w: %s; storedVersions left at %v", ErrCRDChanged, why, after)
		}
		if slices.Equal(after, []string{TargetVersion}) {
			m.note("storedVersions already was [%s]", TargetVersion)
			return nil
		}
		crd.Status.StoredVersions = []string{TargetVersion}
		updated, err := m.crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{FieldManager: FieldManager})
		if err != nil {
			return fmt.Errorf("migrate: set storedVersions of CRD %s: %w", m.opts.CRDName, err) // a conflict is retried
		}
		after, trimmed = slices.Clone(updated.Status.StoredVersions), true
		return nil
	})
	return after, trimmed, err
}

// changedSince says how crd is no longer the CRD the run started on, or "" if it still is.
func changedSince(crd *apiextv1.CustomResourceDefinition, generation int64, uid types.UID) string {
	switch storage := storageVersion(crd); {
	case crd.UID != uid:
		return "the CRD was deleted and created again"
	case storage != TargetVersion:
		return fmt.Sprintf("the storage version changed to %q", storage)
	case crd.Generation != generation:
		return fmt.Sprintf("its generation changed from %d to %d", generation, crd.Generation)
	}
	return ""
}

func storageVersion(crd *apiextv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

func served(crd *apiextv1.CustomResourceDefinition, version string) bool {
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			return v.Served
		}
	}
	return false
}
