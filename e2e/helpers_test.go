package e2e_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func get(t *testing.T, ns, name string, obj client.Object) {
	t.Helper()
	if err := kube.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatalf("get %s/%s as %T: %v", ns, name, obj, err)
	}
}

func metaFor(key client.ObjectKey) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}
}
