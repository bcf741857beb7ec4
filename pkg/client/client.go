// Package client is the Go client of the Xaalis API.
//
//	c := client.New("sk_test_...", client.WithBaseURL("http://localhost:8080"))
//	p, err := c.Payments.Create(ctx, &client.PaymentParams{
//		MerchantRef: "ORDER-42", Amount: 5000, Provider: client.ProviderChannelA,
//		Payer: &client.Payer{Phone: "+221771234567"},
//		SuccessURL: "https://shop.example/ok", FailedURL: "https://shop.example/ko",
//	})
//
// There is a service per resource (c.Payments, c.Payouts, c.Refunds,
// c.PayoutRequests, c.Balance, c.Settlements, c.Disputes, c.Splits,
// c.Subscriptions, c.Plans, c.Customers, c.WebhookEndpoints, c.Events,
// c.Providers), with typed parameters and records. Amounts are typed as
// the API types them: whole units (int64) in requests, decimal strings
// with two decimals on records ("5000.00"), exact JSON numbers
// (json.Number) on the balance. No float ever holds an amount.
//
// Every call that changes something sends an Idempotency-Key: one per
// logical call (a random UUID, or the one given with IdempotencyKey),
// reused by each of its retries, so a retried call acts at most once.
// Calls are retried after a network error, a 5xx or a 429, honouring
// Retry-After, with jittered exponential backoff, at most MaxRetries
// times (WithMaxRetries). A 409 met on a retry, or one whose Retry-After
// says the key's request is still running (the transport may send a
// request again at once when its connection closes), is retried too.
//
// An API error is a *Error with the HTTP status, the code, the message,
// the context, the field errors and the request id:
//
//	var e *client.Error
//	if errors.As(err, &e) && e.Code == client.CodeInsufficientBalance { ... }
//
// Lists are iterators over every page (iter.Seq2), and Listen consumes
// the event stream (GET /v1/events/stream). Webhook deliveries are
// verified with github.com/xaalis/xaalis/pkg/webhook.
//
// The package depends on the standard library and pkg/webhook only.
package client

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultBaseURL is where New sends requests unless told otherwise: the
// server `xaalis serve` runs by default.
const DefaultBaseURL = "http://localhost:8080"

// Retry defaults.
const (
	DefaultMaxRetries = 3
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 8 * time.Second
	// MaxRetryAfter is the longest Retry-After a call waits for; a longer
	// one ends the call with the error.
	MaxRetryAfter = time.Minute
)

// Client calls the Xaalis API with one API key. It is safe for concurrent
// use.
type Client struct {
	key        string
	base       string
	http       *http.Client
	maxRetries int
	minBackoff time.Duration
	maxBackoff time.Duration
	userAgent  string
	sleep      func(context.Context, time.Duration) error

	Payments         *PaymentService
	Payouts          *PayoutService
	Refunds          *RefundService
	PayoutRequests   *PayoutRequestService
	Balance          *BalanceService
	Settlements      *SettlementService
	Disputes         *DisputeService
	Splits           *SplitService
	Subscriptions    *SubscriptionService
	Plans            *PlanService
	Customers        *CustomerService
	WebhookEndpoints *WebhookEndpointService
	Events           *EventService
	Providers        *ProviderService
}

// Option configures a Client.
type Option func(*Client)

// WithBaseURL sets the API's address (DefaultBaseURL otherwise), without
// the /v1 prefix.
func WithBaseURL(u string) Option {
	return func(c *Client) { c.base = strings.TrimRight(u, "/") }
}

// WithHTTPClient sets the HTTP client (one with a 60 s timeout otherwise).
// Listen uses it too, so its timeout must not cut a stream: Listen drops
// the client's Timeout.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithMaxRetries sets how many times a call is retried (DefaultMaxRetries;
// 0: the client retries nothing). Go's http.Transport may still send a
// request again at once, on its own, when a kept-alive connection closes
// before any answer: the request carries its Idempotency-Key, so the
// server runs it once.
func WithMaxRetries(n int) Option { return func(c *Client) { c.maxRetries = max(n, 0) } }

// WithBackoff sets the first wait between retries and the longest; each
// retry waits a random time between a backoff that starts at the first and
// doubles at each retry, and twice that backoff, up to the longest.
func WithBackoff(min, max time.Duration) Option {
	return func(c *Client) { c.minBackoff, c.maxBackoff = min, max }
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client that authenticates with key (sk_test_..., sk_live_...,
// or a publishable key for the calls those may make).
func New(key string, opts ...Option) *Client {
	c := &Client{key: key, base: DefaultBaseURL, http: &http.Client{Timeout: 60 * time.Second},
		maxRetries: DefaultMaxRetries, minBackoff: DefaultMinBackoff, maxBackoff: DefaultMaxBackoff,
		userAgent: "xaalis-go/1", sleep: sleepCtx}
	for _, o := range opts {
		o(c)
	}
	c.Payments = &PaymentService{c}
	c.Payouts = &PayoutService{c}
	c.Refunds = &RefundService{c}
	c.PayoutRequests = &PayoutRequestService{c}
	c.Balance = &BalanceService{c}
	c.Settlements = &SettlementService{c}
	c.Disputes = &DisputeService{c}
	c.Splits = &SplitService{c}
	c.Subscriptions = &SubscriptionService{c}
	c.Plans = &PlanService{c}
	c.Customers = &CustomerService{c}
	c.WebhookEndpoints = &WebhookEndpointService{c}
	c.Events = &EventService{c}
	c.Providers = &ProviderService{c}
	return c
}

// Livemode reports whether the client's key is a live key, from its prefix.
func (c *Client) Livemode() bool { return strings.Contains(c.key, "_live_") }

// Error is an answer of the API in its error envelope.
type Error struct {
	// HTTPStatus is the answer's status (401, 422, 503, ...).
	HTTPStatus int
	// Code is the error's code (validation_error, ...).
	Code ErrorCode
	// Message explains it; it may change, do not parse it.
	Message string
	// Context holds the code's structured data (context.required_scope,
	// ...); its numbers are json.Number, exact (context.required of
	// insufficient_balance is "1010000", never 1.01e+06).
	Context map[string]any
	// Errors maps field names to messages, for validation_error.
	Errors map[string][]string
	// DocumentationURL is https://docs.xaalis.dev/errors#<code>.
	DocumentationURL string
	// RequestID is the answer's X-Request-Id: quote it when reporting.
	RequestID string
	// RetryAfter is the answer's Retry-After, 0 without one.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "xaalis: %d %s: %s", e.HTTPStatus, e.Code, e.Message)
	for f, msgs := range e.Errors {
		fmt.Fprintf(&b, "; %s: %s", f, strings.Join(msgs, ", "))
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request %s)", e.RequestID)
	}
	return b.String()
}

// errorEnvelope is the contract's ErrorEnvelope.
type errorEnvelope struct {
	Error *errorObject `json:"error"`
}

type errorObject struct {
	Code             ErrorCode           `json:"code"`
	Message          string              `json:"message"`
	Context          map[string]any      `json:"context,omitempty"`
	DocumentationURL string              `json:"documentation_url"`
	Errors           map[string][]string `json:"errors,omitempty"`
}

// RequestOption changes one call.
type RequestOption func(*request)

// IdempotencyKey sets the Idempotency-Key of a call that changes
// something (a random one otherwise): give your own to make a call safe
// to repeat across restarts of your program.
func IdempotencyKey(k string) RequestOption { return func(r *request) { r.idem = k } }

type request struct {
	method, path string
	query        url.Values
	body         any
	idem         string
	header       http.Header
	// changesNothing: a POST that writes nothing (the payment precheck)
	// takes no Idempotency-Key.
	changesNothing bool
}

// newIdempotencyKey is a random UUID (version 4).
func newIdempotencyKey() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// call sends one logical call, retrying it, and decodes the answer's body
// into out (when not nil).
func (c *Client) call(ctx context.Context, r *request, out any, opts []RequestOption) error {
	for _, o := range opts {
		o(r)
	}
	var body []byte
	if r.body != nil {
		var err error
		if body, err = json.Marshal(r.body); err != nil {
			return fmt.Errorf("xaalis: encode request: %w", err)
		}
	}
	mutating := r.method != http.MethodGet && r.method != http.MethodHead
	if mutating && r.idem == "" && !r.changesNothing {
		r.idem = newIdempotencyKey() // one for every attempt of this call
	}
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	backoff := c.minBackoff
	for attempt := 0; ; attempt++ {
		res, err := c.send(ctx, r, u, body)
		var wait time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			err = fmt.Errorf("xaalis: %s %s: %w", r.method, r.path, err)
		default:
			err = decodeAnswer(res, out)
			var e *Error
			if !errors.As(err, &e) {
				return err
			}
			retryable := e.HTTPStatus >= 500 || e.HTTPStatus == http.StatusTooManyRequests ||
				// Our own earlier attempt still running on the server: met
				// on a retry, or on the first attempt when the transport
				// sent it again at once (a kept-alive connection closed
				// before any answer), which the server's Retry-After on an
				// in-flight 409 tells from a key used with another request.
				e.HTTPStatus == http.StatusConflict && mutating && (attempt > 0 || e.RetryAfter > 0)
			if !retryable {
				return err
			}
			if e.RetryAfter > MaxRetryAfter {
				return err
			}
			wait = e.RetryAfter
		}
		if attempt >= c.maxRetries {
			return err
		}
		// A jittered wait within the bounds, at least Retry-After.
		d := c.jittered(backoff)
		backoff = min(backoff*2, c.maxBackoff)
		if err := c.sleep(ctx, max(d, wait)); err != nil {
			return err
		}
	}
}

// jittered is a random wait between backoff and twice backoff, within the
// longest (backoff starts at WithBackoff's first and doubles at each
// retry): clients that failed together do not come back together, the
// first retry included, and none comes back sooner than the first wait.
func (c *Client) jittered(backoff time.Duration) time.Duration {
	lo := min(backoff, c.maxBackoff)
	hi := min(2*backoff, c.maxBackoff)
	return lo + time.Duration(rand.Int64N(int64(hi-lo)+1))
}

// send makes one attempt.
func (c *Client) send(ctx context.Context, r *request, u string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("User-Agent", c.userAgent)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.idem != "" {
		req.Header.Set("Idempotency-Key", r.idem)
	}
	return c.http.Do(req)
}

// decodeAnswer reads an answer: a 2xx into out, anything else into *Error.
func decodeAnswer(res *http.Response, out any) error {
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("xaalis: read answer: %w", err)
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		if out == nil {
			return nil
		}
		if err := decodeJSON(b, out); err != nil {
			return fmt.Errorf("xaalis: decode answer: %w", err)
		}
		return nil
	}
	e := &Error{HTTPStatus: res.StatusCode, RequestID: res.Header.Get("X-Request-Id")}
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s >= 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	var env errorEnvelope
	if decodeJSON(b, &env) == nil && env.Error != nil {
		o := env.Error
		e.Code, e.Message, e.Context, e.Errors, e.DocumentationURL = o.Code, o.Message, o.Context, o.Errors, o.DocumentationURL
	} else {
		e.Code, e.Message = CodeAPIError, strings.TrimSpace(string(b))
		if e.Message == "" {
			e.Message = http.StatusText(res.StatusCode)
		}
	}
	return e
}

// decodeJSON decodes an answer with the numbers of its free-form parts
// (an error's context: amounts, limits) as json.Number, exact: no float
// ever holds an amount.
func decodeJSON(b []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(out)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// envelope is a single record's answer: {"data", "livemode"}.
type envelope[T any] struct {
	Data     T    `json:"data"`
	Livemode bool `json:"livemode"`
}

// listEnvelope is a list's answer: {"data", "pagination", "livemode"}.
type listEnvelope[T any] struct {
	Data       []T        `json:"data"`
	Pagination Pagination `json:"pagination"`
	Livemode   bool       `json:"livemode"`
}

// get reads one record.
func get[T any](ctx context.Context, c *Client, path string, opts []RequestOption) (*T, error) {
	var env envelope[*T]
	if err := c.call(ctx, &request{method: http.MethodGet, path: path}, &env, opts); err != nil {
		return nil, err
	}
	return env.Data, nil
}

// post sends a command and reads the record it answers.
func post[T any](ctx context.Context, c *Client, method, path string, body any, opts []RequestOption) (*T, error) {
	var env envelope[*T]
	if err := c.call(ctx, &request{method: method, path: path, body: body}, &env, opts); err != nil {
		return nil, err
	}
	return env.Data, nil
}

// all reads a one-page list whole.
func all[T any](ctx context.Context, c *Client, path string, q url.Values, opts []RequestOption) ([]*T, error) {
	var env listEnvelope[*T]
	if err := c.call(ctx, &request{method: http.MethodGet, path: path, query: q}, &env, opts); err != nil {
		return nil, err
	}
	return env.Data, nil
}

// pathf builds a path, escaping each argument.
func pathf(format string, ids ...string) string {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = url.PathEscape(id)
	}
	return fmt.Sprintf(format, args...)
}
