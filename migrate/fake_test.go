package migrate

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	taskv1 "example.com/task-operator/apis/v1"
)

// The fakes below model just enough of the apiserver for the unit tests: paginated LISTs with
// continue tokens that pin a revision and expire on compaction, optimistic concurrency on
// Update, the encoding version of each stored object, and a CRD with a status subresource.

var taskGR = taskv1.GroupResource

type fakeObject struct {
	obj       *unstructured.Unstructured
	storedAt  string
	createdRV int64
}

type fakeTasks struct {
	mu      sync.Mutex
	rv      int64
	objects map[string]*fakeObject // "namespace/name"
	// compactedRV expires continue tokens of lists below it.
	compactedRV int64
	// offerInconsistent makes expired tokens come back with a continuation token.
	offerInconsistent bool

	lists, updates, gets int
	// beforeList runs before each List is answered, with the lock released; its error is
	// returned instead.
	beforeList func(call int, opts metav1.ListOptions) error
	// beforeUpdate runs before each Update is applied, with the lock released; its error is
	// returned instead.
	beforeUpdate func(key string, obj *unstructured.Unstructured) error
}

func newFakeTasks(namespaces []string, perNamespace int, storedAt string) *fakeTasks {
	f := &fakeTasks{objects: map[string]*fakeObject{}}
	for _, ns := range namespaces {
		for i := range perNamespace {
			f.create(ns, fmt.Sprintf("task-%04d", i), storedAt)
		}
	}
	return f
}

func (f *fakeTasks) create(ns, name, storedAt string) {
	f.rv++
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": taskv1.GroupVersion.String(),
		"kind":       "Task",
		"metadata":   map[string]any{"namespace": ns, "name": name, "resourceVersion": strconv.FormatInt(f.rv, 10)},
		"spec":       map[string]any{"parallelism": int64(1)},
	}}
	f.objects[ns+"/"+name] = &fakeObject{obj: u, storedAt: storedAt, createdRV: f.rv}
}

func (f *fakeTasks) sortedKeys(ns string) []string {
	var keys []string
	for k := range f.objects {
		if ns == "" || strings.HasPrefix(k, ns+"/") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// Continue tokens are "<listRV>|<last key>"; listRV -1 continues at the latest revision.
func (f *fakeTasks) List(ctx context.Context, ns string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	f.mu.Lock()
	f.lists++
	call := f.lists
	hook := f.beforeList
	f.mu.Unlock()
	if hook != nil {
		if err := hook(call, opts); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	listRV, after := f.rv, ""
	if opts.Continue != "" {
		rvText, key, ok := strings.Cut(opts.Continue, "|")
		rv, err := strconv.ParseInt(rvText, 10, 64)
		if !ok || err != nil {
			return nil, apierrors.NewBadRequest("bad continue token")
		}
		if rv != -1 && rv < f.compactedRV {
			expired := apierrors.NewResourceExpired("The provided continue parameter is too old")
			if f.offerInconsistent {
				expired.ErrStatus.Continue = "-1|" + key
			}
			return nil, expired
		}
		if rv != -1 {
			listRV = rv
		}
		after = key
	}
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": taskv1.GroupVersion.String(), "kind": taskv1.Kind + "List"}}
	keys := f.sortedKeys(ns)
	var visible []string
	for _, k := range keys {
		if k > after && f.objects[k].createdRV <= listRV {
			visible = append(visible, k)
		}
	}
	n := len(visible)
	if opts.Limit > 0 && int64(n) > opts.Limit {
		n = int(opts.Limit)
	}
	for _, k := range visible[:n] {
		list.Items = append(list.Items, *f.objects[k].obj.DeepCopy())
	}
	if n < len(visible) {
		list.SetContinue(strconv.FormatInt(listRV, 10) + "|" + visible[n-1])
		rest := int64(len(visible) - n)
		list.SetRemainingItemCount(&rest)
	}
	list.SetResourceVersion(strconv.FormatInt(listRV, 10))
	return list, nil
}

func (f *fakeTasks) Get(_ context.Context, ns, name string) (*unstructured.Unstructured, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	o, ok := f.objects[ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(taskGR, name)
	}
	return o.obj.DeepCopy(), nil
}

func (f *fakeTasks) Update(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	key := obj.GetNamespace() + "/" + obj.GetName()
	f.mu.Lock()
	f.updates++
	hook := f.beforeUpdate
	f.mu.Unlock()
	if hook != nil {
		if err := hook(key, obj); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writeLocked(key, obj)
}

func (f *fakeTasks) writeLocked(key string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	o, ok := f.objects[key]
	if !ok {
		return nil, apierrors.NewNotFound(taskGR, obj.GetName())
	}
	if obj.GetResourceVersion() != o.obj.GetResourceVersion() {
		return nil, apierrors.NewConflict(taskGR, obj.GetName(), fmt.Errorf("the object has been modified"))
	}
	f.rv++
	stored := obj.DeepCopy()
	stored.SetResourceVersion(strconv.FormatInt(f.rv, 10))
	o.obj, o.storedAt = stored, "v1"
	return stored.DeepCopy(), nil
}

// userWrite changes a Task's spec the way another client would: at the current revision.
func (f *fakeTasks) userWrite(key, field string, value any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.objects[key]
	changed := o.obj.DeepCopy()
	_ = unstructured.SetNestedField(changed.Object, value, "spec", field)
	if _, err := f.writeLocked(key, changed); err != nil {
		panic(err)
	}
}

func (f *fakeTasks) delete(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.objects, key)
}

func (f *fakeTasks) storedAt() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, o := range f.objects {
		out[o.storedAt]++
	}
	return out
}

type fakeCRDs struct {
	mu  sync.Mutex
	crd *apiextv1.CustomResourceDefinition
	// afterGet runs after each Get, with the lock released.
	afterGet     func(call int)
	gets         int
	statusWrites int
}

func newFakeCRD(storage string, storedVersions ...string) *fakeCRDs {
	crd := &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: DefaultCRDName, UID: "crd-uid-1", Generation: 2, ResourceVersion: "10"},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: taskv1.Group,
			Names: apiextv1.CustomResourceDefinitionNames{Plural: taskv1.Resource, Kind: taskv1.Kind},
			Scope: apiextv1.NamespaceScoped,
		},
		Status: apiextv1.CustomResourceDefinitionStatus{StoredVersions: storedVersions},
	}
	for _, v := range []string{"v1alpha1", "v1beta1", "v1"} {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextv1.CustomResourceDefinitionVersion{Name: v, Served: true, Storage: v == storage})
	}
	return &fakeCRDs{crd: crd}
}

func (f *fakeCRDs) Get(_ context.Context, name string, _ metav1.GetOptions) (*apiextv1.CustomResourceDefinition, error) {
	f.mu.Lock()
	f.gets++
	call := f.gets
	var out *apiextv1.CustomResourceDefinition
	if name == f.crd.Name {
		out = f.crd.DeepCopy()
	}
	hook := f.afterGet
	f.mu.Unlock()
	if hook != nil {
		hook(call)
	}
	if out == nil {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, name)
	}
	return out, nil
}

func (f *fakeCRDs) UpdateStatus(ctx context.Context, crd *apiextv1.CustomResourceDefinition, _ metav1.UpdateOptions) (*apiextv1.CustomResourceDefinition, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if crd.ResourceVersion != f.crd.ResourceVersion {
		return nil, apierrors.NewConflict(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, crd.Name, fmt.Errorf("modified"))
	}
	f.statusWrites++
	f.crd.Status.StoredVersions = slices.Clone(crd.Status.StoredVersions)
	f.bumpLocked(false)
	return f.crd.DeepCopy(), nil
}

// bumpLocked records a write; a spec change also raises the generation.
func (f *fakeCRDs) bumpLocked(spec bool) {
	rv, _ := strconv.Atoi(f.crd.ResourceVersion)
	f.crd.ResourceVersion = strconv.Itoa(rv + 1)
	if spec {
		f.crd.Generation++
	}
}

func (f *fakeCRDs) changeSpec() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bumpLocked(true)
}

func (f *fakeCRDs) storedVersions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.crd.Status.StoredVersions)
}

func runFake(ctx context.Context, crds *fakeCRDs, tasks *fakeTasks, opts Options) (Summary, error) {
	return run(ctx, crds, func(gvr schema.GroupVersionResource) taskStore {
		if gvr != taskv1.ResourceAt("v1") {
			panic("unexpected resource " + gvr.String())
		}
		return tasks
	}, opts)
}
