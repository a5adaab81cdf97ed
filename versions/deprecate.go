package versions

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// DefaultWarning is the deprecation warning of version when Options.Warning is empty.
func DefaultWarning(group, kind, version, replacement string) string {
	return fmt.Sprintf("%s/%s %s is deprecated and will stop being served; use %s/%s (task-operator versions status shows who still uses %s)",
		group, version, kind, group, replacement, version)
}

// Deprecate marks version deprecated on the live CRD, with opts.Warning (DefaultWarning if
// empty), which the apiserver sends in a Warning header on every request at it (kubectl
// prints it). The source of truth is the kubebuilder marker on apis/<version>
// (+kubebuilder:deprecatedversion:warning=...): a re-apply of an install built without it
// un-deprecates the version, since spec.versions is an atomic list.
func Deprecate(ctx context.Context, cfg *rest.Config, version string, opts Options) error {
	opts = opts.withDefaults()
	c, err := newClients(cfg)
	if err != nil {
		return err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := c.getCRD(ctx, opts.CRDName)
		if err != nil {
			return err
		}
		v, err := versionOf(crd, version)
		if err != nil {
			return err
		}
		if v.Storage {
			return fmt.Errorf("%s is the storage version of CRD %s: it cannot be deprecated", version, crd.Name)
		}
		warning := opts.Warning
		if warning == "" {
			warning = DefaultWarning(crd.Spec.Group, crd.Spec.Names.Kind, version, storageVersion(crd))
		}
		if v.Deprecated && ptr.Deref(v.DeprecationWarning, "") == warning {
			fmt.Fprintf(opts.Out, "%s is deprecated already with that warning\n", version)
			return nil
		}
		if opts.DryRun {
			fmt.Fprintf(opts.Out, "plan: set deprecated: true, deprecationWarning %q on %s of CRD %s\n", warning, version, crd.Name)
			return nil
		}
		v.Deprecated, v.DeprecationWarning = true, &warning
		if _, err := c.crds.Update(ctx, crd, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			return err
		}
		fmt.Fprintf(opts.Out, "%s deprecated: requests at it get the warning %q\n", version, warning)
		return nil
	})
	if err != nil {
		return fmt.Errorf("deprecate %s: %w", version, err)
	}
	return nil
}

// probeTask is a minimal valid suspended Task at version, for dry-run creates. Its name is
// generated: a user's Task of a fixed name would make the create fail for a reason that says
// nothing of the conversion.
func probeTask(group, version, kind string) map[string]any {
	spec := map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}}, "suspend": true}
	if version == "v1alpha1" {
		spec = map[string]any{"type": "shell", "shell": "true"}
	}
	return map[string]any{
		"apiVersion": group + "/" + version, "kind": kind,
		"metadata": map[string]any{"generateName": "versions-conversion-probe-", "namespace": metav1.NamespaceDefault},
		"spec":     spec,
	}
}

func crdGVRFromReport(r *Report, version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: r.Group, Version: version, Resource: r.Resource}
}
