package webhook

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	pw "github.com/xaalis/xaalis/pkg/webhook"
)

// DefaultTimeout is how long a receiver has to answer (spec: Delivery,
// 2xx within 15 seconds).
const DefaultTimeout = 15 * time.Second

// UserAgent is the User-Agent of deliveries.
const UserAgent = "Xaalis-Webhooks/1.0"

// maxAnswer is how much of a receiver's answer is read.
const maxAnswer = 64 << 10

// Sender posts webhook bodies.
type Sender struct {
	// Client sends; nil is a strict Policy's client with DefaultTimeout.
	Client *http.Client
	// UserAgent; empty is UserAgent.
	UserAgent string

	once   sync.Once
	client *http.Client
}

// SendError is a failed delivery attempt. Its message is what the
// delivery log shows as error_message: "timeout", "http 500",
// "connection failed: ...", "refused: <url rule>".
type SendError struct {
	// Status is the HTTP status of a non-2xx answer, 0 without an answer.
	Status int
	// Timeout: no answer in time.
	Timeout bool
	// Blocked: the policy refused the connection (Rule says why).
	Blocked bool
	Rule    string
	// Err is the underlying error, nil for a non-2xx answer.
	Err error
}

func (e *SendError) Error() string {
	switch {
	case e.Status != 0:
		return "http " + strconv.Itoa(e.Status)
	case e.Timeout:
		return "timeout"
	case e.Blocked:
		return "refused: " + e.Rule
	case e.Err != nil:
		return "connection failed: " + reason(e.Err)
	}
	return "connection failed"
}

func (e *SendError) Unwrap() error { return e.Err }

// reason is the innermost useful part of a transport error.
func reason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error() // "connect: connection refused", ...
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "connection closed without an answer"
	}
	return err.Error()
}

func (s *Sender) httpClient() *http.Client {
	if s.Client != nil {
		return s.Client
	}
	s.once.Do(func() { s.client = (&Policy{}).Client(DefaultTimeout) })
	return s.client
}

// Send posts body to url with the signature header. A 2xx answer is
// success: status is the answer's and err nil. Otherwise err is a
// *SendError: a non-2xx answer (status set), a timeout, a refused or lost
// connection. At most 64 KiB of the answer is read.
func (s *Sender) Send(ctx context.Context, url string, body []byte, signature string) (status int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, &SendError{Err: err}
	}
	ua := s.UserAgent
	if ua == "" {
		ua = UserAgent
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", ua)
	req.Header.Set(pw.Header, signature)
	resp, err := s.httpClient().Do(req)
	if err != nil {
		return 0, classifyErr(ctx, err)
	}
	// The answer only matters by its status; a slow body does not turn a
	// 2xx into a failure.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, &SendError{Status: resp.StatusCode}
	}
	return resp.StatusCode, nil
}

// SendSigned signs body with secrets at t (pkg/webhook.Sign: the
// X-Xaalis-Signature header, one v1 entry per secret) and posts it, as
// Send does. Every delivery goes through it, and so do the events
// `xaalis listen` forwards: what a receiver gets is the same either way.
func (s *Sender) SendSigned(ctx context.Context, url string, body []byte, secrets []string, t time.Time) (status int, err error) {
	return s.Send(ctx, url, body, pw.Sign(body, secrets, t))
}

func classifyErr(ctx context.Context, err error) *SendError {
	var be *BlockedError
	if errors.As(err, &be) {
		return &SendError{Blocked: true, Rule: be.Rule, Err: err}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &SendError{Timeout: true, Err: err}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &SendError{Timeout: true, Err: err}
	}
	return &SendError{Err: err}
}
