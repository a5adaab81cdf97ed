package versions

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// RetiredAnnotation on the CRD lists, comma-separated, the versions Retire stopped serving.
// The operator's own install (--install-crd) keeps them unserved when it applies the CRD
// again; Serve removes a version from it.
const RetiredAnnotation = "versions.example.com/retired"

// setServed sets served on version with the CRD's resourceVersion rv ("" reads it now), and
// records the version in RetiredAnnotation (or drops it from there when serving).
func (c *clients) setServed(ctx context.Context, crdName, version string, served bool, rv string) error {
	crd, err := c.getCRD(ctx, crdName)
	if err != nil {
		return err
	}
	if rv != "" && crd.ResourceVersion != rv {
		return fmt.Errorf("%w (resourceVersion %s, checked at %s): run again", ErrCRDChanged, crd.ResourceVersion, rv)
	}
	v, err := versionOf(crd, version)
	if err != nil {
		return err
	}
	v.Served = served
	retired := retiredVersions(crd)
	retired = slices.DeleteFunc(retired, func(s string) bool { return s == version })
	if !served {
		retired = append(retired, version)
	}
	if crd.Annotations == nil {
		crd.Annotations = map[string]string{}
	}
	if len(retired) == 0 {
		delete(crd.Annotations, RetiredAnnotation)
	} else {
		crd.Annotations[RetiredAnnotation] = strings.Join(retired, ",")
	}
	_, err = c.crds.Update(ctx, crd, metav1.UpdateOptions{FieldManager: FieldManager})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("%w: %v; run again", ErrCRDChanged, err)
	}
	if err != nil {
		return fmt.Errorf("set served: %t on %s of CRD %s: %w", served, version, crdName, err)
	}
	return nil
}

// RetiredVersions lists the versions RetiredAnnotation names on crd.
func RetiredVersions(crd *apix.CustomResourceDefinition) []string { return retiredVersions(crd) }

func retiredVersions(crd *apix.CustomResourceDefinition) []string {
	var out []string
	for _, s := range strings.Split(crd.Annotations[RetiredAnnotation], ",") {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// waitDiscovery waits until discovery lists groupVersion (listed) or answers 404 for it.
func (c *clients) waitDiscovery(ctx context.Context, groupVersion string, listed bool) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultDiscoveryTimeout)
	defer cancel()
	for {
		_, err := c.disc.ServerResourcesForGroupVersion(groupVersion)
		switch {
		case listed && err == nil, !listed && apierrors.IsNotFound(err):
			return nil
		case err != nil && !apierrors.IsNotFound(err):
			return fmt.Errorf("discovery of %s: %w", groupVersion, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("discovery still %s %s: %w", yesNo(listed, "lacks", "lists"), groupVersion, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Serve serves version again (the rollback of Retire): served: true, the version dropped from
// RetiredAnnotation, and it waits until discovery lists it. Nothing was lost while it was not
// served: the objects are stored at the storage version and convert to it as before.
func Serve(ctx context.Context, cfg *rest.Config, version string, opts Options) error {
	opts = opts.withDefaults()
	c, err := newClients(cfg)
	if err != nil {
		return err
	}
	crd, err := c.getCRD(ctx, opts.CRDName)
	if err != nil {
		return err
	}
	v, err := versionOf(crd, version)
	if err != nil {
		return err
	}
	if v.Served && !slices.Contains(retiredVersions(crd), version) {
		fmt.Fprintf(opts.Out, "%s is served already\n", version)
		return nil
	}
	if opts.DryRun {
		fmt.Fprintf(opts.Out, "plan: set served: true on %s in CRD %s and wait until discovery lists %s/%s\n", version, crd.Name, crd.Spec.Group, version)
		return nil
	}
	if err := c.setServed(ctx, opts.CRDName, version, true, crd.ResourceVersion); err != nil {
		return err
	}
	if err := c.waitDiscovery(ctx, crd.Spec.Group+"/"+version, true); err != nil {
		return err
	}
	if err := c.waitReadable(ctx, crdGVR(crd, version)); err != nil {
		return err
	}
	fmt.Fprintf(opts.Out, "%s served again: discovery lists %s/%s and Tasks read at it\n", version, crd.Spec.Group, version)
	return nil
}

// waitReadable waits until a LIST at gvr succeeds: after a change of the CRD the apiserver
// answers "storage is (re)initializing" until the version's watch cache has listed every
// object again, each one converted.
func (c *clients) waitReadable(ctx context.Context, gvr schema.GroupVersionResource) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultDiscoveryTimeout)
	defer cancel()
	for {
		_, err := c.meta.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still not readable: %w", resourceName(gvr), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
