package xaalis

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// A publishable key is public: anyone who reads the merchant's page has it.
// So its payments name nothing that could reach a third party (the payer's
// phone, a provider, a lifetime, a callback URL, metadata): the payer gives
// the phone and chooses the provider on the hosted page. Its return URLs
// must be on the merchant's return hosts, its creations are rate-limited
// per client address, and the hosted page's choices on its payments per
// payer phone. (DECISIONS.md: Keys and modes; issue 10.)

// refusePublishable adds a validation error for each field a publishable
// key may not set.
func (in *PaymentInput) refusePublishable(v ValidationErrors) {
	const hosted = "may not be set with a publishable key: the payer gives it on the hosted page"
	set := func(p *string) bool { return p != nil && strings.TrimSpace(*p) != "" }
	for _, f := range []struct {
		field string
		set   bool
		msg   string
	}{
		{"provider", set(in.Provider), hosted},
		{"payer", in.Payer != nil, hosted},
		{"phone", set(in.Phone), hosted},
		{"name", set(in.Name), hosted},
		{"payer_phone", set(in.PayerPhone), hosted},
		{"payer_name", set(in.PayerName), hosted},
		{"customer", in.Customer != nil, hosted},
		{"expires_in", in.ExpiresIn != nil, "may not be set with a publishable key: the default lifetime applies"},
		{"callback_url", set(in.CallbackURL), "may not be set with a publishable key: register a webhook endpoint with your secret key"},
		{"metadata", len(in.Metadata) > 0, "may not be set with a publishable key: create the payment with your secret key to attach metadata"},
	} {
		if f.set {
			v.Add(f.field, f.msg)
		}
	}
	// Nothing of it is used: the payment is built as if none was sent.
	in.Provider, in.Payer, in.Phone, in.Name, in.PayerPhone, in.PayerName = nil, nil, nil, nil, nil, nil
	in.Customer, in.ExpiresIn, in.CallbackURL, in.Metadata = nil, nil, nil, nil
}

// returnHostsMessage explains a return URL refused for a publishable key.
func returnHostsMessage(m *Merchant) string {
	if len(m.ReturnHosts) == 0 {
		return "must be on one of the account's return hosts, and none is registered: ask for your shop's hosts to be registered, or create the payment with your secret key"
	}
	return "must be on one of the account's return hosts: " + strings.Join(m.ReturnHosts, ", ")
}

// addressScope is the rate-limit scope of a client address: an IPv6
// client is counted by its /64, which one subscriber usually holds whole.
func addressScope(ip netip.Addr) string {
	ip = ip.Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}

// rateLimited counts one event in a fixed window and refuses it with
// too_many_requests (and Retry-After) past limit; a limit below 1 is off.
func (a *App) rateLimited(ctx context.Context, tx Tx, scope string, limit int, window time.Duration, msg string) error {
	if limit < 1 {
		return nil
	}
	now := a.now()
	start := now.Truncate(window)
	n, err := tx.CountRate(ctx, scope, start)
	if err != nil {
		return err
	}
	if n > limit {
		e := Errorf(ETooManyRequests, "%s", msg)
		e.RetryAfter = start.Add(window).Sub(now)
		return e
	}
	return nil
}

// countPublishableCreation counts a payment creation of a publishable key
// against its client address, in the creation's transaction.
func (a *App) countPublishableCreation(ctx context.Context, tx Tx, p *Principal) error {
	if !p.ClientIP.IsValid() {
		return nil
	}
	scope := "pk_create:" + p.Merchant.ID + ":" + string(p.Mode()) + ":" + addressScope(p.ClientIP)
	return a.rateLimited(ctx, tx, scope, a.Config.Publishable.PerAddressPerMinute, time.Minute,
		"Too many payments created with a publishable key from this address; retry after Retry-After seconds.")
}

// countPayerPhone counts a payer phone given on the hosted page of a
// payment made with a publishable key, across every merchant.
func (a *App) countPayerPhone(ctx context.Context, tx Tx, t *Transaction, phone string) error {
	if !t.Publishable() {
		return nil
	}
	return a.rateLimited(ctx, tx, "pk_phone:"+string(t.Mode)+":"+phone, a.Config.Publishable.PerPhonePerHour, time.Hour,
		"Too many payments were started for this phone number; retry after Retry-After seconds.")
}

// PaymentStatus is the reduced view of a payment that a publishable key
// reads: nothing of the payer, the metadata, the URLs or the fees.
type PaymentStatus struct{ T *Transaction }

// StatusView is the reduced view's JSON: PaymentStatus renders it, and a
// stored record's JSON read into it is that record's reduced view.
type StatusView struct {
	ID        string   `json:"id"`
	Object    string   `json:"object"`
	Reference string   `json:"reference"`
	Status    Status   `json:"status"`
	Amount    string   `json:"amount"`
	Currency  Currency `json:"currency"`
	Provider  *string  `json:"provider"`
	ExpiresAt string   `json:"expires_at"`
	Livemode  bool     `json:"livemode"`
}

// MarshalJSON renders the reduced view.
func (s PaymentStatus) MarshalJSON() ([]byte, error) {
	t := s.T
	return json.Marshal(StatusView{t.ID, "transaction", t.Reference, t.Status, t.Amount.Decimal(), t.Amount.Currency,
		strPtr(t.Provider), Timestamp(t.ExpiresAt), t.Mode.Live()})
}

// Livemode is the view's mode, for the response envelope.
func (s PaymentStatus) Livemode() bool { return s.T.Mode.Live() }

// PublicStatus finds a payment of the merchant by id or TXN reference, never
// by merchant_ref (a merchant's order numbers are guessable), for a
// publishable key. It returns not_found, also for payouts and refunds, or
// livemode_mismatch.
func (a *App) PublicStatus(ctx context.Context, p *Principal, key string) (PaymentStatus, error) {
	if key == "" || len(key) > 255 {
		return PaymentStatus{}, ErrNotFound
	}
	if low := strings.ToLower(key); low != key && isUUID(low) {
		// An id in upper case, found as lookup finds it for a secret key
		// (RFC 9562 reads UUIDs in either case; ids are stored in lower
		// case). Never a merchant_ref here.
		key = low
	}
	list, err := a.Store.LookupTransactions(ctx, p.Merchant.ID, key)
	if err != nil {
		return PaymentStatus{}, fmt.Errorf("lookup transaction: %w", err)
	}
	var other bool
	for _, t := range list {
		if t.Type != TypePayment || (t.ID != key && t.Reference != key) {
			continue
		}
		if t.Mode != p.Mode() {
			other = true
			continue
		}
		return PaymentStatus{T: t}, nil
	}
	if other {
		return PaymentStatus{}, E(ELivemodeMismatch)
	}
	return PaymentStatus{}, ErrNotFound
}
