package kubelet

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// bindMount puts source (a directory, or a file for a subPath mount of one) at target.
type bindMount struct {
	source, target string
	file           bool
}

// script is the shell that makes the mount point and mounts. A mount point that does not exist
// is made on this machine's file system, as an empty directory or file: the mount itself stays
// in the pod's mount namespace.
func (m bindMount) script() string {
	if m.file {
		return fmt.Sprintf("mkdir -p %q && { [ -e %q ] || : >%q; } && mount --bind %q %q\n",
			filepath.Dir(m.target), m.target, m.target, m.source, m.target)
	}
	return fmt.Sprintf("mkdir -p %q && mount --bind %q %q\n", m.target, m.source, m.target)
}

// prepareMounts writes the pod's volumes and token into its directory.
func (p *standIn) prepareMounts(ctx context.Context, pod *corev1.Pod, c corev1.Container) ([]bindMount, error) {
	sa := filepath.Join(p.dir, "serviceaccount")
	if err := p.writeToken(ctx, pod, sa); err != nil {
		return nil, err
	}
	mounts := []bindMount{{source: sa, target: serviceAccountDir}}
	for _, m := range c.VolumeMounts {
		src := filepath.Join(p.dir, "volumes", m.Name)
		if err := p.writeVolume(ctx, pod, m.Name, src); err != nil {
			return nil, err
		}
		mount, err := subPathMount(src, m)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, mount)
	}
	return mounts, nil
}

// subPathMount mounts the volume at src, or the file or directory subPath names in it.
func subPathMount(src string, m corev1.VolumeMount) (bindMount, error) {
	if m.SubPath == "" {
		return bindMount{source: src, target: m.MountPath}, nil
	}
	if !filepath.IsLocal(m.SubPath) {
		return bindMount{}, fmt.Errorf("volume mount %s: subPath %q leaves the volume", m.Name, m.SubPath)
	}
	source := filepath.Join(src, m.SubPath)
	info, err := os.Stat(source)
	if err != nil {
		return bindMount{}, fmt.Errorf("volume mount %s: %w", m.Name, err)
	}
	return bindMount{source: source, target: m.MountPath, file: !info.IsDir()}, nil
}

// writeToken asks for a token of the pod's ServiceAccount bound to the pod, as the kubelet's
// projected volume does.
func (p *standIn) writeToken(ctx context.Context, pod *corev1.Pod, dir string) error {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr, err := p.s.cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](3600),
			BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for service account %s: %w", sa, err)
	}
	return writeFiles(dir, map[string][]byte{
		"token": []byte(tr.Status.Token), "ca.crt": p.s.opts.Config.CAData, "namespace": []byte(pod.Namespace),
	})
}

func (p *standIn) writeVolume(ctx context.Context, pod *corev1.Pod, name, dir string) error {
	for _, v := range pod.Spec.Volumes {
		if v.Name != name {
			continue
		}
		switch {
		case v.EmptyDir != nil:
			return os.MkdirAll(dir, 0o777)
		case v.Secret != nil:
			secret, err := p.s.cs.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("volume %s: %w", name, err)
			}
			return writeFiles(dir, projectKeys(secret.Data, v.Secret.Items))
		case v.ConfigMap != nil:
			cm, err := p.s.cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("volume %s: %w", name, err)
			}
			return writeFiles(dir, projectKeys(configMapFiles(cm), v.ConfigMap.Items))
		default:
			return fmt.Errorf("volume %s: only emptyDir, secret and configMap volumes stand in", name)
		}
	}
	return fmt.Errorf("volume %s is mounted but not defined", name)
}

func configMapFiles(cm *corev1.ConfigMap) map[string][]byte {
	files := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		files[k] = []byte(v)
	}
	maps.Copy(files, cm.BinaryData)
	return files
}

// projectKeys is what a volume with items shows: only the keys listed, at their paths; without
// items, every key as a file of its name.
func projectKeys(data map[string][]byte, items []corev1.KeyToPath) map[string][]byte {
	if len(items) == 0 {
		return data
	}
	out := make(map[string][]byte, len(items))
	for _, it := range items {
		if v, ok := data[it.Key]; ok {
			out[it.Path] = v
		}
	}
	return out
}

// refreshSecrets rewrites the Secret and ConfigMap volumes, as the kubelet does after one
// changes.
func (p *standIn) refreshSecrets(ctx context.Context, pod *corev1.Pod) {
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil || v.ConfigMap != nil {
			_ = p.writeVolume(ctx, pod, v.Name, filepath.Join(p.dir, "volumes", v.Name))
		}
	}
}

func writeFiles(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range files {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// env is the container's environment as the kubelet builds it.
func (p *standIn) env(pod *corev1.Pod, c corev1.Container) ([]string, error) {
	host, port, _ := strings.Cut(p.s.api, ":")
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + p.dir,
		"HOSTNAME=" + pod.Name,
		"KUBERNETES_SERVICE_HOST=" + host, "KUBERNETES_SERVICE_PORT=" + port,
	}
	for _, e := range c.Env {
		v, err := envValue(pod, c, e)
		if err != nil {
			return nil, err
		}
		env = append(env, e.Name+"="+v)
	}
	return env, nil
}

func envValue(pod *corev1.Pod, c corev1.Container, e corev1.EnvVar) (string, error) {
	switch {
	case e.ValueFrom == nil:
		return e.Value, nil
	case e.ValueFrom.FieldRef != nil:
		switch e.ValueFrom.FieldRef.FieldPath {
		case "metadata.name":
			return pod.Name, nil
		case "metadata.namespace":
			return pod.Namespace, nil
		case "metadata.uid":
			return string(pod.UID), nil
		case "spec.nodeName":
			return pod.Spec.NodeName, nil
		case "spec.serviceAccountName":
			return pod.Spec.ServiceAccountName, nil
		case "status.podIP":
			return pod.Status.PodIP, nil
		}
	case e.ValueFrom.ResourceFieldRef != nil:
		ref := e.ValueFrom.ResourceFieldRef
		kind, res, _ := strings.Cut(ref.Resource, ".")
		list := c.Resources.Limits
		if kind == "requests" {
			list = c.Resources.Requests
		}
		q, ok := list[corev1.ResourceName(res)]
		if !ok {
			return "", fmt.Errorf("env %s: container has no %s", e.Name, ref.Resource)
		}
		if res == "cpu" {
			return strconv.FormatInt((q.MilliValue()+999)/1000, 10), nil
		}
		return strconv.FormatInt(q.Value(), 10), nil
	}
	return "", fmt.Errorf("env %s: this source does not stand in", e.Name)
}
