package bench

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingServer counts the connections it accepted and the requests its
// handler saw.
func countingServer(t *testing.T, h http.HandlerFunc) (srv *httptest.Server, conns, calls *atomic.Int64) {
	t.Helper()
	conns, calls = new(atomic.Int64), new(atomic.Int64)
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		h(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, conns, calls
}

// A keep-alive connection the server closed while it was idle fails the
// next request before any answer: it goes again, once, on a new
// connection, with its body whole.
func TestConnTransportRetriesStaleConnection(t *testing.T) {
	srv, conns, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	})
	api := &API{Base: srv.URL, Client: NewHTTPClient(2)}
	for i, body := range []string{`{"n":1}`, `{"n":2}`} {
		if i == 1 {
			srv.CloseClientConnections()
		}
		rep, err := api.Do(context.Background(), "POST", "/echo", "k", "idem", []byte(body))
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		if string(rep.Body) != body {
			t.Errorf("request %d: answer %q, want %q", i+1, rep.Body, body)
		}
	}
	if c, n := calls.Load(), conns.Load(); c != 2 || n != 2 {
		t.Errorf("handler ran %d times on %d connections, want 2 on 2", c, n)
	}

	// A POST without an Idempotency-Key does not go again: the server
	// may have run it.
	srv.CloseClientConnections()
	if _, err := api.Do(context.Background(), "POST", "/echo", "k", "", []byte(`{"n":3}`)); err == nil {
		t.Error("a POST without an Idempotency-Key on a closed connection: want an error, not a second sending")
	}
	if c := calls.Load(); c != 2 {
		t.Errorf("handler ran %d times, want 2", c)
	}
}

// An answer cut after its first bytes means the request ran: it is not
// sent again.
func TestConnTransportNoRetryAfterAnswer(t *testing.T) {
	var n atomic.Int64
	srv, conns, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Write([]byte("whole"))
			return
		}
		c, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
		buf.Flush()
		c.Close()
	})
	api := &API{Base: srv.URL, Client: NewHTTPClient(2)}
	// The first answer puts its connection in the pool; the cut answer
	// then comes on that reused connection, where a failure before any
	// answer would be sent again.
	if rep, err := api.Do(context.Background(), "POST", "/", "k", "idem-1", []byte("{}")); err != nil || string(rep.Body) != "whole" {
		t.Fatalf("first answer %v, %v", rep, err)
	}
	if _, err := api.Do(context.Background(), "POST", "/", "k", "idem-2", []byte("{}")); err == nil {
		t.Fatal("a cut answer: want an error")
	}
	if c, k := calls.Load(), conns.Load(); c != 2 || k != 1 {
		t.Errorf("handler ran %d times on %d connections for 2 requests, want 2 on 1", c, k)
	}
}

// A cancelled context ends a round trip the server has not answered.
func TestConnTransportCancel(t *testing.T) {
	release := make(chan struct{})
	srv, _, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	api := &API{Base: srv.URL, Client: NewHTTPClient(2)}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := api.Do(ctx, "GET", "/", "k", "", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if code := transportError(err); code != "transport: cancelled" {
		t.Errorf("counted as %q", code)
	}
}

// An answer with Connection: close closes its connection: the next
// request opens another.
func TestConnTransportConnectionClose(t *testing.T) {
	srv, conns, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		w.Write([]byte("ok"))
	})
	api := &API{Base: srv.URL, Client: NewHTTPClient(2)}
	for range 3 {
		rep, err := api.Do(context.Background(), "GET", "/", "k", "", nil)
		if err != nil || string(rep.Body) != "ok" {
			t.Fatalf("answer %v, %v", rep, err)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("three answers with Connection: close used %d connections, want 3", n)
	}
}

// https:// goes through net/http's Transport: TLS is verified there (the
// test server's certificate is not trusted).
func TestConnTransportHTTPS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	api := &API{Base: srv.URL, Client: NewHTTPClient(2)}
	_, err := api.Do(context.Background(), "GET", "/", "k", "", nil)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("error %v, want a certificate error from TLS", err)
	}
}

// A round trip starts no goroutine of the client's: http.Client's Timeout
// would start one a request for a RoundTripper not net/http's own, and
// net/http's Transport hands each request to two of its own. The server
// (net/http's, in this process) starts one a request, its background read.
func TestConnTransportNoGoroutine(t *testing.T) {
	srv, _, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	api := &API{Base: srv.URL, Client: NewHTTPClient(2)}
	do := func() {
		if rep, err := api.Do(context.Background(), "GET", "/", "k", "", nil); err != nil || string(rep.Body) != "ok" {
			t.Fatalf("answer %v, %v", rep, err)
		}
	}
	do() // the connection
	const n = 200
	sample := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(sample)
	before := sample[0].Value.Uint64()
	for range n {
		do()
	}
	metrics.Read(sample)
	if per := float64(sample[0].Value.Uint64()-before) / n; per > 1.5 {
		t.Errorf("%.2f goroutines created a request, want the server's one", per)
	}
}

// A connection goes back to the pool of its own server: a request to
// another server is sent on a connection to that one. (With one pool for
// all, the second server's request went to the first.)
func TestConnTransportPoolPerServer(t *testing.T) {
	a, aConns, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "a") })
	b, bConns, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "b") })
	client := NewHTTPClient(4)
	for i, c := range []struct {
		srv  *httptest.Server
		want string
	}{{a, "a"}, {b, "b"}, {a, "a"}, {b, "b"}} {
		rep, err := (&API{Base: c.srv.URL, Client: client}).Do(context.Background(), "GET", "/", "k", "", nil)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		if string(rep.Body) != c.want {
			t.Errorf("request %d to server %s answered by server %s", i+1, c.want, rep.Body)
		}
	}
	if na, nb := aConns.Load(), bConns.Load(); na != 1 || nb != 1 {
		t.Errorf("%d and %d connections, want one kept alive to each server", na, nb)
	}
}

// CloseIdleConnections, which runBench defers on its client, closes the
// kept-alive connections: the server sees them go.
func TestConnTransportCloseIdle(t *testing.T) {
	var open atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	client := NewHTTPClient(4)
	if _, err := (&API{Base: srv.URL, Client: client}).Do(context.Background(), "GET", "/", "k", "", nil); err != nil {
		t.Fatal(err)
	}
	if n := open.Load(); n != 1 {
		t.Fatalf("%d connections open after a request, want the one kept alive", n)
	}
	client.CloseIdleConnections()
	for deadline := time.Now().Add(5 * time.Second); open.Load() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open after CloseIdleConnections", open.Load())
		}
	}
}
