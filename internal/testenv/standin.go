package testenv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Stand-in pods: the pods of a namespace named in Options.StandInNamespaces run as real processes
// on this machine, as a kubelet would run them. KWOK only starts them (a pod IP, Running, not
// Ready); StandIns does the rest:
//
//   - each pod gets a PodNetwork holding its pod IP, so the apiserver reaches it at the address
//     its EndpointSlices list (with --enable-aggregator-routing, which Options.StandInNamespaces
//     turns on, the apiserver resolves webhook Services through them);
//   - the container's image is looked up in StandInOptions.Binaries and run with the
//     container's args and environment (downward API included), in a mount namespace where the
//     pod's volumes (emptyDir, Secret) and its ServiceAccount token (a TokenRequest bound to the
//     pod: the process runs with exactly the pod's RBAC) sit where the pod spec mounts them, and
//     KUBERNETES_SERVICE_HOST/PORT name the apiserver's loopback address, forwarded into the
//     namespace;
//   - the readiness probe is the process's own: the pod's Ready condition follows it, and
//     Endpoints with it;
//   - a deleted pod's process gets SIGTERM and terminationGracePeriodSeconds to exit, the probe
//     still followed meanwhile; then the pod is removed. A process that exits by itself is
//     restarted or ends the pod, per the restart policy.

// StandInOptions say which pods to run and with what.
type StandInOptions struct {
	// Namespace whose pods are run here; it must be one of the control plane's
	// Options.StandInNamespaces.
	Namespace string
	// Binaries maps a container image to the executable that stands in for its entrypoint.
	Binaries map[string]string
	// Entrypoints maps an image to the path of its entrypoint inside it, for containers whose
	// command names it (Kueue's Deployment says command: [/manager]): the binary stands in for
	// that command. A container whose command names anything else cannot stand in.
	Entrypoints map[string]string
	// Dir receives one directory per pod: its log, volumes and token (default under WorkDir).
	Dir string
}

// StandIns runs the pods of one namespace. Stop it when done.
type StandIns struct {
	cp     *ControlPlane
	opts   StandInOptions
	cs     kubernetes.Interface
	api    string // the apiserver's loopback host:port
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	pods map[types.UID]*standIn
	errs []error
}

// RunStandIns starts running the namespace's pods, now and as they come.
func (cp *ControlPlane) RunStandIns(opts StandInOptions) (*StandIns, error) {
	if err := PodNetworksSupported(); err != nil {
		return nil, err
	}
	if !cp.standsIn(opts.Namespace) {
		return nil, fmt.Errorf("stand-ins: namespace %q is not in the control plane's StandInNamespaces", opts.Namespace)
	}
	if opts.Dir == "" {
		work, err := WorkDir()
		if err != nil {
			return nil, err
		}
		opts.Dir = filepath.Join(work, "standins", opts.Namespace)
	}
	u, err := url.Parse(cp.Config.Host)
	if err != nil {
		return nil, fmt.Errorf("stand-ins: apiserver address %q: %w", cp.Config.Host, err)
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &StandIns{cp: cp, opts: opts, cs: cs, api: u.Host, cancel: cancel, pods: map[types.UID]*standIn{}}
	s.wg.Go(func() { s.watch(ctx) })
	return s, nil
}

func (cp *ControlPlane) standsIn(namespace string) bool {
	for _, ns := range cp.opts.StandInNamespaces {
		if ns == namespace {
			return true
		}
	}
	return false
}

// Stop kills every process (as a node failure would) and removes the pod networks; the pods
// are left as they are.
func (s *StandIns) Stop() error {
	s.cancel()
	s.wg.Wait()
	return s.Err()
}

// Err reports pods that could not be run.
func (s *StandIns) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}

// Process is what runs for one pod.
type Process struct {
	Pod  string
	IP   netip.Addr
	Dir  string
	proc *proc
}

// Processes lists the pods running now, by pod name.
func (s *StandIns) Processes() map[string]*Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]*Process{}
	for _, p := range s.pods {
		if cur := p.current(); cur != nil {
			out[p.name] = cur
		}
	}
	return out
}

// Log returns the log of the pod's process ("" if it has none).
func (p *Process) Log() string {
	data, _ := os.ReadFile(filepath.Join(p.Dir, "container.log"))
	return string(data)
}

func (s *StandIns) watch(ctx context.Context) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pods, err := s.cs.CoreV1().Pods(s.opts.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for i := range pods.Items {
			s.adopt(ctx, &pods.Items[i])
		}
	}
}

// adopt starts a kubelet loop for a pod KWOK has started and nobody runs yet.
func (s *StandIns) adopt(ctx context.Context, pod *corev1.Pod) {
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" || pod.DeletionTimestamp != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pods[pod.UID]; ok {
		return
	}
	p := &standIn{s: s, name: pod.Name, uid: pod.UID, dir: filepath.Join(s.opts.Dir, pod.Name)}
	s.pods[pod.UID] = p
	s.wg.Go(func() {
		defer p.finished.Store(true)
		if err := p.run(ctx); err != nil && ctx.Err() == nil {
			s.mu.Lock()
			s.errs = append(s.errs, fmt.Errorf("stand-in pod %s/%s: %w", s.opts.Namespace, pod.Name, err))
			s.mu.Unlock()
		}
	})
}

// standIn is the kubelet of one pod (one container: the first).
type standIn struct {
	s    *StandIns
	name string
	uid  types.UID
	dir  string
	net  *PodNetwork

	finished atomic.Bool // its pod is gone or ended: the loop returned

	mu       sync.Mutex
	proc     *proc
	restarts int32
}

func (p *standIn) current() *Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil || p.net == nil || p.finished.Load() {
		return nil
	}
	return &Process{Pod: p.name, IP: p.net.IP, Dir: p.dir, proc: p.proc}
}

func (p *standIn) pods() corePods { return p.s.cs.CoreV1().Pods(p.s.opts.Namespace) }

type corePods = interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
	UpdateStatus(ctx context.Context, pod *corev1.Pod, opts metav1.UpdateOptions) (*corev1.Pod, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

func (p *standIn) run(ctx context.Context) error {
	pod, err := p.pods().Get(ctx, p.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil {
		return fmt.Errorf("pod IP: %w", err)
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	n, err := NewPodNetwork(ip)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.net = n
	p.mu.Unlock()
	defer func() { _ = n.Close() }()
	if err := n.ForwardLoopback(p.s.api); err != nil {
		return err
	}
	if err := p.start(ctx, pod); err != nil {
		return err
	}
	defer p.kill()
	return p.loop(ctx, pod)
}

// start runs the pod's first container in the pod network.
func (p *standIn) start(ctx context.Context, pod *corev1.Pod) error {
	c := pod.Spec.Containers[0]
	bin, args, err := p.s.opts.commandLine(c)
	if err != nil {
		return err
	}
	mounts, err := p.prepareMounts(ctx, pod, c)
	if err != nil {
		return err
	}
	env, err := p.env(pod, c)
	if err != nil {
		return err
	}
	// In a mount namespace of its own, the pod's volumes and token are bind-mounted where the
	// pod spec says; then the binary replaces the shell.
	script := "set -e\n"
	for _, m := range mounts {
		script += m.script()
	}
	script += `exec "$@"`
	args = append([]string{"--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", bin}, args...)
	ipBin, ipArgs := p.net.Command("unshare", args...)
	proc, err := startProc(procSpec{
		name: "pod " + p.name, bin: ipBin, args: ipArgs, env: env,
		logPath: filepath.Join(p.dir, "container.log"), diesWithParent: true,
	})
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.proc = proc
	p.mu.Unlock()
	return nil
}

// commandLine is the binary that stands in for the container and its arguments: the image's
// entrypoint with the container's args, or, when the container's command names the entrypoint,
// the rest of the command followed by the args, as a container runtime would run them.
func (o StandInOptions) commandLine(c corev1.Container) (string, []string, error) {
	bin, ok := o.Binaries[c.Image]
	if !ok {
		return "", nil, fmt.Errorf("no binary stands in for image %q", c.Image)
	}
	if len(c.Command) == 0 {
		return bin, c.Args, nil
	}
	if entrypoint, ok := o.Entrypoints[c.Image]; !ok || c.Command[0] != entrypoint {
		return "", nil, fmt.Errorf("container %s runs %q; only the entrypoint of image %s can stand in", c.Name, c.Command[0], c.Image)
	}
	return bin, append(slices.Clone(c.Command[1:]), c.Args...), nil
}

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

const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

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
		"token": []byte(tr.Status.Token), "ca.crt": p.s.cp.Config.CAData, "namespace": []byte(pod.Namespace),
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

// loop plays kubelet until the pod is gone: readiness, deletion, exits.
func (p *standIn) loop(ctx context.Context, pod *corev1.Pod) error {
	probe := &http.Client{Timeout: time.Second}
	var terminating bool
	var killAt time.Time
	var lastSecrets time.Time
	ready := false
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		current, err := p.pods().Get(ctx, p.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && current.UID != p.uid) {
			return nil
		}
		if err != nil {
			continue
		}
		pod = current
		if pod.DeletionTimestamp != nil && !terminating {
			terminating = true
			grace := int64(30)
			if pod.DeletionGracePeriodSeconds != nil {
				grace = *pod.DeletionGracePeriodSeconds
			}
			killAt = time.Now().Add(time.Duration(grace) * time.Second)
			p.signal(syscall.SIGTERM)
		}
		if terminating && time.Now().After(killAt) {
			p.signal(syscall.SIGKILL)
		}
		if time.Since(lastSecrets) > time.Second {
			p.refreshSecrets(ctx, pod)
			lastSecrets = time.Now()
		}
		if exited, code := p.exited(); exited {
			done, err := p.onExit(ctx, pod, terminating, code)
			if done || err != nil {
				return err
			}
			ready = false
			continue
		}
		now := p.probe(ctx, probe, pod)
		if now != ready {
			if err := p.setReady(ctx, pod, now); err == nil {
				ready = now
			}
		}
	}
}

func (p *standIn) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil {
		p.proc.signalGroup(sig)
	}
}

func (p *standIn) kill() {
	p.mu.Lock()
	proc := p.proc
	p.mu.Unlock()
	if proc != nil {
		_ = proc.kill()
	}
}

func (p *standIn) exited() (bool, int) {
	p.mu.Lock()
	proc := p.proc
	p.mu.Unlock()
	exited, err := proc.exitErr()
	if !exited {
		return false, 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return true, ee.ExitCode()
	}
	return true, 0
}

// onExit restarts the container or ends the pod; done says the pod is finished.
func (p *standIn) onExit(ctx context.Context, pod *corev1.Pod, terminating bool, code int) (bool, error) {
	restart := !terminating && (pod.Spec.RestartPolicy == corev1.RestartPolicyAlways ||
		(pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && code != 0))
	if restart {
		p.restarts++
		return false, p.start(ctx, pod)
	}
	if err := p.finish(ctx, pod, code); err != nil {
		return true, err
	}
	if terminating {
		// The kubelet's last word on a deleted pod: remove it for good.
		err := p.pods().Delete(ctx, p.name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return true, err
		}
	}
	return true, nil
}

// finish records the container's end in the pod's status.
func (p *standIn) finish(ctx context.Context, pod *corev1.Pod, code int) error {
	pod = pod.DeepCopy()
	pod.Status.Phase = corev1.PodSucceeded
	if code != 0 {
		pod.Status.Phase = corev1.PodFailed
	}
	now := metav1.Now()
	setCondition(pod, corev1.PodReady, corev1.ConditionFalse, now)
	setCondition(pod, corev1.ContainersReady, corev1.ConditionFalse, now)
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		cs.Ready, cs.Started = false, ptr.To(false)
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: exitReason(code), FinishedAt: now}}
	}
	_, err := p.pods().UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func exitReason(code int) string {
	if code == 0 {
		return "Completed"
	}
	return "Error"
}

// probe runs the container's readiness probe (HTTP GET on the pod IP); without one a running
// container is ready.
func (p *standIn) probe(ctx context.Context, client *http.Client, pod *corev1.Pod) bool {
	c := pod.Spec.Containers[0]
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
		return true
	}
	get := c.ReadinessProbe.HTTPGet
	port := get.Port.IntValue()
	if port == 0 {
		for _, cp := range c.Ports {
			if cp.Name == get.Port.StrVal {
				port = int(cp.ContainerPort)
			}
		}
	}
	scheme := strings.ToLower(string(get.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u := fmt.Sprintf("%s://%s:%d%s", scheme, pod.Status.PodIP, port, get.Path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

// setReady writes the probe's verdict into the pod's conditions and container status, which
// the EndpointSlice controller reads.
func (p *standIn) setReady(ctx context.Context, pod *corev1.Pod, ready bool) error {
	pod = pod.DeepCopy()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	now := metav1.Now()
	setCondition(pod, corev1.PodReady, status, now)
	setCondition(pod, corev1.ContainersReady, status, now)
	for i := range pod.Status.ContainerStatuses {
		pod.Status.ContainerStatuses[i].Ready = ready
		pod.Status.ContainerStatuses[i].RestartCount = p.restarts
	}
	_, err := p.pods().UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}

func setCondition(pod *corev1.Pod, t corev1.PodConditionType, s corev1.ConditionStatus, now metav1.Time) {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == t {
			if c.Status != s {
				c.Status, c.LastTransitionTime = s, now
			}
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: s, LastTransitionTime: now})
}
