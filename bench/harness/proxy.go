package harness

import (
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

// Proxy stands in for the webhook Service of an in-cluster deployment: the apiserver calls
// one fixed address and the proxy passes each TCP connection (TLS included, untouched) to one
// of the replicas currently in its backend set, round robin. A backend that refuses the
// connection is skipped in favour of the next one.
type Proxy struct {
	ln net.Listener

	mu       sync.Mutex
	backends []string
	next     int
	conns    map[net.Conn]struct{}
	closed   bool
}

// NewProxy listens on a free loopback port.
func NewProxy() (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

// Port is the port the proxy listens on.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Add puts addr into the backend set.
func (p *Proxy) Add(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Contains(p.backends, addr) {
		p.backends = append(p.backends, addr)
	}
}

// Remove takes addr out of the backend set; connections already passed to it stay open.
func (p *Proxy) Remove(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backends = slices.DeleteFunc(p.backends, func(b string) bool { return b == addr })
}

// Close stops listening and closes every proxied connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
}

func (p *Proxy) candidates() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.backends)
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, p.backends[(p.next+i)%n])
	}
	if n > 0 {
		p.next = (p.next + 1) % n
	}
	return out
}

func (p *Proxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		if p.closed {
			return false
		}
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *Proxy) handle(client net.Conn) {
	defer func() { _ = client.Close() }()
	var upstream net.Conn
	for _, addr := range p.candidates() {
		u, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			upstream = u
			break
		}
	}
	if upstream == nil {
		return
	}
	defer func() { _ = upstream.Close() }()
	if !p.track(client, true) || !p.track(upstream, true) {
		return
	}
	defer p.track(client, false)
	defer p.track(upstream, false)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(upstream, client)
	go pipe(client, upstream)
	<-done
	<-done
}
