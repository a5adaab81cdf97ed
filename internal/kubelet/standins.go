package kubelet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"example.com/task-operator/internal/process"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options say which pods to run and with what.
type Options struct {
	// Namespace whose pods are run here; KWOK must leave its pods alone once started (testenv's
	// Options.StandInNamespaces).
	Namespace string
	// Config reaches the apiserver, as a kubelet's client does; its CA is the pods' ca.crt.
	Config *rest.Config
	// Binaries maps a container image to the executable that stands in for its entrypoint.
	Binaries map[string]string
	// Entrypoints maps an image to the path of its entrypoint inside it, for containers whose
	// command names it (Kueue's Deployment says command: [/manager]): the binary stands in for
	// that command. A container whose command names anything else cannot stand in.
	Entrypoints map[string]string
	// Dir receives one directory per pod: its log, volumes and token.
	Dir string
}

// StandIns runs the pods of one namespace. Stop it when done.
type StandIns struct {
	opts   Options
	cs     kubernetes.Interface
	api    string // the apiserver's loopback host:port
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	pods map[types.UID]*standIn
	errs []error
}

// Run starts running the namespace's pods, now and as they come.
func Run(opts Options) (*StandIns, error) {
	if err := PodNetworksSupported(); err != nil {
		return nil, err
	}
	if opts.Config == nil || opts.Dir == "" || opts.Namespace == "" {
		return nil, errors.New("stand-ins: Options.Namespace, Config and Dir are required")
	}
	u, err := url.Parse(opts.Config.Host)
	if err != nil {
		return nil, fmt.Errorf("stand-ins: apiserver address %q: %w", opts.Config.Host, err)
	}
	cs, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &StandIns{opts: opts, cs: cs, api: u.Host, cancel: cancel, pods: map[types.UID]*standIn{}}
	s.wg.Go(func() { s.watch(ctx) })
	return s, nil
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
	proc *process.Proc
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

const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
