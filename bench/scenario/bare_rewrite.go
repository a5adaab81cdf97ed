package scenario

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"example.com/task-operator/internal/testenv"
)

// The baseline migrate.Run is judged against: a bare client rewriting every object.

// resourceIn is a resource at its storage version in one namespace, or all of them for "".
type resourceIn func(namespace string) dynamic.ResourceInterface

func tasksAtV1(up *testenv.Upgrade) resourceIn {
	return func(ns string) dynamic.ResourceInterface { return up.Tasks("v1", ns) }
}

// bareRewrite is the baseline a migration is judged against: what any client does to rewrite
// every object at the storage version, with no checkpoint, progress or trim. It LISTs pages of
// pageSize and PUTs each object back unchanged with workers in flight, reading an object again
// after a conflict. change, when not nil, changes each object before it is written.
func bareRewrite(ctx context.Context, res resourceIn, pageSize int64, workers int, change func(*unstructured.Unstructured)) (int, error) {
	items := make(chan unstructured.Unstructured, workers)
	var (
		mu        sync.Mutex
		rewritten int
		errs      []error
		wg        sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for obj := range items {
				err := putBack(ctx, res, &obj, change)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					rewritten++
				}
				mu.Unlock()
			}
		})
	}
	listErr := listPages(ctx, res, pageSize, items)
	close(items)
	wg.Wait()
	return rewritten, errors.Join(append(errs, listErr)...)
}

func listPages(ctx context.Context, res resourceIn, pageSize int64, items chan<- unstructured.Unstructured) error {
	cont := ""
	for {
		page, err := res(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: pageSize, Continue: cont})
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		for _, item := range page.Items {
			items <- item
		}
		if cont = page.GetContinue(); cont == "" {
			return nil
		}
	}
}

func putBack(ctx context.Context, res resourceIn, obj *unstructured.Unstructured, change func(*unstructured.Unstructured)) error {
	objects := res(obj.GetNamespace())
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			fresh, err := objects.Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			obj = fresh
		}
		first = false
		if change != nil {
			change(obj)
		}
		_, err := objects.Update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rewrite %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
