package kubelet

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A PodNetwork gives a process the network a kubelet gives a pod: its own network namespace
// whose one interface holds the pod IP the cluster assigned, reachable from this machine. The
// apiserver (a process here) then reaches the process at the pod IP that Endpoints and
// EndpointSlices list, as it reaches a pod in a cluster.
//
// Nothing is added to any of this machine's interfaces and nothing leaves it:
//   - a veth pair joins the namespace to the host; the host end has no address, the pod end
//     only the pod IP (/32);
//   - the host routes that one /32 into the veth; the kernel picks the host's own address as
//     the source, and the namespace routes that one /32 back, and nothing else: a process in
//     the namespace can reach no other address (its name lookups fail at once);
//   - inside the namespace 127.0.0.1 is the namespace's own loopback; ForwardLoopback opens a
//     listener there that carries connections to a port of the host's loopback (the apiserver),
//     so a kubeconfig for https://127.0.0.1:PORT works unchanged, certificate SANs included.
//
// It needs root and the ip command (iproute2); PodNetworksSupported says why not.
type PodNetwork struct {
	Name   string     // the namespace, for `ip netns exec`
	IP     netip.Addr // the pod IP, inside the namespace
	hostIf string
	mu     sync.Mutex
	closed bool
	stop   []func()
}

// podNetPrefix starts every namespace and interface name made here, followed by this process's
// pid, so that CleanStalePodNetworks can tell those of dead test processes.
const podNetPrefix = "tenv"

// PodNetworksSupported returns nil where pod networks can be made, else why not.
func PodNetworksSupported() error {
	if os.Geteuid() != 0 {
		return errors.New("pod networks need root (network namespaces, veth pairs, routes)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("pod networks need the ip command (apt-get install iproute2)")
	}
	return nil
}

// NewPodNetwork makes a network namespace holding ip and routes ip into it.
func NewPodNetwork(ip netip.Addr) (_ *PodNetwork, err error) {
	if err := PodNetworksSupported(); err != nil {
		return nil, err
	}
	if !ip.Is4() || ip.IsLoopback() {
		return nil, fmt.Errorf("pod network: %s is not a non-loopback IPv4 address", ip)
	}
	id, err := randomID()
	if err != nil {
		return nil, err
	}
	// Interface names are at most 15 bytes: prefix, pid (base 36), 4 random hex digits.
	tag := podNetPrefix + strconv.FormatInt(int64(os.Getpid()), 36) + id
	n := &PodNetwork{Name: tag, IP: ip, hostIf: tag + "h"}
	podIf := tag + "p"
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Close())
		}
	}()
	hostIP := ip.String() + "/32"
	for _, args := range [][]string{
		{"netns", "add", n.Name},
		{"link", "add", n.hostIf, "type", "veth", "peer", "name", podIf},
		{"link", "set", podIf, "netns", n.Name},
		{"link", "set", n.hostIf, "up"},
		{"-n", n.Name, "link", "set", "lo", "up"},
		{"-n", n.Name, "addr", "add", hostIP, "dev", podIf},
		{"-n", n.Name, "link", "set", podIf, "up"},
		{"route", "add", hostIP, "dev", n.hostIf},
	} {
		if err := ipCommand(args...); err != nil {
			return nil, err
		}
	}
	src, err := routeSource(ip)
	if err != nil {
		return nil, err
	}
	// Replies go back to the host's address, and nowhere else.
	if err := ipCommand("-n", n.Name, "route", "add", src.String()+"/32", "dev", podIf); err != nil {
		return nil, err
	}
	return n, nil
}

func randomID() (string, error) {
	b := make([]byte, 2)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("pod network: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func ipCommand(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// routeSource is the address the host sends from towards ip.
func routeSource(ip netip.Addr) (netip.Addr, error) {
	out, err := exec.Command("ip", "-o", "route", "get", ip.String()).Output()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("ip route get %s: %w", ip, err)
	}
	fields := strings.Fields(string(out))
	for i, f := range fields {
		if f == "src" && i+1 < len(fields) {
			return netip.ParseAddr(fields[i+1])
		}
	}
	return netip.Addr{}, fmt.Errorf("pod network: the host has no address to reach %s from: %s", ip, out)
}

// Command returns the command line that runs bin with args inside the namespace.
func (n *PodNetwork) Command(bin string, args ...string) (string, []string) {
	return "ip", append([]string{"netns", "exec", n.Name, bin}, args...)
}

// Listen opens a listener inside the namespace. The socket keeps the namespace it was made in,
// so it is made on a thread switched into the namespace for the purpose, and switched back.
func (n *PodNetwork) Listen(network, address string) (net.Listener, error) {
	var l net.Listener
	err := n.inNamespace(func() error {
		var err error
		l, err = net.Listen(network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s in %s: %w", address, n.Name, err)
	}
	return l, nil
}

// inNamespace runs f on an OS thread that is inside the namespace.
func (n *PodNetwork) inNamespace(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// A thread that could not be switched back stays locked and dies with this goroutine.
		errc <- n.onThisThread(f)
	}()
	return <-errc
}

func (n *PodNetwork) onThisThread(f func() error) error {
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	defer self.Close()
	target, err := os.Open("/var/run/netns/" + n.Name)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter %s: %w", n.Name, err)
	}
	ferr := f()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		return errors.Join(ferr, fmt.Errorf("leave %s: %w", n.Name, err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// ForwardLoopback listens on the namespace's 127.0.0.1 at hostAddr's port and carries each
// connection to hostAddr (a 127.0.0.1 address of this machine). It stops with Close.
func (n *PodNetwork) ForwardLoopback(hostAddr string) error {
	host, port, err := net.SplitHostPort(hostAddr)
	if err != nil {
		return err
	}
	if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
		return fmt.Errorf("forward %s: only loopback addresses are forwarded", hostAddr)
	}
	l, err := n.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.stop = append(n.stop, func() { _ = l.Close() })
	n.mu.Unlock()
	go forward(l, hostAddr)
	return nil
}

func forward(l net.Listener, to string) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := net.Dial("tcp", to)
			if err != nil {
				return
			}
			defer out.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(out, in); closeWrite(out); done <- struct{}{} }()
			go func() { _, _ = io.Copy(in, out); closeWrite(in); done <- struct{}{} }()
			<-done
			<-done
		}()
	}
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// Close removes the namespace (and with it both ends of the veth pair) and the host route.
func (n *PodNetwork) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	stop := n.stop
	n.mu.Unlock()
	for _, f := range stop {
		f()
	}
	var errs []error
	// Deleting the host end deletes its peer; the route goes with the link.
	if err := ipCommand("link", "del", n.hostIf); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
		errs = append(errs, err)
	}
	if err := ipCommand("netns", "del", n.Name); err != nil && !strings.Contains(err.Error(), "No such file") {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CleanStalePodNetworks removes the namespaces and interfaces left by test processes that died
// before closing their pod networks.
func CleanStalePodNetworks() error {
	if PodNetworksSupported() != nil {
		return nil
	}
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return fmt.Errorf("ip netns list: %w", err)
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(fields[0], podNetPrefix) {
			continue
		}
		name := fields[0]
		pid, err := strconv.ParseInt(strings.TrimPrefix(name, podNetPrefix)[:len(name)-len(podNetPrefix)-4], 36, 64)
		if err != nil || podNetOwnerAlive(int(pid)) {
			continue
		}
		n := &PodNetwork{Name: name, hostIf: name + "h"}
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}

// podNetOwnerAlive reports whether pid runs (signal 0).
func podNetOwnerAlive(pid int) bool {
	return unix.Kill(pid, 0) == nil
}
