package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apixclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/bench/harness"
	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/webhook"
)

// The twin CRD of the floor probe (call_floor.go) and its rename-only conversion webhook.
const (
	floorGroup    = "bench.example.com"
	floorResource = "floors"
	floorPath     = "/convert-rename-only"
)

var floorCRDName = floorResource + "." + floorGroup

func floorGVR(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: floorGroup, Version: version, Resource: floorResource}
}

// floors is what the floor probes share: clients without rate limits and the rename-only
// webhook, served beside /convert.
type floors struct {
	crds apixclient.CustomResourceDefinitionInterface
	dyn  dynamic.Interface
	url  string
	ca   []byte
}

// newFloors serves the rename-only webhook on up's conversion server: once per server.
func newFloors(e *harness.Env, up *testenv.Upgrade) (*floors, error) {
	cfg := rest.CopyConfig(e.Cfg)
	cfg.QPS, cfg.Burst = -1, 0
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	crds, err := apixclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	url := up.Conversion().Handle(floorPath, http.HandlerFunc(webhook.RenameOnly))
	return &floors{crds: crds.CustomResourceDefinitions(), dyn: dyn, url: url, ca: up.Conversion().CABundle}, nil
}

func (f *floors) in(version string) resourceIn {
	return func(ns string) dynamic.ResourceInterface { return f.dyn.Resource(floorGVR(version)).Namespace(ns) }
}

func (f *floors) renameOnly() *apix.CustomResourceConversion {
	return testenv.WebhookConversion(f.url, f.ca)
}

// point makes url (signed by ca) the conversion webhook of crd.
func (f *floors) point(ctx context.Context, crd, url string, ca []byte) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := f.crds.Get(ctx, crd, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := got.Spec.Conversion; c != nil && c.Webhook != nil && c.Webhook.ClientConfig != nil &&
			c.Webhook.ClientConfig.URL != nil && *c.Webhook.ClientConfig.URL == url && bytes.Equal(c.Webhook.ClientConfig.CABundle, ca) {
			return nil
		}
		got.Spec.Conversion = testenv.WebhookConversion(url, ca)
		_, err = f.crds.Update(ctx, got, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("point %s at %s: %w", crd, url, err)
	}
	return nil
}

// waitServed waits until t's server converts t's reads (a CRD change reaches the apiserver's
// handlers asynchronously) and the apiserver stops calling either webhook otherwise (the
// rebuilt watch caches list their objects), so that nothing else runs while t is timed.
func waitServed(ctx context.Context, e *harness.Env, t floorTarget) error {
	err := testenv.Poll(ctx, time.Minute, 200*time.Millisecond, "the apiserver to call "+t.url, func(ctx context.Context) (bool, error) {
		t.server.HandlerTimesByPath()
		if err := t.read(ctx, t.objects[0].GetName()); err != nil {
			return false, err
		}
		served, _ := t.server.HandlerTimesByPath()
		return len(served[urlPath(t.url)]) > 0, nil
	})
	if err != nil {
		return err
	}
	for _, crd := range []string{taskv1.CRDName, floorCRDName} {
		if _, err := settleConversions(ctx, e, crd); err != nil {
			return err
		}
	}
	return nil
}

// twins returns the k Tasks named name(0) … name(k-1) as stored at v1 and a twin of each: the
// same name, labels, spec and status in a Floor, created at v1.
func (f *floors) twins(ctx context.Context, up *testenv.Upgrade, k int, name func(int) string) (tasks, twins []*unstructured.Unstructured, err error) {
	for i := range k {
		task, err := up.Tasks("v1", callsNS).Get(ctx, name(i), metav1.GetOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("floor twins: %w", err)
		}
		created, err := f.twin(ctx, task)
		if err != nil {
			return nil, nil, fmt.Errorf("floor twins: %w", err)
		}
		tasks, twins = append(tasks, task), append(twins, created)
	}
	return tasks, twins, nil
}

// twin creates task's Floor as the Task was made: created with its labels and spec by one
// manager, then given its status by another, so that the twin carries as many managedFields
// entries, and as many bytes, as the Task the apiserver sends to /convert.
func (f *floors) twin(ctx context.Context, task *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	twin := floorObject("v1", callsNS, task.GetName())
	twin.SetLabels(task.GetLabels())
	twin.Object["spec"] = task.Object["spec"]
	floors := f.in("v1")(callsNS)
	if _, err := floors.Create(ctx, twin, metav1.CreateOptions{FieldManager: "bench"}); err != nil {
		return nil, err
	}
	status, err := json.Marshal(map[string]any{"status": task.Object["status"]})
	if err != nil {
		return nil, err
	}
	return floors.Patch(ctx, task.GetName(), types.MergePatchType, status, metav1.PatchOptions{FieldManager: "bench-status"})
}

func floorObject(version, ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": floorGroup + "/" + version, "kind": "Floor",
		"metadata": map[string]any{"name": name, "namespace": ns},
	}}
}

// install replaces any Floor CRD with one stored at storage and converted by conv, and waits
// until it serves its storage version. With the Task's schemas the apiserver does for a Floor
// what it does for a Task around each conversion call (pruning and defaulting the answer):
// the floor probe's twins and the same-calls floor need that to be fair floors. The other
// rewrite ceilings' Floors cannot have them: a rename-only "conversion" of a v1alpha1 body is
// not a valid v1 Task.
func (f *floors) install(ctx context.Context, storage string, conv *apix.CustomResourceConversion, schema floorSchema) error {
	if err := f.uninstall(ctx); err != nil {
		return err
	}
	schemas, err := f.schemas(ctx, schema)
	if err != nil {
		return err
	}
	var versions []apix.CustomResourceDefinitionVersion
	// The same served versions as Task, so the apiserver keeps the same watch caches.
	for _, v := range []string{"v1alpha1", "v1beta1", "v1"} {
		versions = append(versions, apix.CustomResourceDefinitionVersion{Name: v, Served: true, Storage: v == storage, Schema: schemas[v]})
	}
	crd := &apix.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: floorCRDName},
		Spec: apix.CustomResourceDefinitionSpec{
			Group:      floorGroup,
			Names:      apix.CustomResourceDefinitionNames{Plural: floorResource, Singular: "floor", Kind: "Floor", ListKind: "FloorList"},
			Scope:      apix.NamespaceScoped,
			Versions:   versions,
			Conversion: conv,
		},
	}
	if _, err := f.crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("floor CRD: %w", err)
	}
	return testenv.Poll(ctx, time.Minute, 100*time.Millisecond, "Floors to be served", func(ctx context.Context) (bool, error) {
		_, err := f.in(storage)(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, err
	})
}

// floorSchema says which schemas a Floor CRD's versions have.
type floorSchema int

const (
	anyFields floorSchema = iota // keeps any field, checks none
	// taskSchemas are the Task CRD's, version by version: the installed one's, or when none is
	// installed (the migration's ceilings run without one) this release's, from its manifest.
	taskSchemas
)

// schemas returns each served version's schema for a Floor CRD.
func (f *floors) schemas(ctx context.Context, schema floorSchema) (map[string]*apix.CustomResourceValidation, error) {
	out := map[string]*apix.CustomResourceValidation{}
	if schema == anyFields {
		anything := &apix.CustomResourceValidation{OpenAPIV3Schema: &apix.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}}
		for _, v := range []string{"v1alpha1", "v1beta1", "v1"} {
			out[v] = anything
		}
		return out, nil
	}
	task, err := f.taskCRD(ctx)
	if err != nil {
		return nil, fmt.Errorf("the Task CRD's schemas for the floor CRD: %w", err)
	}
	for _, v := range task.Spec.Versions {
		out[v.Name] = v.Schema
	}
	for _, v := range []string{"v1alpha1", "v1beta1", "v1"} {
		if out[v] == nil {
			return nil, fmt.Errorf("the Task CRD has no schema for %s", v)
		}
	}
	return out, nil
}

// taskCRD is the installed Task CRD, or this release's from its manifest when none is.
func (f *floors) taskCRD(ctx context.Context) (*apix.CustomResourceDefinition, error) {
	crd, err := f.crds.Get(ctx, taskv1.CRDName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return testenv.CurrentCRD()
	}
	return crd, err
}

// uninstall deletes the Floor CRD, and so every Floor, and waits until it is gone.
func (f *floors) uninstall(ctx context.Context) error {
	if err := f.crds.Delete(ctx, floorCRDName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the floor CRD: %w", err)
	}
	return testenv.Poll(ctx, 10*time.Minute, 0, "the floor CRD to be deleted", func(ctx context.Context) (bool, error) {
		_, err := f.crds.Get(ctx, floorCRDName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}
