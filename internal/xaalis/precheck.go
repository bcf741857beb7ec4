package xaalis

import (
	"context"
	"fmt"
)

// checkDepth is how far checkPayment goes.
type checkDepth int

const (
	// firstRefusal stops at the first refusal, which creation answers. It
	// checks one provider, and not route health: creation learns that by
	// asking the provider (503 gateway_unavailable, with the payment kept
	// initiated so that a retry resumes it).
	firstRefusal checkDepth = iota
	// everyRefusal gives each provider the first refusal of every check,
	// in creation's order, then route health: the precheck and the hosted
	// page's provider list.
	everyRefusal
)

// paymentVerdict is what stops one provider from taking a payment; no
// errors: it may.
type paymentVerdict struct {
	provider string
	errs     []*Error
}

// checkPayment applies creation's limits to a drafted payment for each of
// providers ("" for a payment whose payer chooses on the hosted page), in
// creation's order: the merchant's floor, ceiling and collection limits,
// the provider's rules and daily limit, the payer's BCEAO ceiling. It reads
// every volume they need in one round trip and writes nothing. It is the
// one set of checks behind creation, the precheck, and the hosted page's
// provider list and the payer's choice there.
//
// Refusals are in the verdicts (the merchant's limits and the payer's
// ceiling refuse every provider alike); the error is a read that failed.
// room is the payer's BCEAO room when the payer's ceiling was checked.
func (a *App) checkPayment(ctx context.Context, m *Merchant, t *Transaction, providers []string, depth checkDepth) ([]paymentVerdict, *payerRoom, error) {
	ctx = a.prefetchVolumes(ctx, m, t, providers)
	verdicts := make([]paymentVerdict, len(providers))
	all := make([]int, len(providers))
	for i, p := range providers {
		verdicts[i].provider, all[i] = p, i
	}
	// A refusal is an *Error the check returns as it is; a failure to read
	// comes wrapped with the operation's name, and ends the checks.
	refused := func(err error, at []int) (stop bool, failure error) {
		if err == nil {
			return false, nil
		}
		e, ok := err.(*Error)
		if !ok {
			return true, err
		}
		for _, i := range at {
			verdicts[i].errs = append(verdicts[i].errs, e)
		}
		return depth == firstRefusal, nil
	}
	if stop, err := refused(a.checkMerchantLimits(ctx, m, t), all); stop {
		return verdicts, nil, err
	}
	usable := make([]bool, len(providers))
	for i, p := range providers {
		if p == "" {
			continue
		}
		perr := a.checkProvider(ctx, m, t, p)
		if stop, err := refused(perr, []int{i}); stop {
			return verdicts, nil, err
		}
		usable[i] = perr == nil
	}
	var room *payerRoom
	if t.PayerPhone != "" {
		r, err := a.checkPayerCeiling(ctx, t)
		room = &r
		if stop, err := refused(err, all); stop {
			return verdicts, room, err
		}
	}
	if depth == everyRefusal {
		for i, p := range providers {
			if usable[i] {
				if e := a.checkRoutes(t.Mode, p); e != nil {
					verdicts[i].errs = append(verdicts[i].errs, e)
				}
			}
		}
	}
	return verdicts, room, nil
}

// checkCreation is checkPayment as creation answers it, for one provider
// ("" for none): the first refusal, or a failure to read, as the error.
func (a *App) checkCreation(ctx context.Context, m *Merchant, t *Transaction, provider string) error {
	verdicts, _, err := a.checkPayment(ctx, m, t, []string{provider}, firstRefusal)
	if err != nil {
		return err
	}
	if errs := verdicts[0].errs; len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// checkRoutes refuses a provider none of whose routes is healthy now (every
// circuit breaker open): creation would answer 503 gateway_unavailable.
func (a *App) checkRoutes(mode Mode, provider string) *Error {
	if a.Gateway == nil {
		return nil
	}
	for _, r := range a.Gateway.Health(mode, provider) {
		if r.Healthy {
			return nil
		}
	}
	e := E(EGatewayUnavailable, "provider", provider)
	e.Message = fmt.Sprintf("No route to the provider %s is healthy now: a payment through it would answer 503 gateway_unavailable; retry later.", provider)
	return e
}

// paymentChoices checks a payment for every provider open to the merchant
// in the payment's country, refused ones included: the precheck without a
// provider, and the hosted page's provider list.
func (a *App) paymentChoices(ctx context.Context, m *Merchant, t *Transaction) ([]ProviderInfo, []paymentVerdict, *payerRoom, error) {
	infos := a.ProvidersFor(&Principal{Merchant: m, Key: &Key{Mode: t.Mode}}, t.Country)
	names := make([]string, len(infos))
	for i, info := range infos {
		names[i] = info.ID
	}
	verdicts, room, err := a.checkPayment(ctx, m, t, names, everyRefusal)
	return infos, verdicts, room, err
}

// PaymentPrecheck is the answer of POST /v1/payments/precheck: whether a
// payment created with the same body would be accepted now, provider by
// provider, and the payer's room under the BCEAO ceiling.
type PaymentPrecheck struct {
	Object string `json:"object"`
	// Allowed: at least one provider may take the payment. With a
	// provider named, exactly whether creation would accept it.
	Allowed   bool            `json:"allowed"`
	Providers []ProviderCheck `json:"providers"`
	// Payer is nil when the body names no payer phone.
	Payer *PayerCheck `json:"payer"`
}

// ProviderCheck is one provider's verdict on a payment.
type ProviderCheck struct {
	Provider string `json:"provider"`
	Allowed  bool   `json:"allowed"`
	// Errors are creation's refusals, in the order creation checks them:
	// it answers the first with 422 (503 for gateway_unavailable).
	Errors []Refusal `json:"errors"`
}

// Refusal is one reason creation would refuse a payment, as its error
// would carry it.
type Refusal struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Context map[string]any `json:"context"`
}

// PayerCheck is the payer's place under the BCEAO ceiling, across every
// merchant, before this payment. Amounts are in XOF, in which the
// ceilings count; both are nil for a tier without a ceiling.
type PayerCheck struct {
	Phone            string   `json:"phone"`
	Country          Country  `json:"country"`
	Tier             int      `json:"tier"`
	Ceiling          *string  `json:"ceiling"`
	CeilingRemaining *string  `json:"ceiling_remaining"`
	Currency         Currency `json:"currency"`
}

// PrecheckPayment runs the checks of CreatePayment on a creation body and
// writes nothing: no payment, customer, counter or idempotency key.
// merchant_ref, success_url and failed_url are optional here, and checked
// when given. Like creation, it returns merchant_inactive,
// merchant_kyc_required, validation_error (a merchant_ref already used
// included), amount_must_be_positive and invalid_phone_number; every other
// refusal of creation (provider_unavailable,
// provider_country_unsupported, merchant_provider_not_authorized,
// fees_unavailable, amount_below_merchant_minimum,
// amount_below_provider_minimum, amount_above_merchant_maximum,
// daily_limit_exceeded, merchant_limit_exceeded, bceao_limit_exceeded,
// and gateway_unavailable for a provider with no healthy route) is listed
// under the providers it concerns. A publishable key gets forbidden: it
// is public, and the answer tells a payer's tier and room.
func (a *App) PrecheckPayment(ctx context.Context, p *Principal, in PaymentInput) (*PaymentPrecheck, error) {
	if p.Key.Type == KeyPublishable {
		return nil, Errorf(EForbidden, "The precheck needs a secret key: it tells a payer's BCEAO tier and room, which a public key must not learn.")
	}
	d, err := a.draftPayment(ctx, p, in, true)
	if err != nil {
		return nil, err
	}
	t := d.t
	t.Provider = d.provider
	if err := a.precheckMerchantRef(ctx, t, !p.Key.HasScope(ScopeReadTransactions)); err != nil {
		return nil, err
	}
	var verdicts []paymentVerdict
	var room *payerRoom
	if d.provider != "" {
		verdicts, room, err = a.checkPayment(ctx, p.Merchant, t, []string{d.provider}, everyRefusal)
	} else {
		_, verdicts, room, err = a.paymentChoices(ctx, p.Merchant, t)
	}
	if err != nil {
		return nil, err
	}
	out := &PaymentPrecheck{Object: "payment_precheck", Providers: make([]ProviderCheck, 0, len(verdicts))}
	for _, v := range verdicts {
		c := ProviderCheck{Provider: v.provider, Allowed: len(v.errs) == 0, Errors: make([]Refusal, 0, len(v.errs))}
		for _, e := range v.errs {
			kv := e.Context
			if kv == nil {
				kv = map[string]any{}
			}
			c.Errors = append(c.Errors, Refusal{Code: e.Code, Message: e.Text(), Context: kv})
		}
		out.Allowed = out.Allowed || c.Allowed
		out.Providers = append(out.Providers, c)
	}
	if room != nil {
		out.Payer = &PayerCheck{Phone: t.PayerPhone, Country: t.Country, Tier: room.tier, Currency: XOF}
		if rest, ok := room.remaining(); ok {
			ceiling, remaining := Units(room.ceiling, XOF).Decimal(), rest.Decimal()
			out.Payer.Ceiling, out.Payer.CeilingRemaining = &ceiling, &remaining
		}
	}
	return out, nil
}

// precheckMerchantRef finds creation's refusal of a merchant_ref that
// another record holds, with a plain read (creation reads it again, under
// lock, in its transaction). The unfinished creation of the same payment
// is no refusal: creation resumes it.
func (a *App) precheckMerchantRef(ctx context.Context, t *Transaction, hide bool) error {
	if t.MerchantRef == "" {
		return nil
	}
	list, err := a.Store.LookupTransactions(ctx, t.MerchantID, t.MerchantRef)
	if err != nil {
		return fmt.Errorf("lookup merchant_ref: %w", err)
	}
	for _, x := range list {
		// A resumable one past its expires_at is refused, as creation
		// refuses it.
		if x.MerchantRef == t.MerchantRef && x.Mode == t.Mode && x.KeyType == t.KeyType &&
			(!resumable(x, t) || !a.now().Before(x.ExpiresAt)) {
			return merchantRefUsed(x, hide)
		}
	}
	return nil
}
