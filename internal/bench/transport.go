package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"syscall"
	"time"
)

// connTransport is the generator's HTTP/1.1 round tripper for http://
// targets: a request is written and its answer read in full by the
// goroutine that sends it, on a keep-alive connection it holds alone for
// the round trip. net/http's Transport hands every request to a
// connection's write goroutine and every answer back from its read
// goroutine: with the server's own two, six goroutine hand-offs a
// request, each waiting for one of the CPUs the generator shares with the
// server. Measured on status, open loop at 9,000 req/s in alternated
// runs: p99 14.3 and 12.3 ms with net/http's Transport, 11.7 and 7.9 ms
// with this one. Only the client side changes; the server is driven
// through its real listener as before, and latency is still taken by the
// caller.
type connTransport struct {
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle int
	// idle holds the keep-alive connections of each host:port. One pool
	// for all sent a request to whichever server an idle connection led
	// to: after the scenarios, floor-http measured again was answered by
	// the API (429, 46,017 times).
	mu   sync.Mutex
	idle map[string]chan *benchConn
	// fallback carries what this transport does not: https:// targets.
	fallback http.RoundTripper
}

type benchConn struct {
	c  net.Conn
	br *bufio.Reader
	bw *bufio.Writer
	// idle is the pool of the connection's host:port.
	idle chan *benchConn
}

func newConnTransport(dial func(ctx context.Context, network, addr string) (net.Conn, error), maxIdle int, fallback http.RoundTripper) *connTransport {
	return &connTransport{dial: dial, maxIdle: maxIdle, idle: map[string]chan *benchConn{}, fallback: fallback}
}

// pool returns the idle connections to addr (host:port).
func (t *connTransport) pool(addr string) chan *benchConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.idle[addr]
	if !ok {
		p = make(chan *benchConn, t.maxIdle)
		t.idle[addr] = p
	}
	return p
}

// CloseIdleConnections closes the keep-alive connections of every pool and
// the fallback's: http.Client.CloseIdleConnections, which runBench defers,
// calls it.
func (t *connTransport) CloseIdleConnections() {
	t.mu.Lock()
	pools := slices.Collect(maps.Values(t.idle))
	t.mu.Unlock()
	for _, p := range pools {
		for drained := false; !drained; {
			select {
			case bc := <-p:
				bc.c.Close()
			default:
				drained = true
			}
		}
	}
	if c, ok := t.fallback.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip sends req and returns its answer with the body already read:
// the connection is back in the pool (or closed) when it returns. A reused
// connection the server had closed while idle fails before any byte of an
// answer; the request then goes once more on a new connection, as
// net/http's Transport retries it.
func (t *connTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" {
		return t.viaFallback(req)
	}
	for attempt := 0; ; attempt++ {
		bc, reused, err := t.get(req.Context(), req.URL)
		if err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, err
		}
		resp, answered, err := t.exchange(req, bc)
		if err == nil {
			return resp, nil
		}
		bc.c.Close()
		if !reused || answered || attempt > 0 || req.Context().Err() != nil || !retriable(err) || !replayable(req) {
			return nil, err
		}
		if req.GetBody != nil {
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

// requestTimeout bounds a round trip whose context has no deadline.
const requestTimeout = 30 * time.Second

// viaFallback sends req through the fallback, within requestTimeout, and
// reads its answer in full before the timeout's context ends.
func (t *connTransport) viaFallback(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), requestTimeout)
	defer cancel()
	resp, err := t.fallback.RoundTrip(req.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	if err := bufferBody(resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// bufferedBody is an answer's body already read in full; readBody takes
// its bytes as they are rather than copying them again.
type bufferedBody struct {
	*bytes.Reader
	b []byte
}

func (bufferedBody) Close() error { return nil }

// bufferBody reads resp's body in full and puts it back as a
// bufferedBody.
func bufferBody(resp *http.Response) error {
	b, err := readBody(resp)
	resp.Body.Close()
	if err != nil {
		return err
	}
	resp.Body = bufferedBody{bytes.NewReader(b), b}
	return nil
}

// replayable reports whether req may go twice, as net/http's Transport
// judges it: a server that closed the connection with no answer may have
// run it. A method without effects, or an Idempotency-Key, makes a second
// sending harmless.
func replayable(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return req.Header.Get("Idempotency-Key") != ""
}

// retriable reports whether err is how a write to, or a read from, a
// connection the server closed while idle fails.
func retriable(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func (t *connTransport) get(ctx context.Context, u *url.URL) (*benchConn, bool, error) {
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
	}
	addr := net.JoinHostPort(host, port)
	idle := t.pool(addr)
	select {
	case bc := <-idle:
		return bc, true, nil
	default:
	}
	c, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	return &benchConn{c: c, br: bufio.NewReaderSize(c, 16<<10), bw: bufio.NewWriterSize(c, 4<<10), idle: idle}, false, nil
}

// exchange writes req on bc and reads its answer in full. answered is
// true once any byte of an answer has arrived: the request then ran, and
// must not be sent again. On success bc is back in the pool, or closed;
// on an error the caller closes it.
func (t *connTransport) exchange(req *http.Request, bc *benchConn) (*http.Response, bool, error) {
	ctx := req.Context()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(requestTimeout)
	}
	if err := bc.c.SetDeadline(deadline); err != nil {
		return nil, false, err
	}
	// A cancelled context interrupts the round trip through the deadline;
	// no goroutine waits unless it is cancelled.
	stop := context.AfterFunc(ctx, func() { bc.c.SetDeadline(time.Unix(1, 0)) })
	resp, answered, err := roundTrip(req, bc)
	if !stop() {
		// The context ended during the round trip: its answer may be
		// cut, and the deadline set under it; the connection goes (the
		// caller closes it on any error).
		return nil, answered, ctx.Err()
	}
	if err != nil {
		return nil, answered, err
	}
	if resp.Close || req.Close {
		bc.c.Close()
		return resp, true, nil
	}
	select {
	case bc.idle <- bc:
	default:
		bc.c.Close()
	}
	return resp, true, nil
}

func roundTrip(req *http.Request, bc *benchConn) (*http.Response, bool, error) {
	if err := req.Write(bc.bw); err != nil {
		return nil, false, fmt.Errorf("write request: %w", err)
	}
	if err := bc.bw.Flush(); err != nil {
		return nil, false, fmt.Errorf("write request: %w", err)
	}
	if _, err := bc.br.Peek(1); err != nil {
		return nil, false, fmt.Errorf("read answer: %w", err)
	}
	resp, err := http.ReadResponse(bc.br, req)
	if err != nil {
		return nil, true, fmt.Errorf("read answer: %w", err)
	}
	if err := bufferBody(resp); err != nil {
		return nil, true, fmt.Errorf("read answer: %w", err)
	}
	return resp, true, nil
}
