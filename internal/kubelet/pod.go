package kubelet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"example.com/task-operator/internal/process"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// standIn is the kubelet of one pod (one container: the first).
type standIn struct {
	s    *StandIns
	name string
	uid  types.UID
	dir  string
	net  *PodNetwork

	finished atomic.Bool // its pod is gone or ended: the loop returned

	mu       sync.Mutex
	proc     *process.Proc
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
	proc, err := process.Start(process.Spec{
		Name: "pod " + p.name, Bin: ipBin, Args: ipArgs, Env: env,
		LogPath: filepath.Join(p.dir, "container.log"), DiesWithParent: true,
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
func (o Options) commandLine(c corev1.Container) (string, []string, error) {
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
		p.proc.SignalGroup(sig)
	}
}

func (p *standIn) kill() {
	p.mu.Lock()
	proc := p.proc
	p.mu.Unlock()
	if proc != nil {
		_ = proc.Kill()
	}
}

func (p *standIn) exited() (bool, int) {
	p.mu.Lock()
	proc := p.proc
	p.mu.Unlock()
	exited, err := proc.ExitErr()
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
