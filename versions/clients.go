package versions

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apixclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// clients are what the commands talk to the apiserver with.
type clients struct {
	cfg  *rest.Config
	crds apixclient.CustomResourceDefinitionInterface
	kube kubernetes.Interface
	meta metadata.Interface
	dyn  dynamic.Interface
	disc discovery.DiscoveryInterface
}

// newClients copies cfg with this package's user agent; an unset client-side rate limit is
// switched off (the commands pace their writes themselves, Options.QPS).
func newClients(cfg *rest.Config) (*clients, error) {
	if cfg == nil {
		return nil, errors.New("versions: no rest config")
	}
	c := rest.CopyConfig(cfg)
	if c.RateLimiter == nil && c.QPS == 0 {
		c.QPS = -1
	}
	if c.UserAgent == "" {
		c.UserAgent = FieldManager
	}
	out := &clients{cfg: c}
	ax, err := apixclient.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("versions: %w", err)
	}
	out.crds = ax.CustomResourceDefinitions()
	if out.kube, err = kubernetes.NewForConfig(c); err != nil {
		return nil, fmt.Errorf("versions: %w", err)
	}
	if out.meta, err = metadata.NewForConfig(c); err != nil {
		return nil, fmt.Errorf("versions: %w", err)
	}
	if out.dyn, err = dynamic.NewForConfig(c); err != nil {
		return nil, fmt.Errorf("versions: %w", err)
	}
	out.disc = out.kube.Discovery()
	return out, nil
}

func (c *clients) getCRD(ctx context.Context, name string) (*apix.CustomResourceDefinition, error) {
	crd, err := c.crds.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read CRD %s: %w", name, err)
	}
	return crd, nil
}

// versionOf returns the CRD's entry for version, or an error naming the versions it has.
func versionOf(crd *apix.CustomResourceDefinition, version string) (*apix.CustomResourceDefinitionVersion, error) {
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == version {
			return &crd.Spec.Versions[i], nil
		}
	}
	names := make([]string, 0, len(crd.Spec.Versions))
	for _, v := range crd.Spec.Versions {
		names = append(names, v.Name)
	}
	return nil, fmt.Errorf("CRD %s has no version %q (it has %v)", crd.Name, version, names)
}

func storageVersion(crd *apix.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

func inStoredVersions(crd *apix.CustomResourceDefinition, version string) bool {
	return slices.Contains(crd.Status.StoredVersions, version)
}

func conversionStrategy(crd *apix.CustomResourceDefinition) string {
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy == "" {
		return string(apix.NoneConverter)
	}
	return string(crd.Spec.Conversion.Strategy)
}
