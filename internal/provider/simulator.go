package provider

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// simRoute is the one route of test mode.
const simRoute = "simulator"

// Codes the payer dials.
const (
	OTPUSSDCode  = "#144*391#" // OTP providers: dial to receive the code
	PushUSSDCode = "*144#"     // USSD push providers: find a lost push
)

// nextAction is the payer step of a provider's collection ref.
func nextAction(provider string, kind xaalis.NextActionType, ref string) *xaalis.NextAction {
	switch kind {
	case xaalis.NextRedirect:
		host := "wallet." + strings.ReplaceAll(provider, "_", "-") + ".example"
		return &xaalis.NextAction{
			Type:         xaalis.NextRedirect,
			RedirectURL:  "https://" + host + "/pay/" + ref,
			Instructions: "Open the link to approve the payment in your wallet app.",
		}
	case xaalis.NextOTP:
		return &xaalis.NextAction{
			Type:         xaalis.NextOTP,
			USSDCode:     OTPUSSDCode,
			Instructions: "Dial " + OTPUSSDCode + " on your phone to receive a 6-digit code, then enter that code to confirm the payment.",
		}
	case xaalis.NextUSSD:
		return &xaalis.NextAction{
			Type:         xaalis.NextUSSD,
			USSDCode:     PushUSSDCode,
			Instructions: "Confirm the payment request sent to your phone with your PIN. If it did not arrive, dial " + PushUSSDCode + ".",
		}
	}
	return nil
}

// settleAtOnce maps the magic suffixes that settle a collection at once
// to their state and reason.
func settleAtOnce(m Magic) (xaalis.ProviderState, string, bool) {
	switch m {
	case MagicSuccess:
		return xaalis.ProviderSuccess, "", true
	case MagicFailed:
		return xaalis.ProviderFailed, ReasonInsufficientFunds, true
	case MagicCancelled:
		return xaalis.ProviderCancelled, ReasonPayerCancelled, true
	}
	return "", "", false
}

// payerReason is the reason recorded when the payer chooses an outcome.
func payerReason(s xaalis.ProviderState) string {
	switch s {
	case xaalis.ProviderFailed:
		return ReasonPayerDeclined
	case xaalis.ProviderCancelled:
		return ReasonPayerCancelled
	}
	return ""
}

// simCollection is a collection a simulator holds.
type simCollection struct {
	ref         string
	reference   string
	state       xaalis.ProviderState
	reason      string
	amount      xaalis.Amount
	phone       string
	country     xaalis.Country
	magic       Magic
	otpAttempts int
	created     time.Time
	next        *xaalis.NextAction
	refunded    int64 // minor units refunded so far
}

// simulator is one provider in test mode: real state, in memory.
type simulator struct {
	provider string
	prefix   string // sim_a_, sim_b_, ...
	g        *Gateway

	mu          sync.Mutex
	collections map[string]*simCollection // by provider ref
	byReference map[string]string         // Xaalis reference -> provider ref
	payouts     map[string]*simPayout     // by Xaalis reference
	refunds     map[string]*simRefund     // by Xaalis reference
	// The keys of those maps, oldest first, to forget the oldest.
	collectionKeys, payoutKeys, refundKeys recent
}

// DefaultSimulatorMemory is how many collections, and how many payouts and
// refunds, a simulator remembers unless Options.SimulatorMemory says
// otherwise: a few megabytes. A simulator that kept every one grew
// without end in a server that runs for weeks, and every garbage
// collection scanned it all again: a 30 s bench run of test payments at
// 2,900 a second ended with a live heap of 51 MB (11 MB after 2 s) and
// a mark phase of 39 ms (9 ms).
const DefaultSimulatorMemory = 1 << 14

// recent keeps the last keys added, up to its limit, in a ring.
type recent struct {
	keys  []string
	limit int
	next  int
}

// add records k and returns the oldest key, which it forgets, once the
// ring is full.
func (r *recent) add(k string) (oldest string, forgot bool) {
	if len(r.keys) < r.limit {
		r.keys = append(r.keys, k)
		return "", false
	}
	oldest, r.keys[r.next] = r.keys[r.next], k
	r.next = (r.next + 1) % len(r.keys)
	return oldest, true
}

func newSimulator(provider string, g *Gateway) *simulator {
	suffix := provider
	if i := strings.LastIndexByte(provider, '_'); i >= 0 {
		suffix = provider[i+1:]
	}
	return &simulator{
		provider:       provider,
		prefix:         "sim_" + suffix + "_",
		g:              g,
		collections:    make(map[string]*simCollection),
		byReference:    make(map[string]string),
		payouts:        make(map[string]*simPayout),
		refunds:        make(map[string]*simRefund),
		collectionKeys: recent{limit: g.opts.SimulatorMemory},
		payoutKeys:     recent{limit: g.opts.SimulatorMemory},
		refundKeys:     recent{limit: g.opts.SimulatorMemory},
	}
}

func (s *simulator) initiate(r xaalis.InitiateRequest) (xaalis.Initiation, error) {
	spec, err := s.g.checkServes(s.provider, r.Country)
	if err != nil {
		return xaalis.Initiation{}, err
	}
	magic := MagicOf(r.PayerPhone)
	switch magic {
	case MagicRefused:
		return xaalis.Initiation{}, refuse(s.provider, "The provider refused the payment (test number ending %s).", magic)
	case MagicUnreachable:
		return xaalis.Initiation{}, unavailable(s.provider, 30*time.Second, "The provider is unreachable (test number ending %s).", magic)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The same reference is the same collection, as with a real provider
	// and its Idempotency-Key.
	if ref, ok := s.byReference[r.Reference]; ok && r.Reference != "" {
		return s.collections[ref].initiation(), nil
	}
	c := &simCollection{
		ref:       randomID(s.prefix),
		reference: r.Reference,
		state:     xaalis.ProviderPending,
		amount:    r.Amount,
		phone:     r.PayerPhone,
		country:   r.Country,
		magic:     magic,
		created:   s.g.now(),
	}
	if st, reason, ok := settleAtOnce(magic); ok {
		c.state, c.reason = st, reason
	} else {
		c.next = nextAction(s.provider, spec.NextAction, c.ref)
	}
	s.collections[c.ref] = c
	if r.Reference != "" {
		s.byReference[r.Reference] = c.ref
	}
	if old, forgot := s.collectionKeys.add(c.ref); forgot {
		if oc := s.collections[old]; oc != nil && s.byReference[oc.reference] == old {
			delete(s.byReference, oc.reference)
		}
		delete(s.collections, old)
	}
	return c.initiation(), nil
}

func (c *simCollection) initiation() xaalis.Initiation {
	in := xaalis.Initiation{ProviderRef: c.ref, State: c.state, Reason: c.reason, Route: simRoute, RouteReason: "test mode"}
	if c.state == xaalis.ProviderPending && c.next != nil {
		n := *c.next
		in.NextAction = &n
	}
	return in
}

// collection finds a collection by the Xaalis reference it was asked
// with: xaalis.ErrNotFound when it has none (or forgot it).
func (s *simulator) collection(reference string) (xaalis.Initiation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.collections[s.byReference[reference]]
	if !ok {
		return xaalis.Initiation{}, xaalis.ErrNotFound
	}
	return c.initiation(), nil
}

func (s *simulator) status(ref string) xaalis.ProviderStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.collections[ref]
	if !ok {
		return xaalis.ProviderStatus{State: xaalis.ProviderPending, Reason: ReasonUnknownToSimulator}
	}
	return xaalis.ProviderStatus{State: c.state, Reason: c.reason}
}

func (s *simulator) submitOTP(ref, otp string) (xaalis.ProviderStatus, error) {
	s.mu.Lock()
	c, ok := s.collections[ref]
	if !ok {
		s.mu.Unlock()
		return xaalis.ProviderStatus{}, refuse(s.provider, "The simulator knows no collection %q.", ref)
	}
	if c.state != xaalis.ProviderPending {
		st := xaalis.ProviderStatus{State: c.state, Reason: c.reason}
		s.mu.Unlock()
		return st, nil
	}
	if c.magic == MagicNoPayer {
		s.mu.Unlock()
		return xaalis.ProviderStatus{State: xaalis.ProviderPending, Reason: ReasonNoPayer}, nil
	}
	if otp == TestOTP {
		c.state, c.reason = xaalis.ProviderSuccess, ""
	} else {
		c.otpAttempts++
		c.reason = ReasonWrongOTP
		if c.otpAttempts >= MaxOTPAttempts {
			c.state, c.reason = xaalis.ProviderFailed, ReasonTooManyWrongOTP
		}
	}
	n := s.notification(c)
	s.mu.Unlock()
	if n.State != xaalis.ProviderPending {
		s.notify(context.Background(), n)
	}
	return xaalis.ProviderStatus{State: n.State, Reason: n.Reason}, nil
}

func (s *simulator) payerAction(ctx context.Context, ref string, outcome xaalis.ProviderState) error {
	switch outcome {
	case xaalis.ProviderSuccess, xaalis.ProviderFailed, xaalis.ProviderCancelled:
	default:
		return xaalis.Errorf(xaalis.EValidation, "The outcome must be success, failed or cancelled, not %q.", outcome)
	}
	s.mu.Lock()
	c, ok := s.collections[ref]
	var e *xaalis.Error
	switch {
	case !ok:
		e = refuse(s.provider, "The simulator knows no collection %q (its state is lost on restart).", ref)
	case c.state != xaalis.ProviderPending:
		e = refuse(s.provider, "The collection %s is already %s.", ref, c.state)
	case c.magic == MagicNoPayer:
		e = refuse(s.provider, "The collection %s has no payer (test number ending %s): it stays pending.", ref, MagicNoPayer)
	}
	if e != nil {
		s.mu.Unlock()
		return e
	}
	c.state, c.reason = outcome, payerReason(outcome)
	n := s.notification(c)
	s.mu.Unlock()
	s.notify(context.WithoutCancel(ctx), n)
	return nil
}

func (s *simulator) notification(c *simCollection) xaalis.Notification {
	return xaalis.Notification{
		EventID:     randomID("evt_sim_"),
		Provider:    s.provider,
		Country:     c.country,
		ProviderRef: c.ref,
		State:       c.state,
		Reason:      c.reason,
	}
}

// notify delivers n to Options.Notify in its own goroutine, as a real
// provider's webhook arrives on its own.
func (s *simulator) notify(ctx context.Context, n xaalis.Notification) {
	if f := s.g.opts.Notify; f != nil {
		go f(ctx, n)
	}
}

// payoutOutcome maps a recipient's magic suffix to the state a payout
// settles in at once; 0004 stays pending forever, ordinary numbers succeed.
func payoutOutcome(m Magic) (xaalis.ProviderState, string) {
	switch m {
	case MagicFailed:
		return xaalis.ProviderFailed, ReasonRecipientRejected
	case MagicCancelled:
		return xaalis.ProviderCancelled, ReasonPayoutCancelled
	case MagicNoPayer:
		return xaalis.ProviderPending, ""
	}
	return xaalis.ProviderSuccess, ""
}

// simPayout is a payout a simulator holds.
type simPayout struct {
	ref       string
	reference string
	state     xaalis.ProviderState
	reason    string
	amount    xaalis.Amount
	phone     string
}

func (p *simPayout) result() xaalis.PayoutResult {
	return xaalis.PayoutResult{ProviderRef: p.ref, State: p.state, Reason: p.reason, Route: simRoute, RouteReason: "test mode"}
}

// simRefund is a refund a simulator holds.
type simRefund struct {
	ref        string
	collection string // the payment's provider ref
	amount     xaalis.Amount
}

func (f *simRefund) result() xaalis.PayoutResult {
	return xaalis.PayoutResult{ProviderRef: f.ref, State: xaalis.ProviderSuccess, Route: simRoute, RouteReason: "test mode"}
}

func (s *simulator) payout(r xaalis.PayoutOrder) (xaalis.PayoutResult, error) {
	magic := MagicOf(r.RecipientPhone)
	s.mu.Lock()
	defer s.mu.Unlock()
	// The same reference is the same payout: it is never sent twice.
	if p, ok := s.payouts[r.Reference]; ok {
		if p.amount != r.Amount || p.phone != r.RecipientPhone {
			return xaalis.PayoutResult{}, refuse(s.provider, "The reference %s was used for another payout.", r.Reference)
		}
		return p.result(), nil
	}
	// Refused and unreachable payouts are not recorded: no money moved,
	// and PayoutStatus answers not_found.
	switch magic {
	case MagicRefused:
		return xaalis.PayoutResult{}, refuse(s.provider, "The provider refused the payout (test number ending %s).", magic)
	case MagicUnreachable:
		return xaalis.PayoutResult{}, unavailable(s.provider, 30*time.Second, "The provider is unreachable (test number ending %s).", magic)
	}
	p := &simPayout{
		ref:       randomID(s.payoutPrefix()),
		reference: r.Reference,
		amount:    r.Amount,
		phone:     r.RecipientPhone,
	}
	p.state, p.reason = payoutOutcome(magic)
	s.payouts[r.Reference] = p
	if old, forgot := s.payoutKeys.add(r.Reference); forgot {
		delete(s.payouts, old)
	}
	return p.result(), nil
}

func (s *simulator) payoutStatus(reference string) (xaalis.PayoutResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.payouts[reference]
	if !ok {
		return xaalis.PayoutResult{}, xaalis.ErrNotFound
	}
	return p.result(), nil
}

// refundStatus answers a refund by its reference: xaalis.ErrNotFound
// when this simulator holds none (never asked, or forgotten).
func (s *simulator) refundStatus(reference string) (xaalis.PayoutResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.refunds[reference]
	if !ok {
		return xaalis.PayoutResult{}, xaalis.ErrNotFound
	}
	return f.result(), nil
}

// refund gives back part of a collection at once. A collection the
// simulator knows must be a success with enough left to refund; one it
// does not know (its state is lost on restart) is refunded blindly, since
// the simulator cannot tell.
func (s *simulator) refund(r xaalis.RefundRequest) (xaalis.PayoutResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.refunds[r.Reference]; ok {
		if f.collection != r.PaymentProviderRef || f.amount != r.Amount {
			return xaalis.PayoutResult{}, refuse(s.provider, "The reference %s was used for another refund.", r.Reference)
		}
		return f.result(), nil
	}
	if c, ok := s.collections[r.PaymentProviderRef]; ok {
		switch {
		case c.state != xaalis.ProviderSuccess:
			return xaalis.PayoutResult{}, refuse(s.provider, "The collection %s is %s: only a successful collection can be refunded.", c.ref, c.state)
		case c.amount.Currency != r.Amount.Currency:
			return xaalis.PayoutResult{}, refuse(s.provider, "The refund is in %s, the collection in %s.", r.Amount.Currency, c.amount.Currency)
		case c.refunded+r.Amount.Minor > c.amount.Minor:
			return xaalis.PayoutResult{}, refuse(s.provider, "The refund exceeds what remains of the collection %s (%d of %d minor units refunded).", c.ref, c.refunded, c.amount.Minor)
		}
		c.refunded += r.Amount.Minor
	}
	f := &simRefund{ref: randomID(s.refundPrefix()), collection: r.PaymentProviderRef, amount: r.Amount}
	s.refunds[r.Reference] = f
	if old, forgot := s.refundKeys.add(r.Reference); forgot {
		delete(s.refunds, old)
	}
	return f.result(), nil
}

// payoutPrefix and refundPrefix start the simulator's payout and refund
// ids: simpo_a_..., simrf_a_...
func (s *simulator) payoutPrefix() string { return "simpo_" + strings.TrimPrefix(s.prefix, "sim_") }
func (s *simulator) refundPrefix() string { return "simrf_" + strings.TrimPrefix(s.prefix, "sim_") }
