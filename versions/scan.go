package versions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// Dependent is an object whose ownerReferences name an owner at an old version.
type Dependent struct {
	Resource        schema.GroupVersionResource
	Namespace, Name string
	// Owner is the referenced owner's name (its namespace is the dependent's).
	Owner string
}

func (d Dependent) String() string {
	res := d.Resource.Resource
	if d.Resource.Group != "" {
		res += "." + d.Resource.Group
	}
	if d.Namespace == "" {
		return fmt.Sprintf("%s %s (owner %s)", res, d.Name, d.Owner)
	}
	return fmt.Sprintf("%s %s/%s (owner %s)", res, d.Namespace, d.Name, d.Owner)
}

// ManagedFieldsAt is a Task with managedFields entries recorded at an old version.
type ManagedFieldsAt struct {
	Namespace, Name string
	Managers        []string
}

func (m ManagedFieldsAt) String() string {
	return fmt.Sprintf("%s/%s (managers %s)", m.Namespace, m.Name, strings.Join(m.Managers, ", "))
}

// scan is what one pass over the cluster found.
type scan struct {
	// tasks is the number of Tasks listed.
	tasks int
	// fields are the Tasks with managedFields entries at each version, by version.
	fields map[string][]ManagedFieldsAt
	// owners are the dependents naming an owner of the CRD's kind at each version, by version.
	owners map[string][]Dependent
	// resources and objects count what the ownerReference scan listed.
	resources, objects int
	// skipped names every resource not scanned, with why.
	skipped []string
}

// scanTasks lists every Task's metadata (at the storage version: managedFields carry their own
// apiVersion whatever the version read at) and records entries not at the storage version.
func (c *clients) scanTasks(ctx context.Context, s *scan, gvr schema.GroupVersionResource, pageSize int64) error {
	group := gvr.Group + "/"
	opts := metav1.ListOptions{Limit: pageSize}
	for {
		list, err := c.meta.Resource(gvr).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("list the metadata of %s: %w", gvr.Resource, err)
		}
		for _, obj := range list.Items {
			s.tasks++
			byVersion := map[string][]string{}
			for _, e := range obj.ManagedFields {
				v, ok := strings.CutPrefix(e.APIVersion, group)
				if !ok || v == gvr.Version {
					continue
				}
				byVersion[v] = append(byVersion[v], e.Manager)
			}
			for v, managers := range byVersion {
				slices.Sort(managers) // one manager may hold an entry for the object and one for its status
				managers = slices.Compact(managers)
				s.fields[v] = append(s.fields[v], ManagedFieldsAt{Namespace: obj.Namespace, Name: obj.Name, Managers: managers})
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return nil
		}
	}
}

// scanOwners lists the metadata of every listable resource (the preferred version of each
// group: ownerReferences are the same at every version) in every namespace, and records the
// dependents whose ownerReferences name an object of kind in group at a version other than
// keep. A resource the caller may not list, or that does not answer, is skipped and named.
func (c *clients) scanOwners(ctx context.Context, s *scan, group, kind, keep string, pageSize int64) error {
	lists, err := c.disc.ServerPreferredResources()
	if err != nil {
		var failed *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &failed) {
			return fmt.Errorf("discovery: %w", err)
		}
		for gv, gerr := range failed.Groups {
			s.skipped = append(s.skipped, fmt.Sprintf("%s (every resource): discovery failed: %v", gv, gerr))
		}
	}
	prefix := group + "/"
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			gvr := gv.WithResource(r.Name)
			n, err := c.scanResource(ctx, s, gvr, prefix, kind, keep, pageSize)
			switch {
			case err == nil:
				s.resources++
				s.objects += n
			case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
				s.skipped = append(s.skipped, fmt.Sprintf("%s: forbidden (list in all namespaces)", resourceName(gvr)))
			case ctx.Err() != nil:
				return ctx.Err()
			default:
				s.skipped = append(s.skipped, fmt.Sprintf("%s: %v", resourceName(gvr), err))
			}
		}
	}
	slices.Sort(s.skipped)
	return nil
}

func (c *clients) scanResource(ctx context.Context, s *scan, gvr schema.GroupVersionResource, prefix, kind, keep string, pageSize int64) (int, error) {
	opts := metav1.ListOptions{Limit: pageSize}
	n := 0
	for {
		list, err := c.meta.Resource(gvr).List(ctx, opts)
		if err != nil {
			return n, err
		}
		for _, obj := range list.Items {
			n++
			for _, ref := range obj.OwnerReferences {
				v, ok := strings.CutPrefix(ref.APIVersion, prefix)
				if !ok || ref.Kind != kind || v == keep {
					continue
				}
				s.owners[v] = append(s.owners[v], Dependent{Resource: gvr, Namespace: obj.Namespace, Name: obj.Name, Owner: ref.Name})
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return n, nil
		}
	}
}

func resourceName(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Version + " " + gvr.Resource
	}
	return gvr.Group + "/" + gvr.Version + " " + gvr.Resource
}
