package migrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// Retries of one Task's rewrite: conflicts are read again and rewritten (the Task changed since
// the page was listed); errors worth retrying are tried again after a growing delay. A 429's
// Retry-After is honoured by client-go itself.
var (
	conflictRetry  = wait.Backoff{Steps: maxConflictRetries, Duration: 10 * time.Millisecond, Factor: 1, Jitter: 0.1}
	transientRetry = wait.Backoff{Steps: maxTransientRetries, Duration: 200 * time.Millisecond, Factor: 2, Cap: 5 * time.Second}
)

// rewrite writes obj back unchanged so that the apiserver stores it at the storage version, with
// its managedFields entries recorded at old versions moved to v1 (see movedManagedFields).
// The Update carries the resourceVersion obj was read at: if the Task changed since, it is read
// again and the fresh copy is written instead, so a concurrent change is never undone.
func (m *migration) rewrite(ctx context.Context, obj *unstructured.Unstructured) {
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}.String()
	attempts := 0
	var fields managedFieldsOutcome
	err := retry.OnError(conflictRetry, apierrors.IsConflict, func() error {
		if attempts++; attempts > 1 {
			m.c.conflicts.Add(1)
			fresh, err := m.get(ctx, obj.GetNamespace(), obj.GetName())
			if err != nil {
				return fmt.Errorf("read after conflict: %w", err)
			}
			obj = fresh
		}
		var send *unstructured.Unstructured
		send, fields = withManagedFieldsMoved(obj)
		return m.update(ctx, send)
	})
	switch {
	case err == nil:
		m.c.rewritten.Add(1)
		m.recordManagedFields(key, fields)
	case ctx.Err() != nil:
		// cancelled: the page is not checkpointed, a rerun repeats it
	case apierrors.IsNotFound(err):
		m.c.skipped.Add(1)
	case apierrors.IsConflict(err):
		m.c.conflicts.Add(1)
		m.fail(key, fmt.Errorf("still conflicting after %d attempts: %w", attempts, err))
	default:
		m.fail(key, err)
	}
}

// update writes obj once, within the QPS limit, retrying errors worth retrying.
func (m *migration) update(ctx context.Context, obj *unstructured.Unstructured) error {
	return retry.OnError(transientRetry, retriable, func() error {
		if m.limiter != nil {
			if err := m.limiter.Wait(ctx); err != nil {
				return err
			}
		}
		_, err := m.store.Update(ctx, obj)
		return err
	})
}

// get reads one Task, retrying errors worth retrying.
func (m *migration) get(ctx context.Context, namespace, name string) (obj *unstructured.Unstructured, err error) {
	err = retry.OnError(transientRetry, retriable, func() error {
		obj, err = m.store.Get(ctx, namespace, name)
		return err
	})
	return obj, err
}

// retriable reports whether err is worth retrying: the server is busy or a connection broke.
func retriable(err error) bool {
	if _, ok := apierrors.SuggestsClientDelay(err); ok {
		return true
	}
	switch {
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err):
		return true
	case utilnet.IsConnectionReset(err), utilnet.IsConnectionRefused(err), utilnet.IsProbableEOF(err), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}

// managedFieldsOutcome is what became of an object's managedFields.
type managedFieldsOutcome struct {
	// moved: entries at old versions were moved to v1.
	moved bool
	// kept says why entries at old versions were left as they were; nil if none were.
	kept error
}

// withManagedFieldsMoved returns obj as it is to be written: with its managedFields moved to
// v1, or as it is when none are at an old version or some cannot be moved (obj itself is never
// modified).
func withManagedFieldsMoved(obj *unstructured.Unstructured) (*unstructured.Unstructured, managedFieldsOutcome) {
	moved, ok, err := movedManagedFields(obj.GetManagedFields())
	switch {
	case err != nil:
		return obj, managedFieldsOutcome{kept: err}
	case !ok:
		return obj, managedFieldsOutcome{}
	}
	out := obj.DeepCopy()
	out.SetManagedFields(moved)
	return out, managedFieldsOutcome{moved: true}
}

// recordManagedFields counts what became of a rewritten object's managedFields.
func (m *migration) recordManagedFields(key string, o managedFieldsOutcome) {
	switch {
	case o.moved:
		m.c.fieldsMoved.Add(1)
	case o.kept != nil:
		n := m.c.fieldsKept.Add(1)
		m.mu.Lock()
		defer m.mu.Unlock()
		switch {
		case n <= maxFailureSamples:
			m.fieldsKept = append(m.fieldsKept, key+": "+o.kept.Error())
			m.rep.printf("%s: the managedFields of %s stay as they were, at their old versions: %v", m.rep.name, key, o.kept)
		case n == maxFailureSamples+1:
			m.rep.printf("%s: more Tasks keep managedFields at old versions; only the first %d are shown", m.rep.name, maxFailureSamples)
		}
	}
}

func (m *migration) fail(key string, err error) {
	m.c.failed.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	switch n := m.c.failed.Load(); {
	case n <= maxFailureSamples:
		m.failures = append(m.failures, key+": "+err.Error())
		m.rep.printf("%s: rewrite of %s failed: %v", m.rep.name, key, err)
	case n == maxFailureSamples+1:
		m.rep.printf("%s: more rewrites failed; only the first %d failures are shown", m.rep.name, maxFailureSamples)
	}
}

func (m *migration) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	m.mu.Lock()
	m.notes = append(m.notes, msg)
	m.mu.Unlock()
	m.rep.printf("%s: %s", m.rep.name, msg)
}
