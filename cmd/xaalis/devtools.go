package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/xaalis/xaalis/internal/webhook"
	"github.com/xaalis/xaalis/internal/xaalis"
	"github.com/xaalis/xaalis/pkg/client"
)

// apiFlags adds --api-key and --api-base, defaulting to XAALIS_API_KEY and
// XAALIS_API_BASE (http://localhost:8080).
func apiFlags(fs *flag.FlagSet, getenv func(string) string) (key, base *string) {
	key = fs.String("api-key", getenv("XAALIS_API_KEY"), "a secret API key, sk_test_... (env XAALIS_API_KEY)")
	if *key != "" {
		fs.Lookup("api-key").DefValue = redactKey(*key) // -h shows no secret
	}
	base = fs.String("api-base", envOr(getenv, "XAALIS_API_BASE", client.DefaultBaseURL), "the API's address (env XAALIS_API_BASE)")
	return key, base
}

// checkAPIFlags refuses a missing or publishable key and a base that is not
// an http(s) URL.
func checkAPIFlags(cmd, key, base string) error {
	switch {
	case key == "":
		return usagef("%s: an API key is required: --api-key or XAALIS_API_KEY", cmd)
	case !strings.HasPrefix(key, "sk_test_") && !strings.HasPrefix(key, "sk_live_"):
		return usagef("%s: the API key must be a secret key (sk_test_... or sk_live_...)", cmd)
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("%s: --api-base %q: expected http(s)://host[:port]", cmd, base)
	}
	return nil
}

// cmdListen forwards the account's events, read from the event stream, to
// a URL on the developer's machine, signed like real deliveries.
func cmdListen(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("listen", stderr)
	forward := fs.String("forward-to", "", "the URL that receives each event as a signed POST, such as http://localhost:3000/webhooks (required)")
	events := fs.String("events", "", "the event types to forward, comma-separated; payout.* ends in a wildcard (default: every event)")
	live := fs.Bool("live", false, "allow a live key (sk_live_...): forward live events")
	key, base := apiFlags(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if fs.NArg() > 0 {
		return unexpectedArgument(fs, args, fs.Arg(0))
	}
	if err := checkAPIFlags("listen", *key, *base); err != nil {
		return err
	}
	if strings.HasPrefix(*key, "sk_live_") && !*live {
		return usagef("listen: %s is a live key: add --live to forward live events", redactKey(*key))
	}
	if *forward == "" {
		return usagef("listen: --forward-to URL is required")
	}
	if u, err := url.Parse(*forward); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("listen: --forward-to %q: expected an http(s) URL", *forward)
	}
	types, err := xaalis.ParseEventTypeFilter("--events", *events)
	if err != nil {
		return usagef("listen: %v", describe(err))
	}

	c := client.New(*key, client.WithBaseURL(*base))
	secret, err := c.WebhookEndpoints.ListenSecret(ctx)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}

	// The receiver is the developer's own: http and loopback are allowed,
	// and the same Sender as real deliveries posts and signs.
	sender := &webhook.Sender{Client: &http.Client{Timeout: webhook.DefaultTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	ready := false
	p := &client.ListenParams{Types: types,
		OnDisconnect: func(err error) { fmt.Fprintf(stderr, "stream dropped (%v); reconnecting\n", err) },
		OnConnect: func(after string) {
			// Ready once the stream is open, not before: the server starts
			// a first stream at its own "now", so an event triggered
			// between a Ready printed earlier and the connection was
			// never forwarded (seen in CI, a second process triggering).
			if !ready {
				ready = true
				fmt.Fprintf(stdout, "Ready! Your webhook signing secret is %s (forwarding %s events to %s; ^C to stop)\n",
					secret.Secret, mode(secret.Livemode), *forward)
			}
			if after != "" {
				fmt.Fprintf(stderr, "reconnected; resuming after %s\n", after)
			}
		}}
	for {
		var resumeErr *client.Error
		for ev, err := range c.Listen(ctx, p) {
			if err != nil {
				var e *client.Error
				if errors.As(err, &e) && e.Code == client.CodeValidationError && len(e.Errors["Last-Event-ID"]) > 0 {
					resumeErr = e
					break
				}
				return fmt.Errorf("listen: %w", err)
			}
			p.LastEventID = ev.ID
			status, err := sender.SendSigned(ctx, *forward, ev.Data, []string{secret.Secret}, time.Now())
			outcome := fmt.Sprintf("[%d]", status)
			if err != nil && status == 0 {
				if ctx.Err() != nil {
					return nil
				}
				outcome = "[error: " + err.Error() + "]"
			}
			fmt.Fprintf(stdout, "%s  %-34s %s  %s\n", time.Now().UTC().Format(time.RFC3339), ev.Type, ev.ID, outcome)
		}
		if resumeErr == nil {
			return nil // ctx done: ^C
		}
		// Too long away to resume (events older than 24 hours): start
		// again from now, and say what may be missing.
		fmt.Fprintf(stderr, "cannot resume after %s (%s); events since then may be missing: see GET /v1/events. Listening from now on\n",
			p.LastEventID, strings.Join(resumeErr.Errors["Last-Event-ID"], "; "))
		p.LastEventID = ""
	}
}

func mode(live bool) string {
	if live {
		return "live"
	}
	return "test"
}

// redactKey shows a key's prefix and last four characters only.
func redactKey(k string) string {
	if len(k) <= 12 {
		return "the key"
	}
	return k[:8] + "..." + k[len(k)-4:]
}

// triggerEvents are the events `xaalis trigger` makes, in the order its
// usage lists them.
var triggerEvents = []string{
	xaalis.EventPaymentSuccess, xaalis.EventPaymentFailed, xaalis.EventPaymentCancelled, xaalis.EventPaymentExpired,
	xaalis.EventPayoutSuccess, xaalis.EventPayoutFailed, xaalis.EventRefundSuccess, xaalis.EventPaymentPartiallyRefunded,
	xaalis.EventPaymentRefunded, xaalis.EventSubscriptionCreated,
}

// The magic payer numbers of the simulated providers (docs/payments.md):
// their last four digits fix the outcome.
const (
	magicSuccess   = "+221770000001"
	magicFailed    = "+221770000002"
	magicCancelled = "+221770000003"
	magicNoPayer   = "+221770000004"
)

// cmdTrigger makes, through the public API in test mode, whatever an event
// needs, and waits until GET /v1/events lists it.
func cmdTrigger(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("trigger", stderr)
	key, base := apiFlags(fs, getenv)
	timeout := fs.Duration("timeout", 3*time.Minute, "how long to wait for the event to be listed")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseError(err)
	}
	known := "known events: " + strings.Join(triggerEvents, ", ")
	if len(pos) != 1 {
		return usagef("trigger: expected one EVENT; %s", known)
	}
	if *timeout <= 0 {
		return usagef("trigger: --timeout must be positive")
	}
	event := pos[0]
	if !slices.Contains(triggerEvents, event) {
		return usagef("trigger: unknown event %q; %s", event, known)
	}
	if err := checkAPIFlags("trigger", *key, *base); err != nil {
		return err
	}
	if strings.HasPrefix(*key, "sk_live_") {
		return usagef("trigger: %s is a live key: trigger moves no real money and works in test mode only (sk_test_...)", redactKey(*key))
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	t := &trigger{c: client.New(*key, client.WithBaseURL(*base)), out: stdout,
		tag: strings.ToLower(xaalis.RandomString(10, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"))}
	if err := t.setup(ctx, event); err != nil {
		return fmt.Errorf("trigger %s: %w", event, err)
	}
	objectID, err := t.make(ctx, event)
	if err != nil {
		return fmt.Errorf("trigger %s: %w", event, err)
	}
	ev, err := t.waitListed(ctx, event, objectID)
	if err != nil {
		return fmt.Errorf("trigger %s: %w", event, err)
	}
	fmt.Fprintf(stdout, "event %s %s listed by GET /v1/events\n", ev.Type, ev.ID)
	return nil
}

type trigger struct {
	c   *client.Client
	out io.Writer
	tag string
	n   int
	// The providers the account may use in Senegal, where the magic
	// numbers below are: one for payments, one for payouts, one that
	// refunds. channel_a when the account may use it.
	payIn, payOut, refunds client.Provider
}

// triggerCountry is where trigger's payments and payouts are made,
// whatever the merchant's own country: the magic numbers are Senegal's.
const triggerCountry = client.CountrySN

// setup finds, before anything is made, what the event needs: a key that
// reads events (waitListed lists them: a key without the scope made its
// objects, then failed), and providers the account may use for it.
func (t *trigger) setup(ctx context.Context, event string) error {
	for _, err := range t.c.Events.List(ctx, &client.EventListParams{ListParams: client.ListParams{PerPage: 1}}) {
		if err != nil {
			return err
		}
		break
	}
	list, err := t.c.Providers.List(ctx, triggerCountry)
	if err != nil {
		return err
	}
	pick := func(ok func(*client.ProviderInfo) bool) client.Provider {
		var found client.Provider
		for _, p := range list {
			if p.Allowed && ok(p) && (found == "" || p.ID == client.ProviderChannelA) {
				found = p.ID
			}
		}
		return found
	}
	t.payIn = pick(func(p *client.ProviderInfo) bool { return p.Payments })
	t.payOut = pick(func(p *client.ProviderInfo) bool { return p.Payouts })
	t.refunds = pick(func(p *client.ProviderInfo) bool { return p.Payments && p.Refunds })
	need := map[string]client.Provider{"payments": t.payIn}
	switch event {
	case xaalis.EventPayoutSuccess, xaalis.EventPayoutFailed:
		need["payouts"] = t.payOut
	case xaalis.EventRefundSuccess, xaalis.EventPaymentPartiallyRefunded, xaalis.EventPaymentRefunded:
		need["refunds"] = t.refunds
	}
	for what, p := range need {
		if p == "" {
			return fmt.Errorf("no provider the account may use makes %s in %s (GET /v1/providers?country=%s)", what, triggerCountry, triggerCountry)
		}
	}
	return nil
}

func (t *trigger) ref(what string) string {
	t.n++
	return fmt.Sprintf("trigger-%s-%s-%d", what, t.tag, t.n)
}

func (t *trigger) printTx(tx *client.Transaction) {
	fmt.Fprintf(t.out, "%s %s %s (%s XOF, %s)\n", tx.Type, tx.ID, tx.Reference, tx.Amount, tx.Status)
}

// pay makes a test payment from a magic number, in triggerCountry with
// the payments' provider; expiresIn 0 is the default lifetime.
func (t *trigger) pay(ctx context.Context, amount int64, phone string, expiresIn int) (*client.Transaction, error) {
	return t.payWith(ctx, t.payIn, amount, phone, expiresIn)
}

// payWith is pay with the provider prov.
func (t *trigger) payWith(ctx context.Context, prov client.Provider, amount int64, phone string, expiresIn int) (*client.Transaction, error) {
	p, err := t.c.Payments.Create(ctx, &client.PaymentParams{MerchantRef: t.ref("payment"), Amount: amount,
		Country: triggerCountry, Provider: prov, Payer: &client.Payer{Phone: phone, Name: "Xaalis Trigger"},
		SuccessURL: "https://example.com/success", FailedURL: "https://example.com/failed", ExpiresIn: expiresIn,
		Metadata: map[string]any{"created_by": "xaalis trigger"}})
	if err != nil {
		return nil, err
	}
	t.printTx(p)
	return p, nil
}

// fund makes sure the balance's available amount covers need whole units,
// with a successful payment when it does not.
func (t *trigger) fund(ctx context.Context, need int64) error {
	b, err := t.c.Balance.Get(ctx)
	if err != nil {
		return err
	}
	avail, err := wholeUnits(b.Available.String())
	if err != nil {
		return fmt.Errorf("balance: %w", err)
	}
	if avail >= need {
		return nil
	}
	// Fees are a few percent: pay in a tenth more than missing.
	missing := need - avail
	fmt.Fprintf(t.out, "funding the test balance (%s %s available, %d needed):\n", b.Available, b.Currency, need)
	amount := missing + missing/10 + 100
	// At least the provider's and the account's minimums, which the
	// refusal names: a channel_b account short of 1,950 asked for 195.
	for range 3 {
		_, err = t.pay(ctx, amount, magicSuccess, 0)
		var e *client.Error
		if !errors.As(err, &e) || (e.Code != client.CodeAmountBelowProviderMinimum && e.Code != client.CodeAmountBelowMerchantMinimum) {
			return err
		}
		least, perr := wholeUnits(fmt.Sprint(e.Context["minimum"]))
		if perr != nil || least <= amount {
			return err
		}
		amount = least
	}
	return err
}

// wholeUnits reads an exact JSON number ("4950", "9948.5") as whole units,
// rounded down, without a float.
func wholeUnits(s string) (int64, error) {
	whole, frac, _ := strings.Cut(s, ".")
	var n int64
	neg := strings.HasPrefix(whole, "-")
	digits := strings.TrimPrefix(whole, "-")
	if digits == "" {
		return 0, fmt.Errorf("not a number: %q", s)
	}
	for _, c := range digits + frac {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("not a number: %q", s)
		}
	}
	for _, c := range digits {
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
		if strings.Trim(frac, "0") != "" {
			n-- // down: -9190.5 is -9191
		}
	}
	return n, nil
}

// make creates what the event needs and returns the id of the object the
// event is about.
func (t *trigger) make(ctx context.Context, event string) (string, error) {
	switch event {
	case xaalis.EventPaymentSuccess, xaalis.EventPaymentFailed, xaalis.EventPaymentCancelled:
		phone := map[string]string{xaalis.EventPaymentSuccess: magicSuccess, xaalis.EventPaymentFailed: magicFailed,
			xaalis.EventPaymentCancelled: magicCancelled}[event]
		p, err := t.pay(ctx, 5000, phone, 0)
		if err != nil {
			return "", err
		}
		return p.ID, nil
	case xaalis.EventPaymentExpired:
		// The shortest lifetime; the server's expiry job runs every few
		// seconds after it.
		p, err := t.pay(ctx, 5000, magicNoPayer, 60)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(t.out, "waiting for payment %s to expire at %s\n", p.ID, p.ExpiresAt.Format(time.RFC3339))
		return p.ID, nil
	case xaalis.EventPayoutSuccess, xaalis.EventPayoutFailed:
		const amount = 1000
		if err := t.fund(ctx, 2*amount); err != nil {
			return "", err
		}
		phone := magicSuccess
		if event == xaalis.EventPayoutFailed {
			phone = magicFailed
		}
		po, err := t.c.Payouts.Create(ctx, &client.PayoutParams{MerchantRef: t.ref("payout"), Amount: amount,
			Country: triggerCountry, Provider: t.payOut, Recipient: client.PayoutRecipient{Phone: phone, Name: "Xaalis Trigger"},
			Description: "xaalis trigger " + event})
		if err != nil {
			return "", err
		}
		t.printTx(po)
		return po.ID, nil
	case xaalis.EventRefundSuccess, xaalis.EventPaymentPartiallyRefunded, xaalis.EventPaymentRefunded:
		const amount = 5000
		p, err := t.payWith(ctx, t.refunds, amount, magicSuccess, 0)
		if err != nil {
			return "", err
		}
		refund := int64(amount / 5)
		if event == xaalis.EventPaymentRefunded {
			refund = amount
		}
		// The refund is taken from the balance, which the payment credited
		// net of its fee.
		if err := t.fund(ctx, 2*refund); err != nil {
			return "", err
		}
		rf, err := t.c.Refunds.Create(ctx, &client.RefundParams{TransactionID: p.ID, Amount: refund, Reason: "xaalis trigger " + event})
		if err != nil {
			return "", err
		}
		t.printTx(rf)
		if event == xaalis.EventRefundSuccess {
			return rf.ID, nil
		}
		return p.ID, nil
	case xaalis.EventSubscriptionCreated:
		p, err := t.pay(ctx, 5000, magicSuccess, 0)
		if err != nil {
			return "", err
		}
		pl, err := t.c.Plans.Create(ctx, &client.PlanParams{Name: "Trigger " + t.tag, Amount: 5000, Interval: client.IntervalMonth})
		if err != nil {
			return "", err
		}
		fmt.Fprintf(t.out, "plan %s %q (%s XOF a month)\n", pl.ID, pl.Name, pl.Amount)
		sub, err := t.c.Subscriptions.Create(ctx, &client.SubscriptionParams{PlanID: pl.ID, CustomerID: *p.CustomerID,
			Provider: t.payIn, Metadata: client.Metadata{"created_by": "xaalis trigger"}})
		if err != nil {
			return "", err
		}
		fmt.Fprintf(t.out, "subscription %s (%s, customer %s)\n", sub.ID, sub.Status, sub.CustomerID)
		return sub.ID, nil
	}
	return "", fmt.Errorf("no recipe") // triggerEvents lists only the cases above
}

// waitListed polls GET /v1/events until it lists the event about objectID.
func (t *trigger) waitListed(ctx context.Context, event, objectID string) (*client.Event, error) {
	for {
		seen := 0
		for ev, err := range t.c.Events.List(ctx, &client.EventListParams{Type: event, ListParams: client.ListParams{PerPage: 100}}) {
			if err != nil {
				return nil, err
			}
			if ev.ObjectID == objectID {
				return ev, nil
			}
			if seen++; seen == 100 {
				break // newest first: once listed, it is on the first page
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("GET /v1/events did not list it in time: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
