package migrate

import (
	"context"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// crdStore is the part of the CRD client Run uses.
type crdStore interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*apiextv1.CustomResourceDefinition, error)
	UpdateStatus(ctx context.Context, crd *apiextv1.CustomResourceDefinition, opts metav1.UpdateOptions) (*apiextv1.CustomResourceDefinition, error)
}

// taskStore reads and writes Tasks at one version.
type taskStore interface {
	List(ctx context.Context, namespace string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error)
	Get(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error)
	Update(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
}

type dynamicStore struct {
	res dynamic.NamespaceableResourceInterface
}

func (d dynamicStore) List(ctx context.Context, namespace string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	if namespace == "" {
		return d.res.List(ctx, opts)
	}
	return d.res.Namespace(namespace).List(ctx, opts)
}

func (d dynamicStore) Get(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error) {
	return d.res.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (d dynamicStore) Update(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return d.res.Namespace(obj.GetNamespace()).Update(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager})
}
