package testenv

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"example.com/task-operator/internal/process"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// podStages are the project's pod lifecycle for KWOK; see doc.go.
//
//go:embed stages/*.yaml
var podStages embed.FS

// stockStages are KWOK's own node stages, copied next to the binaries by
// hack/controlplane.sh: nodes become Ready and keep heartbeating.
var stockStages = []string{"node-initialize.yaml", "node-heartbeat.yaml"}

// controllers are the kube-controller-manager controllers the project needs.
// nodelifecycle lifts the not-ready taint from new Nodes; the storage
// version migrator depends on the garbage collector.
const controllers = "job,garbagecollector,namespace,nodelifecycle,ttl-after-finished,podgc,storage-version-migrator-controller"

// startCluster adds the controller-manager, the scheduler and KWOK with fake
// Nodes, and waits until a pod runs through its whole life on one.
func (cp *ControlPlane) startCluster(ctx context.Context) error {
	stages, err := cp.writeStages()
	if err != nil {
		return err
	}
	kwokArgs, err := cp.kwokArgs(stages)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{KubeControllerManager, []string{
			"--kubeconfig=" + cp.KubeconfigPath,
			"--leader-elect=false",
			"--secure-port=0",
			"--controllers=" + cp.controllers(),
		}},
		{KubeScheduler, []string{
			"--kubeconfig=" + cp.KubeconfigPath,
			"--leader-elect=false",
			"--secure-port=0",
		}},
		{KWOK, kwokArgs},
	} {
		if err := cp.startComponent(c.name, c.args); err != nil {
			return err
		}
	}

	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if err := cp.createNodes(ctx, cs); err != nil {
		return err
	}
	if err := cp.waitNodesReady(ctx, cs); err != nil {
		return err
	}
	return cp.smokeTest(ctx, cs)
}

func (cp *ControlPlane) kwokArgs(stages []string) ([]string, error) {
	cidr, err := cp.podCIDR()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + cp.KubeconfigPath,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + FakeNodeAnnotation + "=fake",
		"--node-ip=127.0.0.1",
		"--cidr=" + cidr,
		"--server-address=127.0.0.1:0",
	}
	if cp.opts.PodLog != "" {
		logArgs, err := cp.podLogArgs()
		if err != nil {
			return nil, err
		}
		// A later --server-address wins: the kubelet server moves to the port the Nodes name.
		args = append(args, logArgs...)
	}
	for _, s := range stages {
		args = append(args, "--config="+s)
	}
	return args, nil
}

// podCIDR is the range KWOK takes pod IPs from (its first address is the gateway). Pods that
// stand in get a pod network each, with a host route to their IP: a control plane with stand-ins
// takes a /24 of 10.240.0.0/12 that no route of this machine uses, at random, so that two of
// them at once (go test runs packages in parallel; other checkouts on the machine too) do not
// hand out the same pod IP. The others keep 10.244.0.0/24: their pod IPs are never routed.
func (cp *ControlPlane) podCIDR() (string, error) {
	if len(cp.opts.StandInNamespaces) == 0 {
		return "10.244.0.1/24", nil
	}
	used, err := routedPrefixes()
	if err != nil {
		return "", err
	}
	for range 100 {
		n := rand.IntN(1 << 12)
		prefix := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(240 + n>>8), byte(n), 0}), 24)
		if prefix == podNetTestPrefix || slices.ContainsFunc(used, prefix.Overlaps) {
			continue
		}
		return netip.PrefixFrom(prefix.Addr().Next(), 24).String(), nil
	}
	return "", errors.New("no free /24 for pod IPs in 10.240.0.0/12")
}

// podNetTestPrefix is where the pod network's own tests take their address.
var podNetTestPrefix = netip.MustParsePrefix("10.244.255.0/24")

// routedPrefixes are the destinations of this machine's routes, default route aside.
func routedPrefixes() ([]netip.Prefix, error) {
	out, err := exec.Command("ip", "-o", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return nil, fmt.Errorf("ip route show: %w", err)
	}
	var prefixes []netip.Prefix
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		dst := fields[0]
		if dst == "local" || dst == "broadcast" || dst == "unicast" {
			if len(fields) < 2 {
				continue
			}
			dst = fields[1]
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if p, err := netip.ParsePrefix(dst); err == nil {
			prefixes = append(prefixes, p)
		}
	}
	return prefixes, nil
}

// writeStages puts the embedded pod stages into Dir for KWOK and returns
// every stage file KWOK must load.
func (cp *ControlPlane) writeStages() ([]string, error) {
	var paths []string
	for _, name := range stockStages {
		p := filepath.Join(cp.opts.BinDir, "kwok-stages", name)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("kwok stock stage (build with hack/controlplane.sh): %w", err)
		}
		paths = append(paths, p)
	}
	dir := filepath.Join(cp.Dir, "kwok-stages")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("write kwok stages: %w", err)
	}
	files, err := fs.Glob(podStages, "stages/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("write kwok stages: %w", err)
	}
	for _, f := range files {
		data, err := podStages.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("write kwok stages: %w", err)
		}
		if data, err = excludeNamespaces(data, cp.opts.StandInNamespaces); err != nil {
			return nil, fmt.Errorf("write kwok stage %s: %w", f, err)
		}
		p := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return nil, fmt.Errorf("write kwok stages: %w", err)
		}
		paths = append(paths, p)
	}
	if len(cp.opts.StandInNamespaces) > 0 {
		p := filepath.Join(dir, "standin-start.yaml")
		if err := os.WriteFile(p, standInStage(cp.opts.StandInNamespaces), 0o644); err != nil {
			return nil, fmt.Errorf("write kwok stages: %w", err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// controllers are the controllers kube-controller-manager runs: the project's, plus what
// stand-in pods need (Deployments, their ReplicaSets, EndpointSlices of their Services,
// PodDisruptionBudgets).
func (cp *ControlPlane) controllers() string {
	if len(cp.opts.StandInNamespaces) == 0 {
		return controllers
	}
	return controllers + ",deployment,replicaset,endpointslice,disruption"
}

// startComponent launches a component and records it and its arguments.
func (cp *ControlPlane) startComponent(name string, args []string) error {
	p, err := cp.launch(name, args)
	if p != nil {
		cp.procs = append(cp.procs, p)
		if cp.args == nil {
			cp.args = map[string][]string{}
		}
		cp.args[name] = args
	}
	return err
}

// launch runs one of BinDir's binaries and lets the watchdog know; the process is returned
// whenever it started, the watchdog's error with it.
func (cp *ControlPlane) launch(name string, args []string) (*process.Proc, error) {
	env := os.Environ()
	if name == KWOK {
		// KWOK also loads ~/.kwok/kwok.yaml; a person's own file must not
		// change the stages.
		env = append(env, "HOME="+cp.Dir)
	}
	p, err := process.Start(process.Spec{Name: name, Bin: filepath.Join(cp.opts.BinDir, name), Args: args, Env: env, LogPath: cp.logPath(name)})
	if err != nil {
		return nil, err
	}
	return p, cp.watchdog.watch(p.PID())
}

// NodeName returns the name of the i-th fake Node (0-based).
func NodeName(i int) string { return fmt.Sprintf("kwok-node-%d", i) }

func (cp *ControlPlane) createNodes(ctx context.Context, cs kubernetes.Interface) error {
	for i := range cp.opts.Nodes {
		if _, err := cs.CoreV1().Nodes().Create(ctx, fakeNode(NodeName(i)), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", NodeName(i), err)
		}
	}
	return nil
}

func fakeNode(name string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("250"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{FakeNodeAnnotation: "fake"},
			Labels: map[string]string{
				NodeTypeLabel:                   NodeTypeKWOK,
				corev1.LabelHostname:            name,
				corev1.LabelOSStable:            "linux",
				corev1.LabelArchStable:          "amd64",
				"node-role.kubernetes.io/agent": "",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

// waitNodesReady waits for KWOK to mark every fake Node Ready and then for
// the node lifecycle controller to lift the not-ready taint the apiserver
// puts on new Nodes. A check's error says why it is not done yet.
func (cp *ControlPlane) waitNodesReady(ctx context.Context, cs kubernetes.Interface) error {
	nodesWhere := func(bad func(*corev1.Node) string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: NodeTypeLabel + "=" + NodeTypeKWOK})
			if err != nil {
				return false, err
			}
			if len(nodes.Items) != cp.opts.Nodes {
				return false, fmt.Errorf("%d of %d nodes exist", len(nodes.Items), cp.opts.Nodes)
			}
			for _, n := range nodes.Items {
				if why := bad(&n); why != "" {
					return false, fmt.Errorf("node %s %s", n.Name, why)
				}
			}
			return true, nil
		}
	}
	notReady := func(n *corev1.Node) string {
		if !nodeReady(n) {
			return "not Ready"
		}
		return ""
	}
	if err := cp.poll(ctx, KWOK, "fake nodes Ready", nodesWhere(notReady)); err != nil {
		return err
	}
	tainted := func(n *corev1.Node) string {
		if len(n.Spec.Taints) > 0 {
			return fmt.Sprintf("has taints %v", n.Spec.Taints)
		}
		return ""
	}
	return cp.poll(ctx, KubeControllerManager, "node lifecycle controller to untaint the fake nodes", nodesWhere(tainted))
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// smokeTest runs one pod through scheduling and KWOK's stages to Succeeded:
// the cheapest proof that the scheduler and KWOK are working. The pod is
// deleted afterwards, so it does not show up in anyone's listings.
func (cp *ControlPlane) smokeTest(ctx context.Context, cs kubernetes.Interface) error {
	pods := cs.CoreV1().Pods(metav1.NamespaceSystem)
	pod, err := pods.Create(ctx, smokePod(), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create smoke pod: %w", err)
	}
	// Each check's error says why it is not done yet.
	phase := func(ctx context.Context, want func(*corev1.Pod) bool) (bool, error) {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if !want(p) {
			return false, fmt.Errorf("pod %s is %s on node %q", p.Name, p.Status.Phase, p.Spec.NodeName)
		}
		return true, nil
	}
	scheduled := func(ctx context.Context) (bool, error) {
		return phase(ctx, func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	}
	if err := cp.poll(ctx, KubeScheduler, "smoke pod scheduled", scheduled); err != nil {
		return err
	}
	succeeded := func(ctx context.Context) (bool, error) {
		return phase(ctx, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	}
	if err := cp.poll(ctx, KWOK, "smoke pod Succeeded", succeeded); err != nil {
		return err
	}
	err = pods.Delete(ctx, pod.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete smoke pod: %w", err)
	}
	return nil
}

func smokePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "controlplane-smoke-",
			Labels:       map[string]string{RunSecondsLabel: "0"},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "smoke", Image: "registry.invalid/smoke"}},
		},
	}
}

// poll waits for check while every component stays alive, until the start-up deadline that
// ctx carries; a timeout is blamed on component, whose log the error quotes.
func (cp *ControlPlane) poll(ctx context.Context, component, what string, check Condition) error {
	timeout := cp.opts.StartTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
	}
	err := Poll(ctx, timeout, 100*time.Millisecond, what, func(ctx context.Context) (bool, error) {
		if err := cp.Alive(); err != nil {
			return false, Permanent(err)
		}
		return check(ctx)
	})
	if err == nil || errors.As(err, new(permanentError)) {
		return err
	}
	return cp.componentError(component, err)
}
