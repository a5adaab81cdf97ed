package kubelet

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// hostAddresses lists this machine's addresses, to show a pod network adds none.
func hostAddresses(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "-o", "addr", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.Contains(l, podNetPrefix) { // the veth's own link-local IPv6 comes and goes with it
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

func TestPodNetwork(t *testing.T) {
	if err := PodNetworksSupported(); err != nil {
		t.Skip(err)
	}
	before := hostAddresses(t)
	n, err := NewPodNetwork(netip.MustParseAddr("10.244.255.7"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	if after := hostAddresses(t); after != before {
		t.Errorf("host addresses changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// The host reaches a server listening on the pod IP inside the namespace.
	l, err := n.Listen("tcp", "10.244.255.7:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			_, _ = io.WriteString(c, "from the pod\n")
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("host to pod: %v", err)
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if line != "from the pod\n" {
		t.Errorf("host read %q from the pod", line)
	}

	// The pod reaches the host's loopback only through the forwarder, at the same address.
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go func() {
		c, err := host.Accept()
		if err == nil {
			_, _ = io.WriteString(c, "from the host\n")
			c.Close()
		}
	}()
	if err := n.ForwardLoopback(host.Addr().String()); err != nil {
		t.Fatal(err)
	}
	var got string
	err = n.inNamespace(func() error {
		c, err := net.Dial("tcp", host.Addr().String())
		if err != nil {
			return err
		}
		defer c.Close()
		got, _ = bufio.NewReader(c).ReadString('\n')
		return nil
	})
	if err != nil || got != "from the host\n" {
		t.Errorf("pod to host loopback: %v, read %q", err, got)
	}

	// Any other address is unreachable from the pod: nothing can leak out.
	err = n.inNamespace(func() error {
		c, err := net.Dial("tcp", "10.255.255.53:53")
		if err == nil {
			c.Close()
		}
		return err
	})
	if !errors.Is(err, syscall.ENETUNREACH) {
		t.Errorf("pod dialling 10.255.255.53: %v, want network unreachable", err)
	}
}
