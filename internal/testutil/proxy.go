package testutil

import (
	"io"
	"net"
	"sync"
	"testing"
)

// CutProxy forwards TCP connections to a target until Cut closes every
// connection and refuses new ones (as a database that went away), and
// Resume lets them through again.
type CutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	paused bool
}

// NewCutProxy listens on loopback and forwards to target.
func NewCutProxy(t testing.TB, target string) *CutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &CutProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.Cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			paused := p.paused
			if !paused {
				p.conns = append(p.conns, c)
			}
			p.mu.Unlock()
			if paused {
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

// Addr is the proxy's host:port.
func (p *CutProxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection and refuses new ones until Resume.
func (p *CutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Resume lets connections through again.
func (p *CutProxy) Resume() {
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
}
