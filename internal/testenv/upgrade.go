package testenv

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apixclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/config"
)

// The Task API as the fixture addresses it.
const (
	// TaskEtcdPrefix is where the apiserver keeps Tasks in etcd: <prefix><namespace>/<name>.
	TaskEtcdPrefix = "/registry/" + taskv1.Group + "/" + taskv1.Resource + "/"
	// FixtureLabel marks the Tasks that V1alpha1Task makes.
	FixtureLabel = "testenv.example.com/fixture"
	// IndexLabel carries the i a fixture Task was made from.
	IndexLabel = "testenv.example.com/index"
)

// CurrentCRD is this release's Task CRD, as config/crd/bases has it and the operator embeds it.
func CurrentCRD() (*apix.CustomResourceDefinition, error) {
	crd := &apix.CustomResourceDefinition{}
	// Strict: a field this apiextensions version does not know would be lost silently.
	if err := yaml.UnmarshalStrict(config.CRD, crd); err != nil {
		return nil, fmt.Errorf("decode the embedded CRD: %w", err)
	}
	if crd.Name != taskv1.CRDName {
		return nil, fmt.Errorf("the embedded CRD is %s, want %s", crd.Name, taskv1.CRDName)
	}
	return crd, nil
}

// PreviousReleaseCRD is the CRD as the release before v1 had it: v1alpha1 only, served and
// stored, no conversion.
func PreviousReleaseCRD() (*apix.CustomResourceDefinition, error) {
	cur, err := CurrentCRD()
	if err != nil {
		return nil, err
	}
	crd := &apix.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: cur.Name}, Spec: *cur.Spec.DeepCopy()}
	crd.Spec.Versions = nil
	for _, v := range cur.Spec.Versions {
		if v.Name != "v1alpha1" {
			continue
		}
		v = *v.DeepCopy()
		v.Served, v.Storage, v.Deprecated, v.DeprecationWarning = true, true, false, nil
		crd.Spec.Versions = append(crd.Spec.Versions, v)
	}
	crd.Spec.Conversion = &apix.CustomResourceConversion{Strategy: apix.NoneConverter}
	return crd, nil
}

// V1alpha1Task is the i-th Task as a user of the previous release wrote it: shell and HTTP
// Tasks alternate, replicas and maxRetry vary with i. It carries FixtureLabel and IndexLabel.
func V1alpha1Task(ns, name string, i int) *unstructured.Unstructured {
	spec := map[string]any{"replicas": int64(1 + i%5), "maxRetry": int64(i % 4)}
	if i%2 == 0 {
		spec["type"], spec["shell"] = "shell", fmt.Sprintf("echo task %d && sleep %d", i, i%10)
	} else {
		spec["type"], spec["url"] = "http", fmt.Sprintf("https://hooks.example.com/task/%d", i)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       taskv1.Kind,
		"metadata": map[string]any{
			"namespace": ns,
			"name":      name,
			"labels":    map[string]any{FixtureLabel: "true", IndexLabel: strconv.Itoa(i)},
		},
		"spec": spec,
	}}
}

// V1alpha1Status is the status the previous release's operator wrote on the i-th Task.
func V1alpha1Status(name string, i int) map[string]any {
	states := []string{"Running", "Failed", "Succeeded"}
	return map[string]any{
		"state":          states[i%len(states)],
		"lastJobName":    name + "-run-1",
		"retryCount":     int64(i % 4),
		"lastError":      fmt.Sprintf("exit code %d", i%7),
		"lastUpdateTime": "2030-01-02T03:04:05Z",
	}
}

// Upgrade replays the upgrade from the previous release on a control plane: Tasks stored at
// v1alpha1 under PreviousReleaseCRD, then this release's CRD applied over it, with conversion
// served by a ConversionServer since no operator runs.
type Upgrade struct {
	cp      *ControlPlane
	crds    apixclient.CustomResourceDefinitionInterface
	dyn     dynamic.Interface
	current *apix.CustomResourceDefinition
	convert *ConversionServer
}

// NewUpgrade starts the conversion server; Close stops it.
func NewUpgrade(ctx context.Context, cp *ControlPlane) (*Upgrade, error) {
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = -1, 0 // fixtures of thousands of Tasks should not queue in the client
	ax, err := apixclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("upgrade fixture: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("upgrade fixture: %w", err)
	}
	current, err := CurrentCRD()
	if err != nil {
		return nil, err
	}
	convert, err := StartConversionServer(ctx, ConversionServerOptions{})
	if err != nil {
		return nil, err
	}
	return &Upgrade{cp: cp, crds: ax.CustomResourceDefinitions(), dyn: dyn, current: current, convert: convert}, nil
}

// Close stops the conversion server.
func (u *Upgrade) Close() error { return u.convert.Close() }

// Conversion is the server that converts Tasks while no operator runs.
func (u *Upgrade) Conversion() *ConversionServer { return u.convert }

// Tasks is the Task resource at version in namespace, through a client without rate limits.
func (u *Upgrade) Tasks(version, namespace string) dynamic.ResourceInterface {
	return u.dyn.Resource(taskv1.ResourceAt(version)).Namespace(namespace)
}

// DeleteCRD deletes the Task CRD, and with it every Task, and waits until it is gone. Tasks
// that still carry the operator's finalizer need a running operator meanwhile.
func (u *Upgrade) DeleteCRD(ctx context.Context, timeout time.Duration) error {
	err := u.crds.Delete(ctx, taskv1.CRDName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete CRD: %w", err)
	}
	return Poll(ctx, timeout, 0, "the Task CRD to be deleted", func(ctx context.Context) (bool, error) {
		_, err := u.crds.Get(ctx, taskv1.CRDName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}

// InstallPreviousRelease replaces the Task CRD, and so every Task, with PreviousReleaseCRD and
// waits until v1alpha1 is served.
func (u *Upgrade) InstallPreviousRelease(ctx context.Context) error {
	if err := u.DeleteCRD(ctx, 5*time.Minute); err != nil {
		return err
	}
	crd, err := PreviousReleaseCRD()
	if err != nil {
		return err
	}
	if _, err := u.crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the previous release's CRD: %w", err)
	}
	return Poll(ctx, time.Minute, 50*time.Millisecond, "v1alpha1 to be served", func(ctx context.Context) (bool, error) {
		crd, err := u.crds.Get(ctx, taskv1.CRDName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if !established(crd) {
			return false, errors.New("CRD not Established")
		}
		_, err = u.Tasks("v1alpha1", metav1.NamespaceDefault).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, err
	})
}

func established(crd *apix.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apix.Established {
			return c.Status == apix.ConditionTrue
		}
	}
	return false
}

// CreateV1alpha1Tasks creates n V1alpha1Tasks named task-<i> with workers concurrent clients,
// spread over namespaces in turn, and gives every third the V1alpha1Status the previous
// release's operator would have written. It returns their "namespace/name" keys, by i.
func (u *Upgrade) CreateV1alpha1Tasks(ctx context.Context, namespaces []string, n, workers int) ([]string, error) {
	keys := make([]string, n)
	for i := range n {
		keys[i] = fmt.Sprintf("%s/task-%05d", namespaces[i%len(namespaces)], i)
	}
	err := Parallel(ctx, n, workers, func(ctx context.Context, i int) error {
		ns, name, _ := strings.Cut(keys[i], "/")
		tasks := u.Tasks("v1alpha1", ns)
		created, err := tasks.Create(ctx, V1alpha1Task(ns, name, i), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create task %s: %w", keys[i], err)
		}
		if i%3 != 0 {
			return nil
		}
		created.Object["status"] = V1alpha1Status(name, i)
		if _, err := tasks.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("write the status of task %s: %w", keys[i], err)
		}
		return nil
	})
	return keys, err
}

// UpgradeCRD applies this release's versions over the previous release's CRD, with conversion
// by the in-process server, and waits until the apiserver stores new Tasks at v1.
func (u *Upgrade) UpgradeCRD(ctx context.Context) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := u.crds.Get(ctx, taskv1.CRDName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		crd.Spec.Versions = u.current.Spec.DeepCopy().Versions
		crd.Spec.Conversion = WebhookConversion(u.convert.URL, u.convert.CABundle)
		_, err = u.crds.Update(ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("upgrade CRD: %w", err)
	}
	return u.probeStorage(ctx)
}

// probeStorage waits until a new Task lands in etcd at v1.
func (u *Upgrade) probeStorage(ctx context.Context) error {
	ns := metav1.NamespaceDefault
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": taskv1.GroupVersion.String(), "kind": taskv1.Kind,
		"metadata": map[string]any{"namespace": ns, "name": "storage-probe"},
		"spec":     map[string]any{"runner": map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}}},
	}}
	return u.cp.WaitStoredAt(ctx, u.Tasks("v1", ns), probe, TaskEtcdPrefix)
}

// WaitStoredAt waits until probe, created through objects, lands in etcd (under prefix, then
// namespace/name) at probe's apiVersion, since the apiserver swaps a CRD's storage version
// asynchronously; then until the probe is deleted again.
func (cp *ControlPlane) WaitStoredAt(ctx context.Context, objects dynamic.ResourceInterface, probe *unstructured.Unstructured, prefix string) error {
	want, name := probe.GetAPIVersion(), probe.GetName()
	key := prefix + probe.GetNamespace() + "/" + name
	err := Poll(ctx, time.Minute, 50*time.Millisecond, "objects to be stored at "+want, func(ctx context.Context) (bool, error) {
		if _, err := objects.Create(ctx, probe.DeepCopy(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("%s not served yet: %w", want, err)
		}
		raw, err := cp.EtcdGet(ctx, key)
		if err != nil {
			return false, err
		}
		if err := objects.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		stored := StoredObject{Value: raw}.APIVersion()
		return stored == want, fmt.Errorf("the probe was stored at %q", stored)
	})
	if err != nil {
		return err
	}
	return Poll(ctx, time.Minute, 20*time.Millisecond, "the storage probe to be deleted", func(ctx context.Context) (bool, error) {
		_, err := cp.EtcdGet(ctx, key)
		return errors.Is(err, ErrKeyNotFound), err
	})
}

// WebhookConversion is conversion by the webhook at url, whose certificate ca signs.
func WebhookConversion(url string, ca []byte) *apix.CustomResourceConversion {
	return &apix.CustomResourceConversion{Strategy: apix.WebhookConverter, Webhook: &apix.WebhookConversion{
		ClientConfig:             &apix.WebhookClientConfig{URL: &url, CABundle: ca},
		ConversionReviewVersions: []string{"v1"},
	}}
}

// StoredTaskVersions reads every Task straight from etcd and returns the apiVersion each is
// encoded at, by "namespace/name".
func (u *Upgrade) StoredTaskVersions(ctx context.Context) (map[string]string, error) {
	objs, _, err := u.cp.StoredObjects(ctx, TaskEtcdPrefix)
	if err != nil {
		return nil, err
	}
	versions := make(map[string]string, len(objs))
	for _, o := range objs {
		v := o.APIVersion()
		if v == "" {
			return nil, fmt.Errorf("etcd holds Task %s not as JSON with an apiVersion: %.100q", o.Key, o.Value)
		}
		versions[o.Key] = v
	}
	return versions, nil
}

// CRDStoredVersions is the Task CRD's status.storedVersions.
func (u *Upgrade) CRDStoredVersions(ctx context.Context) ([]string, error) {
	crd, err := u.crds.Get(ctx, taskv1.CRDName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get CRD: %w", err)
	}
	return crd.Status.StoredVersions, nil
}
