package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/testutil"
	"github.com/xaalis/xaalis/internal/xaalis"
	"github.com/xaalis/xaalis/pkg/client"
	"github.com/xaalis/xaalis/pkg/webhook"
)

func paymentParams(ref, phone string) *client.PaymentParams {
	return &client.PaymentParams{MerchantRef: ref, Amount: 5000, Provider: client.ProviderChannelA,
		Payer: &client.Payer{Phone: phone, Name: "Awa Ndiaye"}, SuccessURL: "https://shop.example/ok", FailedURL: "https://shop.example/ko",
		Metadata: map[string]any{"order_id": ref, "items": 2}}
}

func fast(s *server, key string, opts ...client.Option) *client.Client {
	return client.New(key, append([]client.Option{client.WithBaseURL(s.srv.URL), client.WithBackoff(time.Millisecond, 10*time.Millisecond)}, opts...)...)
}

func TestPaymentsAndErrors(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *server) {
		ctx := context.Background()
		c := fast(s, s.keys.SecretTest)
		p, err := c.Payments.Create(ctx, paymentParams("cl-1", provider.TestPhoneSuccess))
		if err != nil {
			t.Fatal(err)
		}
		if p.Object != "transaction" || p.Type != "payment" || p.Status != client.StatusSuccess || p.Amount != "5000.00" ||
			p.Currency != client.XOF || *p.Provider != client.ProviderChannelA || *p.MerchantRef != "cl-1" || p.Livemode ||
			p.Metadata["items"] != "2" || *p.Payer.Phone != provider.TestPhoneSuccess || p.CreatedAt.IsZero() {
			t.Fatalf("payment %+v", p)
		}
		got, err := c.Payments.Get(ctx, p.ID)
		if err != nil || got.ID != p.ID || got.Reference != p.Reference {
			t.Fatalf("get: %+v %v", got, err)
		}
		if st, err := c.Payments.Status(ctx, "cl-1"); err != nil || st.ID != p.ID {
			t.Fatalf("status: %+v %v", st, err)
		}
		bal, err := c.Balance.Get(ctx)
		if err != nil || bal.Available.String() != "4950" || bal.Currency != client.XOF {
			t.Fatalf("balance %+v %v", bal, err)
		}

		// Errors are *client.Error with everything the envelope says.
		_, err = c.Payments.Create(ctx, &client.PaymentParams{MerchantRef: "cl-bad", Amount: 5000})
		var e *client.Error
		if !errors.As(err, &e) || e.HTTPStatus != 422 || e.Code != client.CodeValidationError || len(e.Errors["success_url"]) == 0 ||
			!strings.HasPrefix(e.RequestID, "req_") || e.DocumentationURL != "https://docs.xaalis.dev/errors#validation_error" {
			t.Fatalf("validation error: %#v", err)
		}
		_, err = c.Payments.Create(ctx, &client.PaymentParams{MerchantRef: "cl-zero", Amount: 0, SuccessURL: "https://a.example/", FailedURL: "https://a.example/"})
		if !errors.As(err, &e) || e.Code != client.CodeAmountMustBePositive {
			t.Fatalf("zero amount: %v", err)
		}
		_, err = c.Payouts.Create(ctx, &client.PayoutParams{MerchantRef: "po-1", Amount: 1_000_000, Provider: client.ProviderChannelA,
			Recipient: client.PayoutRecipient{Phone: provider.TestPhoneSuccess}})
		if !errors.As(err, &e) || e.Code != client.CodeInsufficientBalance || e.Context["currency"] != "XOF" {
			t.Fatalf("insufficient balance: %v", err)
		}
		// A context's amounts are exact json.Numbers, never floats.
		if req, ok := e.Context["required"].(json.Number); !ok || req.String() == "" || strings.ContainsAny(req.String(), "e.") {
			t.Fatalf("context.required = %#v (%T), want an exact json.Number", e.Context["required"], e.Context["required"])
		}
		_, err = c.Payments.Get(ctx, xaalis.NewUUIDv7())
		if !errors.As(err, &e) || e.HTTPStatus != 404 || e.Code != client.CodeNotFound {
			t.Fatalf("not found: %v", err)
		}
		_, err = fast(s, "sk_test_nope").Balance.Get(ctx)
		if !errors.As(err, &e) || e.HTTPStatus != 401 || e.Code != client.CodeInvalidAPIKey {
			t.Fatalf("bad key: %v", err)
		}
		_, err = fast(s, s.keys.PublishableTest).Balance.Get(ctx)
		if !errors.As(err, &e) || e.HTTPStatus != 403 || e.Code != client.CodeForbidden || !strings.Contains(e.Error(), "forbidden") {
			t.Fatalf("publishable key: %v", err)
		}

		// A payout, a refund, a plan, a webhook endpoint: the other services.
		po, err := c.Payouts.Create(ctx, &client.PayoutParams{MerchantRef: "po-2", Amount: 1000, Provider: client.ProviderChannelA,
			Recipient: client.PayoutRecipient{Phone: provider.TestPhoneSuccess}})
		if err != nil || po.Type != "payout" || po.FeeAmount == nil {
			t.Fatalf("payout %+v %v", po, err)
		}
		rf, err := c.Refunds.Create(ctx, &client.RefundParams{TransactionID: p.ID, Amount: 1000, Reason: "damaged"})
		if err != nil || rf.Type != "refund" || *rf.PaymentID != p.ID {
			t.Fatalf("refund %+v %v", rf, err)
		}
		pl, err := c.Plans.Create(ctx, &client.PlanParams{Name: "Gold", Amount: 5000, Interval: client.IntervalMonth})
		if err != nil || pl.Amount != "5000.00" || !pl.Active {
			t.Fatalf("plan %+v %v", pl, err)
		}
		custs := 0
		for cu, err := range c.Customers.List(ctx, nil) {
			if err != nil || cu.Phone == "" {
				t.Fatal(cu, err)
			}
			custs++
		}
		sub, err := c.Subscriptions.Create(ctx, &client.SubscriptionParams{PlanID: pl.ID, CustomerID: *p.CustomerID})
		if err != nil || sub.Status != client.SubscriptionActive {
			t.Fatalf("subscription %+v %v", sub, err)
		}
		if provs, err := c.Providers.List(ctx, client.CountrySN); err != nil || len(provs) != 3 {
			t.Fatalf("providers %v %v", provs, err)
		}
		ls, err := c.WebhookEndpoints.ListenSecret(ctx)
		if err != nil || !strings.HasPrefix(ls.Secret, "whsec_") {
			t.Fatalf("listen secret %+v %v", ls, err)
		}
		n := 0
		for ev, err := range c.Events.List(ctx, &client.EventListParams{Type: "payment.success"}) {
			if err != nil || ev.Type != "payment.success" {
				t.Fatal(ev, err)
			}
			n++
		}
		if n != 1 || custs != 1 {
			t.Fatalf("%d payment.success events, %d customers", n, custs)
		}
	})
}

// faults answers the first attempts of POST /v1/payments itself, after
// (lost) or instead of (refused) the real server's answer, and records
// each attempt's Idempotency-Key.
type faults struct {
	mu     sync.Mutex
	plan   []string // per attempt: "forward", "503-after", "503-before", "429", "drop-after"
	keys   []string
	status []int
}

func (f *faults) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v1/payments" {
			h.ServeHTTP(w, r)
			return
		}
		f.mu.Lock()
		step := "forward"
		if len(f.plan) > 0 {
			step, f.plan = f.plan[0], f.plan[1:]
		}
		f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
		f.mu.Unlock()
		switch step {
		case "503-before":
			w.Header().Set("Retry-After", "0")
			http.Error(w, `{"error":{"code":"gateway_unavailable","message":"injected","documentation_url":"https://docs.xaalis.dev/errors#gateway_unavailable"}}`, 503)
			return
		case "429":
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"error":{"code":"too_many_requests","message":"injected","documentation_url":"https://docs.xaalis.dev/errors#too_many_requests"}}`, 429)
			return
		case "409-in-flight", "409-other":
			// The server's two 409s (internal/http's TestIdempotencyKeyClaimedAfterFirstLook
			// checks their headers): its own request still running, with
			// Retry-After: 1, and a key used with another request.
			if step == "409-in-flight" {
				w.Header().Set("Retry-After", "1")
			}
			http.Error(w, `{"error":{"code":"idempotency_conflict","message":"injected","documentation_url":"https://docs.xaalis.dev/errors#idempotency_conflict"}}`, 409)
			return
		case "503-after", "drop-after":
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r) // the payment is made; its answer is lost
			if step == "drop-after" {
				conn, _, _ := http.NewResponseController(w).Hijack()
				conn.Close()
				return
			}
			http.Error(w, "upstream timeout", 503)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		f.mu.Lock()
		f.status = append(f.status, rec.Code)
		f.mu.Unlock()
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
}

func countPayments(t *testing.T, c *client.Client) int {
	n := 0
	for _, err := range c.Payments.List(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// TestRetriesOneKey: a call's retries carry its one Idempotency-Key, so a
// payment whose answer was lost is made once.
func TestRetriesOneKey(t *testing.T) {
	for _, b := range testutil.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			f := &faults{}
			s := newServer(t, b.Open(t), f.wrap)
			ctx := context.Background()
			c := fast(s, s.keys.SecretTest)
			for i, plan := range [][]string{
				{"503-after", "forward"},                // made, answer lost: the retry replays it
				{"503-before", "503-before", "forward"}, // refused twice, then made
				{"drop-after", "forward"},               // made, connection dropped
				{"503-after", "503-after", "503-after"}, // still made once when every answer is lost
			} {
				f.mu.Lock()
				f.plan, f.keys, f.status = plan, nil, nil
				f.mu.Unlock()
				before := countPayments(t, c)
				p, err := c.Payments.Create(ctx, paymentParams(fmt.Sprint("retry-", i), provider.TestPhoneSuccess))
				if err != nil || p.Status != client.StatusSuccess {
					t.Fatalf("plan %v: %+v %v", plan, p, err)
				}
				if n := countPayments(t, c); n != before+1 {
					t.Fatalf("plan %v made %d payments", plan, n-before)
				}
				f.mu.Lock()
				keys := f.keys
				f.mu.Unlock()
				if len(keys) != len(plan)+boolInt(plan[len(plan)-1] != "forward") || keys[0] == "" || slices.ContainsFunc(keys, func(k string) bool { return k != keys[0] }) {
					t.Fatalf("plan %v: attempts with keys %v", plan, keys)
				}
			}
			// Two calls: two keys.
			f.mu.Lock()
			f.keys = nil
			f.mu.Unlock()
			c.Payments.Create(ctx, paymentParams("two-a", provider.TestPhoneSuccess))
			c.Payments.Create(ctx, paymentParams("two-b", provider.TestPhoneSuccess))
			if f.keys[0] == f.keys[1] {
				t.Fatal("two calls shared a key")
			}
			// A key of one's own is used as given.
			f.mu.Lock()
			f.keys = nil
			f.mu.Unlock()
			if _, err := c.Payments.Create(ctx, paymentParams("own", provider.TestPhoneSuccess), client.IdempotencyKey("order-own")); err != nil || f.keys[0] != "order-own" {
				t.Fatal(err, f.keys)
			}
			// 429 honours Retry-After.
			f.mu.Lock()
			f.plan = []string{"429", "forward"}
			f.mu.Unlock()
			start := time.Now()
			if _, err := c.Payments.Create(ctx, paymentParams("rate", provider.TestPhoneSuccess)); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d < time.Second {
				t.Fatalf("retried after %v, before Retry-After", d)
			}
			// A 409 on the first attempt whose Retry-After says the key's
			// request still runs (the transport sent it again at once) is
			// retried; one without (a key used with another request) is
			// not.
			f.mu.Lock()
			f.plan, f.keys = []string{"409-in-flight", "forward"}, nil
			f.mu.Unlock()
			if p, err := c.Payments.Create(ctx, paymentParams("in-flight", provider.TestPhoneSuccess)); err != nil || p.Status != client.StatusSuccess || len(f.keys) != 2 {
				t.Fatalf("409 in flight: %+v %v after %d attempts", p, err, len(f.keys))
			}
			f.mu.Lock()
			f.plan, f.keys = []string{"409-other", "forward"}, nil
			f.mu.Unlock()
			if _, err := c.Payments.Create(ctx, paymentParams("other", provider.TestPhoneSuccess)); !errors.As(err, new(*client.Error)) || len(f.keys) != 1 {
				t.Fatalf("409 of another request: %v after %d attempts", err, len(f.keys))
			}
			f.mu.Lock()
			f.plan = nil
			f.mu.Unlock()
			// The bound: every attempt refused ends with the last error.
			f.mu.Lock()
			f.plan, f.keys = []string{"503-before", "503-before", "503-before"}, nil
			f.mu.Unlock()
			_, err := fast(s, s.keys.SecretTest, client.WithMaxRetries(2)).Payments.Create(ctx, paymentParams("bound", provider.TestPhoneSuccess))
			var e *client.Error
			if !errors.As(err, &e) || e.HTTPStatus != 503 || e.Code != client.CodeGatewayUnavailable || len(f.keys) != 3 {
				t.Fatalf("bounded: %v after %d attempts", err, len(f.keys))
			}
			// A 4xx is not retried.
			f.mu.Lock()
			f.keys = nil
			f.mu.Unlock()
			if _, err := c.Payments.Create(ctx, &client.PaymentParams{MerchantRef: "nope"}); err == nil || len(f.keys) != 1 {
				t.Fatalf("4xx: %v, %d attempts", err, len(f.keys))
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestPagination(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *server) {
		ctx := context.Background()
		c := fast(s, s.keys.SecretTest)
		var want []string
		for i := range 23 {
			pl, err := c.Plans.Create(ctx, &client.PlanParams{Name: fmt.Sprint("Plan ", i), Amount: int64(1000 + i), Interval: client.IntervalWeek})
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, pl.ID)
		}
		slices.Reverse(want) // newest first
		var got []string
		for pl, err := range c.Plans.List(ctx, &client.PlanListParams{ListParams: client.ListParams{PerPage: 10}}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, pl.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("listed %d plans %v, want %d", len(got), got, len(want))
		}
		// Starting at a page; stopping early.
		got = nil
		for pl := range c.Plans.List(ctx, &client.PlanListParams{ListParams: client.ListParams{PerPage: 10, Page: 3}}) {
			got = append(got, pl.ID)
		}
		if !slices.Equal(got, want[20:]) {
			t.Fatalf("from page 3: %v", got)
		}
		n := 0
		for range c.Plans.List(ctx, nil) {
			if n++; n == 5 {
				break
			}
		}
		// An error is yielded, then the iteration ends.
		errs := 0
		for pl, err := range fast(s, "sk_test_nope").Plans.List(ctx, nil) {
			if err == nil || pl != nil {
				t.Fatal("no error")
			}
			errs++
		}
		if errs != 1 {
			t.Fatalf("%d errors", errs)
		}
	})
}

// TestListen: Listen yields the new events; cut off, it resumes after the
// last one with nothing missed or repeated.
func TestListen(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *server) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := fast(s, s.keys.SecretTest)
		events := make(chan *client.StreamEvent, 100)
		connected := make(chan string, 10)
		var drops int
		var mu sync.Mutex
		done := make(chan error, 1)
		go func() {
			for ev, err := range c.Listen(ctx, &client.ListenParams{Types: []string{"payment.*"},
				OnConnect:    func(after string) { connected <- after },
				OnDisconnect: func(error) { mu.Lock(); drops++; mu.Unlock() }}) {
				if err != nil {
					done <- err
					return
				}
				events <- ev
			}
			done <- nil
		}()
		<-connected
		next := func() *client.StreamEvent {
			select {
			case ev := <-events:
				return ev
			case <-time.After(10 * time.Second):
				t.Fatal("no event")
				return nil
			}
		}
		p, err := c.Payments.Create(ctx, paymentParams("ls-1", provider.TestPhoneSuccess))
		if err != nil {
			t.Fatal(err)
		}
		first := next()
		wev, err := first.Parse()
		if err != nil || first.Type != "payment.success" || wev.ID != first.ID || !strings.Contains(string(wev.Data), p.ID) {
			t.Fatalf("event %+v %+v %v", first, wev, err)
		}
		// The stream is cut; events happen meanwhile.
		s.srv.CloseClientConnections()
		var want []string
		for i := range 3 {
			p, err := c.Payments.Create(ctx, paymentParams(fmt.Sprint("ls-gap-", i), provider.TestPhoneFailed))
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, p.ID)
		}
		if after := <-connected; after != first.ID {
			t.Fatalf("resumed after %q, want %q", after, first.ID)
		}
		var got []string
		for range want {
			ev := next()
			we, _ := webhook.Parse(ev.Data)
			if ev.Type != "payment.failed" || we == nil {
				t.Fatalf("event %+v", ev)
			}
			for _, id := range want {
				if strings.Contains(string(we.Data), id) {
					got = append(got, id)
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("after the cut: %v, want %v", got, want)
		}
		select {
		case ev := <-events:
			t.Fatalf("one event too many: %+v", ev)
		case <-time.After(200 * time.Millisecond):
		}
		mu.Lock()
		if drops < 1 {
			t.Fatal("no disconnection seen")
		}
		mu.Unlock()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// A filter the server refuses ends Listen with the error.
		for _, err := range c.Listen(context.Background(), &client.ListenParams{Types: []string{"nope"}}) {
			var e *client.Error
			if !errors.As(err, &e) || e.Code != client.CodeValidationError {
				t.Fatalf("bad filter: %v", err)
			}
		}
	})
}

// TestPrecheck: Payments.Precheck reads the verdicts, per provider and for
// the payer, sends no Idempotency-Key and creates nothing.
func TestPrecheck(t *testing.T) {
	for _, b := range testutil.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var sent []string
			s := newServer(t, b.Open(t), func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/v1/payments/precheck" {
						mu.Lock()
						sent = append(sent, r.Header.Get("Idempotency-Key"))
						mu.Unlock()
					}
					h.ServeHTTP(w, r)
				})
			})
			ctx := context.Background()
			c := fast(s, s.keys.SecretTest)
			// 300 XOF is below channel_c's floor (500) only.
			pre, err := c.Payments.Precheck(ctx, &client.PaymentParams{Amount: 300, Payer: &client.Payer{Phone: "77 123 45 67"}})
			if err != nil {
				t.Fatal(err)
			}
			if !pre.Allowed || pre.Object != "payment_precheck" || len(pre.Providers) != 3 {
				t.Fatalf("precheck %+v", pre)
			}
			for _, v := range pre.Providers {
				refused := v.Provider == client.ProviderChannelC
				if v.Allowed == refused || (refused && (len(v.Errors) != 1 || v.Errors[0].Code != client.CodeAmountBelowProviderMinimum ||
					v.Errors[0].Context["provider"] != "channel_c" || v.Errors[0].Message == "")) {
					t.Fatalf("%s: %+v", v.Provider, v)
				}
			}
			if p := pre.Payer; p == nil || p.Phone != "+221771234567" || p.Country != client.CountrySN || p.Tier != 1 ||
				p.CeilingRemaining == nil || *p.CeilingRemaining != "2000000.00" || p.Currency != client.XOF {
				t.Fatalf("payer %+v", pre.Payer)
			}
			mu.Lock()
			if len(sent) != 1 || sent[0] != "" {
				t.Fatalf("Idempotency-Key sent: %q", sent)
			}
			mu.Unlock()
			if n := countPayments(t, c); n != 0 {
				t.Fatalf("%d payments after a precheck", n)
			}
			var e *client.Error
			_, err = fast(s, s.keys.PublishableTest).Payments.Precheck(ctx, &client.PaymentParams{Amount: 300})
			if !errors.As(err, &e) || e.HTTPStatus != 403 || e.Code != client.CodeForbidden {
				t.Fatalf("publishable key: %v", err)
			}
			_, err = c.Payments.Precheck(ctx, &client.PaymentParams{Amount: 0})
			if !errors.As(err, &e) || e.HTTPStatus != 422 || e.Code != client.CodeAmountMustBePositive {
				t.Fatalf("zero amount: %v", err)
			}
		})
	}
}

// TestListenResumesFromIDOnly: a message of an id alone (the server's
// resume point, sent before any event) is where Listen resumes from when
// the stream drops, although no event came.
func TestListenResumesFromIDOnly(t *testing.T) {
	var conns atomic.Int32
	resumed := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if conns.Add(1) == 1 {
			// Connected, a resume point, then dropped.
			fmt.Fprint(w, "retry: 2000\n: connected\n\nid: ev-anchor\n\n")
			return
		}
		resumed <- r.Header.Get("Last-Event-ID")
		fmt.Fprint(w, ": connected\n\nid: ev-2\nevent: payment.success\ndata: {}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	c := client.New("sk_test_x", client.WithBaseURL(srv.URL), client.WithBackoff(time.Millisecond, 10*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ev, err := range c.Listen(ctx, nil) {
		if err != nil || ev.ID != "ev-2" || ev.Type != "payment.success" {
			t.Fatalf("event %+v, %v", ev, err)
		}
		break
	}
	if got := <-resumed; got != "ev-anchor" {
		t.Fatalf("reconnected with Last-Event-ID %q, want ev-anchor", got)
	}
}
