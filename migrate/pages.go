package migrate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rewriteAll walks the pages from cp's continue token and rewrites every Task, saving the
// checkpoint after every page.
func (m *migration) rewriteAll(ctx context.Context, cp *checkpoint) error {
	token := cp.Continue
	firstPage := true
	restarts := 0
	// The checkpoint only advances past pages without failures, so that a rerun retries them.
	clean := true
	for !cp.ListDone {
		list, err := m.store.List(ctx, m.opts.Namespace, metav1.ListOptions{Limit: m.opts.PageSize, Continue: token})
		if err != nil {
			if ctx.Err() != nil {
				return m.interrupted(ctx, cp)
			}
			if token == "" || (!apierrors.IsResourceExpired(err) && !apierrors.IsGone(err)) {
				return fmt.Errorf("migrate: list Tasks: %w", err)
			}
			// The token pins the resourceVersion of the first page; once etcd has compacted it
			// the list cannot continue consistently. The apiserver then offers a token that
			// continues from the same key at the latest revision: nothing before the key needs
			// another rewrite, and whatever was created or changed since is stored at the
			// storage version already, so continuing from there misses nothing.
			if next := inconsistentContinue(err); next != "" {
				m.note("the continue token expired (%v); continuing from the same position with the token the apiserver offered", shortErr(err))
				token = next
				continue
			}
			restarts++
			if restarts > maxListRestarts {
				return fmt.Errorf("migrate: the continue token expired %d times: %w", restarts, err)
			}
			m.note("the continue token expired (%v); restarting the listing from the beginning (rewrites are idempotent)", shortErr(err))
			token, firstPage = "", true
			continue
		}
		items := list.Items
		if firstPage {
			firstPage = false
			total := m.c.done() + int64(len(items))
			if rest := list.GetRemainingItemCount(); rest != nil {
				total += *rest
				m.c.total.Store(total)
			} else if list.GetContinue() == "" {
				m.c.total.Store(total)
			}
		}
		m.c.seen.Add(int64(len(items)))
		if m.opts.DryRun {
			m.c.rewritten.Add(int64(len(items)))
			for i := range items {
				_, fields := withManagedFieldsMoved(&items[i])
				m.recordManagedFields(items[i].GetNamespace()+"/"+items[i].GetName(), fields)
			}
		} else {
			failedBefore := m.c.failed.Load()
			m.rewritePage(ctx, items)
			if ctx.Err() != nil {
				return m.interrupted(ctx, cp)
			}
			if m.c.failed.Load() > failedBefore {
				clean = false
			}
		}
		next := list.GetContinue()
		if clean && !m.opts.DryRun && m.opts.CheckpointFile != "" {
			cp.Pages++
			cp.Continue, cp.ListDone = next, next == ""
			cp.Total, cp.Rewritten = int(m.c.seen.Load()), int(m.c.rewritten.Load())
			cp.Skipped, cp.Conflicts = int(m.c.skipped.Load()), int(m.c.conflicts.Load())
			cp.ManagedFieldsMoved, cp.ManagedFieldsKept = int(m.c.fieldsMoved.Load()), int(m.c.fieldsKept.Load())
			if err := cp.save(m.opts.CheckpointFile); err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
		}
		if next == "" {
			break
		}
		token = next
	}
	if m.c.total.Load() != m.c.done() {
		m.c.total.Store(m.c.done())
	}
	m.rep.printf("%s", m.rep.line(time.Now()))
	return nil
}

func (m *migration) interrupted(ctx context.Context, cp *checkpoint) error {
	if m.opts.CheckpointFile != "" && !m.opts.DryRun {
		return fmt.Errorf("migrate: interrupted after %d Tasks; run again to resume from checkpoint %s: %w",
			m.c.done(), m.opts.CheckpointFile, context.Cause(ctx))
	}
	return fmt.Errorf("migrate: interrupted after %d Tasks: %w", m.c.done(), context.Cause(ctx))
}

// rewritePage rewrites the items with opts.Concurrency workers and returns when all are done
// or ctx is cancelled.
func (m *migration) rewritePage(ctx context.Context, items []unstructured.Unstructured) {
	jobs := make(chan *unstructured.Unstructured)
	var wg sync.WaitGroup
	for range min(m.opts.Concurrency, len(items)) {
		wg.Go(func() {
			for obj := range jobs {
				m.rewrite(ctx, obj)
			}
		})
	}
feed:
	for i := range items {
		select {
		case jobs <- &items[i]:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
}

// inconsistentContinue returns the continue token a 410 ResourceExpired answer to a paginated
// LIST offers for continuing at the latest revision, or "".
func inconsistentContinue(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Continue
	}
	return ""
}

func shortErr(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		s := status.Status()
		return fmt.Sprintf("%d %s", s.Code, s.Reason)
	}
	return err.Error()
}
