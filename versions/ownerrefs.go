package versions

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const maxConflictRetries = 5

// rewriteOwnerRefs points every dependent's ownerReferences to a kind of group at another
// version than to to the same owner at to: one merge patch per dependent carrying the
// resourceVersion it was read at, so that a concurrent change of the dependent conflicts and
// is read again rather than overwritten. It is resumable by construction: a run that stops
// leaves every dependent either rewritten or untouched, and the next scan finds only the
// latter. Patches are paced at opts.QPS.
func (c *clients) rewriteOwnerRefs(ctx context.Context, opts Options, group, kind string, deps []Dependent, to string) (int, error) {
	limiter := rate.NewLimiter(rate.Limit(opts.QPS), 1)
	apiVersion := group + "/" + to
	done := 0
	for i, d := range deps {
		if err := limiter.Wait(ctx); err != nil {
			return done, err
		}
		changed, err := c.rewriteOne(ctx, d, group, kind, apiVersion)
		if err != nil {
			return done, fmt.Errorf("rewrite the ownerReferences of %s (%d of %d done): %w", d, done, len(deps), err)
		}
		if changed {
			done++
		}
		if (i+1)%100 == 0 {
			fmt.Fprintf(opts.Out, "ownerReferences: %d of %d dependents rewritten\n", done, len(deps))
		}
	}
	fmt.Fprintf(opts.Out, "ownerReferences: %d dependents rewritten to %s\n", done, apiVersion)
	return done, nil
}

func (c *clients) rewriteOne(ctx context.Context, d Dependent, group, kind, apiVersion string) (bool, error) {
	res := c.meta.Resource(d.Resource).Namespace(d.Namespace)
	for attempt := 0; ; attempt++ {
		obj, err := res.Get(ctx, d.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil // deleted meanwhile: nothing left to rewrite
		}
		if err != nil {
			return false, err
		}
		refs, changed := rewrittenRefs(obj.OwnerReferences, group, kind, apiVersion)
		if !changed {
			return false, nil
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": obj.ResourceVersion, "ownerReferences": refs,
		}})
		if err != nil {
			return false, err
		}
		_, err = res.Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsConflict(err) && attempt < maxConflictRetries:
			continue
		case apierrors.IsNotFound(err):
			return false, nil
		default:
			return false, err
		}
	}
}

// rewrittenRefs returns refs with every reference to kind in group at another version moved to
// apiVersion; the owner's uid, name and flags stay as they are.
func rewrittenRefs(refs []metav1.OwnerReference, group, kind, apiVersion string) ([]metav1.OwnerReference, bool) {
	out := make([]metav1.OwnerReference, 0, len(refs))
	changed := false
	for _, ref := range refs {
		if ref.Kind == kind && ref.APIVersion != apiVersion && gvGroup(ref.APIVersion) == group {
			ref.APIVersion = apiVersion
			changed = true
		}
		// A dependent that named the owner at both versions names it once: the apiserver
		// keeps references that differ only in their flags, and warns on every write.
		if i := slices.IndexFunc(out, func(o metav1.OwnerReference) bool {
			return o.UID == ref.UID && o.APIVersion == ref.APIVersion && o.Kind == ref.Kind
		}); i >= 0 {
			out[i].Controller = orTrue(out[i].Controller, ref.Controller)
			out[i].BlockOwnerDeletion = orTrue(out[i].BlockOwnerDeletion, ref.BlockOwnerDeletion)
			continue
		}
		out = append(out, ref)
	}
	return out, changed
}

// orTrue is a pointer to true when either a or b points to true, else a.
func orTrue(a, b *bool) *bool {
	if b != nil && *b {
		return b
	}
	return a
}

func gvGroup(apiVersion string) string {
	for i := len(apiVersion) - 1; i >= 0; i-- {
		if apiVersion[i] == '/' {
			return apiVersion[:i]
		}
	}
	return ""
}
