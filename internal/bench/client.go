package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// CheckLoopback refuses a target that is not on this machine's loopback:
// the host must be localhost, an address of 127.0.0.0/8, or ::1. The
// benchmark floods what it points at; it must never point elsewhere.
func CheckLoopback(target string) (*url.URL, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("target %q: %v", target, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("target %q: expected an http:// or https:// URL", target)
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("target %q: no host", target)
	}
	if !LoopbackHost(host) {
		return nil, fmt.Errorf("target %q: only loopback targets are allowed (localhost, 127.0.0.0/8, ::1)", target)
	}
	return u, nil
}

// LoopbackHost reports whether host is localhost or a loopback address
// (IPv4-mapped IPv6 forms of 127.0.0.0/8 included).
func LoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	if err != nil || a.Zone() != "" {
		return false
	}
	return a.Unmap().IsLoopback()
}

// loopbackOnly is a dialer Control that refuses any connection whose
// address is not loopback, whatever a name resolved to.
func loopbackOnly(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !ap.Addr().Unmap().IsLoopback() {
		return fmt.Errorf("bench: refusing to connect to %s: not a loopback address", address)
	}
	return nil
}

// NewHTTPClient returns a client for load: many keep-alive connections,
// no compression, loopback addresses only; http:// round trips run on the
// sending goroutine (connTransport).
func NewHTTPClient(maxConns int) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Control: loopbackOnly}
	tr := &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConns:        maxConns,
		MaxIdleConnsPerHost: maxConns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	// No Client.Timeout: for a RoundTripper that is not net/http's own, it
	// starts a goroutine a request to cancel it; connTransport keeps the
	// limit itself (requestTimeout).
	return &http.Client{Transport: newConnTransport(d.DialContext, maxConns, tr),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// API talks to one server as one merchant.
type API struct {
	Base   string
	Client *http.Client
	// Secret and Publishable are the merchant's test keys.
	Secret      string
	Publishable string
}

// Reply is an answer read in full.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// Code is the error code of an error envelope, or "".
func (r *Reply) Code() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(r.Body, &e) == nil {
		return e.Error.Code
	}
	return ""
}

// Do sends one request; idemKey "" sends no Idempotency-Key.
func (a *API) Do(ctx context.Context, method, path, key, idemKey string, body []byte) (*Reply, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.Base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := a.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := readBody(resp)
	if err != nil {
		return nil, err
	}
	return &Reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// readBody reads resp's body in full. With a Content-Length it reads into
// a buffer of that size: io.ReadAll starts at 512 bytes and doubles, three
// allocations and about 2 KB more for a payment's answer, on every request
// of a process whose collector the server shares. net/http's body returns
// io.EOF with its last bytes, so the connection still goes back to the
// pool (TestAPIDoReadsBody).
func readBody(resp *http.Response) ([]byte, error) {
	if bb, ok := resp.Body.(bufferedBody); ok && bb.Len() == len(bb.b) {
		return bb.b, nil // read by connTransport, not yet by anyone else
	}
	n := resp.ContentLength
	if n < 0 || n > 1<<20 {
		return io.ReadAll(resp.Body)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(resp.Body, b); err != nil {
		return nil, err
	}
	return b, nil
}

// outcome judges a reply: want is the successful status.
func outcome(kind string, rep *Reply, err error, want int) Outcome {
	if err != nil {
		return Outcome{Kind: kind, Code: transportError(err)}
	}
	if rep.Status == want {
		return Outcome{Kind: kind, OK: true, Status: rep.Status}
	}
	return Outcome{Kind: kind, Status: rep.Status, Code: rep.Code()}
}

// transportError names a transport failure briefly, so that errors of one
// cause are counted together.
func transportError(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "transport: cancelled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "transport: timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "transport: connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "transport: connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "transport: connection closed"
	}
	return "transport: " + err.Error()
}

// Data decodes the "data" member of a record envelope into v.
func (r *Reply) Data(v any) error {
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &env); err != nil {
		return err
	}
	return json.Unmarshal(env.Data, v)
}
