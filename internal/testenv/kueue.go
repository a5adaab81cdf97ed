package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"example.com/task-operator/internal/kubelet"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Kueue (sigs.k8s.io/kueue), the job queueing system Tasks with spec.queueName go through, runs
// on a control plane as shipped: its release manifests (CRDs, RBAC, the webhook and visibility
// Services, webhook configurations, the APIService, the Deployment) are applied unchanged, and
// its manager pod is a stand-in (see StandIns) running the kueue binary hack/kueue.sh built
// from the same module. So Kueue manages its own certificate (internalCertManagement: a Secret
// for kueue-webhook-service.kueue-system.svc, its CA injected into its CRDs and webhook
// configurations), and the apiserver calls its conversion and admission webhooks through the
// Service's EndpointSlices, at the pod IP the stand-in holds.
//
// Running it out of the cluster instead does not work as shipped: its certificate names only
// the Service, and it starts no controller until that certificate is ready.

// KueueNamespace is where Kueue's manifests put it. A control plane that runs Kueue lists it in
// Options.StandInNamespaces.
const KueueNamespace = "kueue-system"

// Kueue's objects as its manifests name them.
const (
	kueueDeployment   = "kueue-controller-manager"
	kueueManifests    = "kueue-manifests.yaml"
	kueueBinary       = "kueue"
	kueueEntrypoint   = "/manager"
	kueueReadyTimeout = 3 * time.Minute
)

// KueueGroup is Kueue's API group; KueueVersion the version its CRDs store.
const (
	KueueGroup   = "kueue.x-k8s.io"
	KueueVersion = "v1beta2"
)

// KueueResource is a resource of Kueue's API at KueueVersion (clusterqueues, localqueues,
// resourceflavors, workloads, workloadpriorityclasses).
func KueueResource(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: KueueGroup, Version: KueueVersion, Resource: resource}
}

// Kueue is Kueue running on a control plane. Stop it when done.
type Kueue struct {
	// StandIns runs Kueue's manager pod.
	StandIns *kubelet.StandIns
	// Image is the image of Kueue's Deployment.
	Image string
}

// KueueAvailable says whether hack/kueue.sh has built Kueue into the control plane's BinDir.
func (cp *ControlPlane) KueueAvailable() error {
	for _, name := range []string{kueueBinary, kueueManifests} {
		if _, err := os.Stat(filepath.Join(cp.opts.BinDir, name)); err != nil {
			return fmt.Errorf("kueue is not built (hack/kueue.sh, run by make controlplane): %w", err)
		}
	}
	return nil
}

// InstallKueue applies Kueue's release manifests, runs its manager pod, and waits until Kueue
// is ready: the pod is Ready and the apiserver reaches its webhooks (a Kueue object written at
// the version it does not store goes through both conversion and admission).
func (cp *ControlPlane) InstallKueue(ctx context.Context) (*Kueue, error) {
	if err := cp.KueueAvailable(); err != nil {
		return nil, err
	}
	if !slices.Contains(cp.opts.StandInNamespaces, KueueNamespace) {
		return nil, fmt.Errorf("install kueue: %s is not in the control plane's StandInNamespaces", KueueNamespace)
	}
	manifests, err := os.ReadFile(filepath.Join(cp.opts.BinDir, kueueManifests))
	if err != nil {
		return nil, err
	}
	image, err := deploymentImage(manifests, kueueDeployment)
	if err != nil {
		return nil, err
	}
	if _, _, err := Kubectl(ctx, cp.KubeconfigPath, manifests, "apply", "--server-side", "--field-manager=testenv", "-f", "-"); err != nil {
		return nil, fmt.Errorf("install kueue: %w", err)
	}
	standins, err := cp.RunStandIns(kubelet.Options{
		Namespace:   KueueNamespace,
		Binaries:    map[string]string{image: filepath.Join(cp.opts.BinDir, kueueBinary)},
		Entrypoints: map[string]string{image: kueueEntrypoint},
		Dir:         filepath.Join(cp.Dir, "standins", KueueNamespace),
	})
	if err != nil {
		return nil, err
	}
	k := &Kueue{StandIns: standins, Image: image}
	if err := cp.waitForKueue(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("install kueue: %w\n%s", err, k.LogTail(40)), k.Stop())
	}
	return k, nil
}

// Stop kills Kueue's manager; its objects stay.
func (k *Kueue) Stop() error { return k.StandIns.Stop() }

// LogTail is the end of the manager's log, for failure messages.
func (k *Kueue) LogTail(lines int) string {
	var b bytes.Buffer
	for name, p := range k.StandIns.Processes() {
		fmt.Fprintf(&b, "--- kueue pod %s ---\n%s\n", name, Tail(p.Log(), lines))
	}
	if err := k.StandIns.Err(); err != nil {
		fmt.Fprintf(&b, "stand-ins: %v\n", err)
	}
	return b.String()
}

func (cp *ControlPlane) waitForKueue(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	err = Poll(ctx, kueueReadyTimeout, time.Second, "kueue's manager pod Ready", func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(KueueNamespace).Get(ctx, kueueDeployment, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if d.Status.ReadyReplicas < 1 {
			return false, fmt.Errorf("deployment %s: %d ready replicas", d.Name, d.Status.ReadyReplicas)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	// A ResourceFlavor written at v1beta1 is converted to the stored v1beta2 by Kueue's
	// conversion webhook and validated by its admission webhook; a dry run stores nothing.
	flavor := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": KueueGroup + "/v1beta1",
		"kind":       "ResourceFlavor",
		"metadata":   map[string]any{"name": "testenv-ready-check"},
	}}
	rf := dyn.Resource(schema.GroupVersionResource{Group: KueueGroup, Version: "v1beta1", Resource: "resourceflavors"})
	return Poll(ctx, kueueReadyTimeout, time.Second, "kueue's webhooks answer", func(ctx context.Context) (bool, error) {
		_, err := rf.Create(ctx, flavor, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, err
	})
}

// deploymentImage is the image of the named Deployment's first container in a YAML stream.
func deploymentImage(manifests []byte, name string) (string, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return "", fmt.Errorf("no Deployment %s in kueue's manifests", name)
			}
			return "", fmt.Errorf("kueue's manifests: %w", err)
		}
		if u.GetKind() != "Deployment" || u.GetName() != name {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
			return "", fmt.Errorf("kueue's Deployment: %w", err)
		}
		if len(d.Spec.Template.Spec.Containers) > 0 {
			return d.Spec.Template.Spec.Containers[0].Image, nil
		}
	}
}
