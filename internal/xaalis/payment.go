package xaalis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// PaymentInput is the body of POST /v1/payments. The payer may come in any
// one of four forms: payer{phone,name}, phone/name, payer_phone/payer_name,
// or customer{msisdn,name}.
type PaymentInput struct {
	MerchantRef *string        `json:"merchant_ref"`
	Amount      *Number        `json:"amount"`
	Currency    *string        `json:"currency"`
	Provider    *string        `json:"provider"`
	Country     *string        `json:"country"`
	Payer       *payerInput    `json:"payer"`
	Phone       *string        `json:"phone"`
	Name        *string        `json:"name"`
	PayerPhone  *string        `json:"payer_phone"`
	PayerName   *string        `json:"payer_name"`
	Customer    *customerInput `json:"customer"`
	SuccessURL  *string        `json:"success_url"`
	FailedURL   *string        `json:"failed_url"`
	CallbackURL *string        `json:"callback_url"`
	Metadata    map[string]any `json:"metadata"`
	ExpiresIn   *int64         `json:"expires_in"`
	// noReturn: a payment Xaalis asks for itself (a subscription's
	// period), whose merchant gave no return URLs: the hosted page shows
	// the outcome and sends the payer nowhere.
	noReturn bool
}

type payerInput struct {
	Phone *string `json:"phone"`
	Name  *string `json:"name"`
}

type customerInput struct {
	Msisdn *string `json:"msisdn"`
	Phone  *string `json:"phone"`
	Name   *string `json:"name"`
}

// Payment expiry bounds, in seconds.
const (
	MinExpiresIn = 60
	MaxExpiresIn = 7 * 24 * 3600
)

// payerFields merges the payer forms; two forms that disagree are a
// validation error. Two phones in forms that ParsePhone reads as one
// number for country ("+221771234567" and "77 123 45 67") agree.
func (in *PaymentInput) payerFields(v ValidationErrors, country Country) (phone, name string) {
	type form struct {
		field string
		val   *string
	}
	samePhone := func(a, b string) bool {
		pa, ea := ParsePhone(a, country)
		pb, eb := ParsePhone(b, country)
		return ea == nil && eb == nil && pa == pb
	}
	pick := func(label string, forms []form) string {
		got, from := "", ""
		for _, f := range forms {
			if f.val == nil || strings.TrimSpace(*f.val) == "" {
				continue
			}
			s := strings.TrimSpace(*f.val)
			if got != "" && s != got && !(label == "phone" && samePhone(s, got)) {
				v.Add(f.field, fmt.Sprintf("disagrees with %s: send the payer's %s in one form only", from, label))
				continue
			}
			got, from = s, f.field
		}
		return got
	}
	var pp, pn, cp, cm, cn *string
	if in.Payer != nil {
		pp, pn = in.Payer.Phone, in.Payer.Name
	}
	if in.Customer != nil {
		cm, cp, cn = in.Customer.Msisdn, in.Customer.Phone, in.Customer.Name
	}
	phone = pick("phone", []form{{"payer.phone", pp}, {"phone", in.Phone}, {"payer_phone", in.PayerPhone}, {"customer.msisdn", cm}, {"customer.phone", cp}})
	name = pick("name", []form{{"payer.name", pn}, {"name", in.Name}, {"payer_name", in.PayerName}, {"customer.name", cn}})
	if utf8.RuneCountInString(name) > 200 {
		v.Add("payer.name", "must be at most 200 characters")
	}
	return phone, name
}

// validURL checks an absolute http(s) URL.
func validURL(v ValidationErrors, field string, s *string, required bool) string {
	if s == nil || strings.TrimSpace(*s) == "" {
		// Absent, it is refused where required; given empty, always (a
		// precheck checks what it is given as creation would).
		if required || s != nil {
			v.Add(field, "is required")
		}
		return ""
	}
	u, err := url.Parse(strings.TrimSpace(*s))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || utf8.RuneCountInString(*s) > 2000 {
		v.Add(field, "must be an absolute http or https URL of at most 2000 characters")
		return ""
	}
	return u.String()
}

// checkMerchantRef checks a merchant_ref: required (absent or empty) when
// required, and when given at most 100 characters and not "." or ".."
// (which no URL path carries: GET /v1/status/{reference} could never find
// it). It returns the trimmed value.
func checkMerchantRef(v ValidationErrors, in *string, required bool) string {
	if in == nil || strings.TrimSpace(*in) == "" {
		if required || in != nil {
			v.Add("merchant_ref", "is required")
		}
		return ""
	}
	ref := strings.TrimSpace(*in)
	switch {
	case utf8.RuneCountInString(ref) > 100:
		v.Add("merchant_ref", "must be at most 100 characters")
	case ref == "." || ref == "..":
		v.Add("merchant_ref", `must not be "." or "..", which a URL path cannot name`)
	}
	return ref
}

// callbackURL checks a callback_url: it receives webhooks, so the webhook
// URL rules apply, the same as at every delivery.
func (a *App) callbackURL(ctx context.Context, v ValidationErrors, raw *string) string {
	callback := validURL(v, "callback_url", raw, false)
	if callback == "" || a.CheckWebhookURL == nil {
		return callback
	}
	if err := a.CheckWebhookURL(ctx, callback); err != nil {
		var e *Error
		if !errors.As(err, &e) {
			v.Add("callback_url", "could not be checked")
			return ""
		}
		for _, m := range e.Fields["url"] {
			v.Add("callback_url", m)
		}
		return ""
	}
	return callback
}

// Convert turns an amount into another currency at an exact rate, rounding
// half away from zero to the minor unit: big.Rat, never a float.
func Convert(a Amount, to Currency, rate *big.Rat) Amount {
	r := new(big.Rat).Mul(new(big.Rat).SetInt64(a.Minor), rate)
	num, den := r.Num(), r.Denom()
	q, m := new(big.Int).QuoRem(num, den, new(big.Int))
	if new(big.Int).Mul(new(big.Int).Abs(m), big.NewInt(2)).Cmp(den) >= 0 {
		if r.Sign() >= 0 {
			q.Add(q, big.NewInt(1))
		} else {
			q.Sub(q, big.NewInt(1))
		}
	}
	return Amount{Minor: q.Int64(), Currency: to}
}

// paymentDraft is a creation body checked and priced: the payment it
// would create, not yet written, and the provider it names.
type paymentDraft struct {
	t        *Transaction
	provider string // "" when the payer chooses on the hosted page
	pub      bool   // made with a publishable key
}

// draftPayment turns a creation body into the payment it would create:
// every check that needs no database (the merchant's status and KYC, the
// fields, the payer's phone, the price and its worth in XOF for limits).
// A precheck does not require merchant_ref, success_url and failed_url,
// which no limit depends on, but checks them when given. It returns
// merchant_inactive, merchant_kyc_required, validation_error,
// amount_must_be_positive or invalid_phone_number.
func (a *App) draftPayment(ctx context.Context, p *Principal, in PaymentInput, precheck bool) (*paymentDraft, error) {
	m := p.Merchant
	if err := m.ActiveError(); err != nil {
		return nil, err
	}
	if p.Mode() == ModeLive && m.KYC != KYCApproved {
		return nil, E(EMerchantKYCRequired)
	}
	v := ValidationErrors{}
	// A precheck needs no merchant_ref, but checks one given, empty too:
	// creation would refuse it.
	ref := checkMerchantRef(v, in.MerchantRef, !precheck)
	cur := XOF
	if in.Currency != nil {
		if cur = Currency(strings.ToUpper(strings.TrimSpace(*in.Currency))); !cur.Valid() {
			v.Add("currency", "must be one of XOF, EUR, USD")
		}
	}
	country := m.Country
	if in.Country != nil {
		if country = Country(strings.ToUpper(strings.TrimSpace(*in.Country))); !country.Valid() {
			v.Add("country", "must be one of SN, CI, ML, BF, TG, BJ, NE, GW")
		}
	}
	provider := ""
	if in.Provider != nil && strings.TrimSpace(*in.Provider) != "" {
		provider = strings.TrimSpace(*in.Provider)
	}
	pub := p.Key.Type == KeyPublishable
	if pub {
		in.refusePublishable(v)
	}
	phone, name := in.payerFields(v, country)
	success := validURL(v, "success_url", in.SuccessURL, !precheck && !in.noReturn)
	failed := validURL(v, "failed_url", in.FailedURL, !precheck && !in.noReturn)
	if pub {
		for _, u := range []struct{ field, url string }{{"success_url", success}, {"failed_url", failed}} {
			if u.url != "" && !m.ReturnHostAllowed(u.url) {
				v.Add(u.field, returnHostsMessage(m))
			}
		}
	}
	callback := a.callbackURL(ctx, v, in.CallbackURL)
	md := map[string]string{}
	if len(in.Metadata) > MetadataMaxKeys {
		v.Add("metadata", "at most 20 keys are allowed")
	}
	for k, val := range in.Metadata {
		switch x := val.(type) {
		case string:
			md[k] = x
		case json.Number:
			md[k] = x.String()
		case bool:
			md[k] = fmt.Sprint(x)
		case nil:
		default:
			v.Add("metadata."+k, "must be a string, number or boolean")
		}
	}
	ValidateMetadata(v, md)
	expiresIn := int64(a.Config.PaymentExpirySeconds)
	if in.ExpiresIn != nil {
		if expiresIn = *in.ExpiresIn; expiresIn < MinExpiresIn || expiresIn > MaxExpiresIn {
			v.Add("expires_in", fmt.Sprintf("must be between %d and %d seconds", MinExpiresIn, MaxExpiresIn))
		}
	}
	amount, err := WholeUnits(v, "amount", in.Amount, cur)
	if err := v.Err(); err != nil {
		return nil, err // before amount_must_be_positive
	}
	if err != nil {
		return nil, err
	}
	if phone != "" {
		if phone, err = ParsePhone(phone, country); err != nil {
			return nil, err
		}
	}
	now := a.now()
	t := &Transaction{
		ID: a.NewID(), MerchantID: m.ID, Mode: p.Mode(), Type: TypePayment, Reference: NewReference(),
		MerchantRef: ref, Status: StatusInitiated, Amount: amount, Country: country, PayerPhone: phone,
		PayerName: name, SuccessURL: success, FailedURL: failed, CallbackURL: callback, Metadata: md,
		ExpiresAt: now.Add(time.Duration(expiresIn) * time.Second), CreatedAt: now, UpdatedAt: now,
		KeyType: p.Key.Type,
	}
	if err := a.price(t, m); err != nil {
		return nil, err
	}
	units, err := a.inXOF(t.Amount)
	if err != nil {
		return nil, err
	}
	t.LimitAmount = units * 100
	return &paymentDraft{t: t, provider: provider, pub: pub}, nil
}

// CreatePayment validates and creates a payment, then, when a provider is
// named, initiates it. Errors: merchant_inactive, merchant_kyc_required,
// validation_error, amount_must_be_positive, invalid_phone_number,
// provider_unavailable, provider_country_unsupported,
// merchant_provider_not_authorized, fees_unavailable,
// amount_below_merchant_minimum, amount_below_provider_minimum,
// amount_above_merchant_maximum, daily_limit_exceeded,
// merchant_limit_exceeded, bceao_limit_exceeded, gateway_unavailable,
// gateway_error.
func (a *App) CreatePayment(ctx context.Context, p *Principal, idemKey string, in PaymentInput) (*Transaction, error) {
	d, err := a.draftPayment(ctx, p, in, false)
	if err != nil {
		return nil, err
	}
	m, t, provider, pub := p.Merchant, d.t, d.provider, d.pub
	ref, now := t.MerchantRef, t.CreatedAt
	// The intent is durable before any provider hears of it, except when
	// the provider answers in this process (test mode's simulators): then
	// the payment, its initiation and its answer are one transaction.
	hookNow := provider == ""
	inTx := !hookNow && a.Gateway != nil && a.Gateway.InProcess(t.Mode)
	if !hookNow {
		// A payment sent to a provider can outlive a 5xx answer to its
		// creation: the request retried under its key is answered it
		// (createdBy).
		t.CreationKey = idemKey
	}
	// Its amount is reserved against the limits until it is in the volume
	// counters, pending or settled, or will not be; not before it passed
	// the checks it needs no counter for.
	if err := a.checkAlone(ctx, m, t, provider); err != nil {
		return a.orCreatedBefore(ctx, t, provider, err)
	}
	ctx, release := a.reserveLimits(ctx, t, provider)
	defer release()
	if err := a.checkCreation(ctx, m, t, provider); err != nil {
		return a.orCreatedBefore(ctx, t, provider, err)
	}
	t.Provider = provider

	var out *Transaction
	var gerr error
	answered := false
	// The command may run again (Rerunnable): each run starts from the
	// draft, not from what the last run made of it.
	draft := *t
	err = a.update(Rerunnable(ctx), func(tx Tx) error {
		d := draft
		t, out, gerr, answered = &d, nil, nil, false
		if pub {
			if err := a.countPublishableCreation(ctx, tx, p); err != nil {
				return err
			}
		}
		// The payer's customer is found or made with the lookup, in one
		// round trip: a payment found by merchant_ref has the same payer,
		// so the upsert then only reads it, or rolls back with the error.
		var payer *Customer
		if t.PayerPhone != "" {
			payer = &Customer{ID: a.NewID(), MerchantID: m.ID, Mode: t.Mode,
				Phone: t.PayerPhone, Name: t.PayerName, CreatedAt: now, UpdatedAt: now}
		}
		existing, c, err := tx.TransactionByMerchantRefAndPayer(ctx, m.ID, t.Mode, t.KeyType, ref, payer)
		fresh := existing == nil
		switch {
		case err != nil:
			return fmt.Errorf("merchant_ref and payer: %w", err)
		case fresh:
			if c != nil {
				t.CustomerID = c.ID
			}
		case resumable(existing, t) && a.now().Before(existing.ExpiresAt):
			// A retry of a creation whose initiation never reached the
			// provider: carry on with the same payment. Past its
			// expires_at it is sent to no provider: the expiry, which runs
			// every few seconds, ends it. A retry under another key makes
			// that key the payment's: the one its client retries with.
			key := t.CreationKey
			t = existing
			if key != "" && key != t.CreationKey {
				t.CreationKey = key
				if !inTx {
					if err := tx.UpdateTransaction(ctx, t); err != nil {
						return fmt.Errorf("update transaction: %w", err)
					}
				}
			}
			if !inTx {
				return nil
			}
		case createdBy(existing, t):
			out, answered = a.decorate(existing), true
			return RunCommitHook(ctx, tx, out)
		default:
			return merchantRefUsed(existing, !p.Key.HasScope(ScopeReadTransactions))
		}
		if inTx {
			out, gerr, err = a.initiateIn(ctx, tx, t, fresh)
			return err
		}
		if err := tx.InsertTransaction(ctx, t); err != nil {
			return fmt.Errorf("insert transaction: %w", err)
		}
		if err := a.countPayment(ctx, tx, t, StatusInitiated); err != nil {
			return err
		}
		if hookNow {
			return RunCommitHook(ctx, tx, a.decorate(t))
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case gerr != nil:
		return nil, gerr
	case inTx, answered:
		return out, nil
	case hookNow:
		return a.decorate(t), nil
	}
	return a.initiate(ctx, t.ID)
}

// orCreatedBefore answers a creation that a check refused (refusal) with
// the payment the same request created before under its Idempotency-Key
// (createdBy), as it now is, running the request's commit hook: the checks
// weigh that payment itself now (the limits count it; its provider, whose
// answer timed out, may look unhealthy). Without one, the refusal stands;
// one still resumable goes to the refusal too, as creation would resume
// it only once the checks pass.
func (a *App) orCreatedBefore(ctx context.Context, t *Transaction, provider string, refusal error) (*Transaction, error) {
	if t.CreationKey == "" || t.MerchantRef == "" {
		return nil, refusal
	}
	asked := *t
	asked.Provider = provider
	x := a.byMerchantRef(ctx, t.MerchantID, t.MerchantRef, func(x *Transaction) bool {
		return createdBy(x, &asked) && !(resumable(x, &asked) && a.now().Before(x.ExpiresAt))
	})
	if x == nil {
		return nil, refusal
	}
	return a.finish(ctx, x.ID, nil) // as it now is, with the request's answer
}

// byMerchantRef returns the merchant's transaction whose merchant_ref is
// ref and that match accepts (LookupTransactions finds ids and references
// too), nil when there is none or it cannot be read: its callers then go
// on as without one.
func (a *App) byMerchantRef(ctx context.Context, merchantID, ref string, match func(*Transaction) bool) *Transaction {
	list, err := a.Store.LookupTransactions(ctx, merchantID, ref)
	if err != nil {
		return nil
	}
	for _, x := range list {
		if x.MerchantRef == ref && match(x) {
			return x
		}
	}
	return nil
}

// initiateIn initiates a payment with an in-process provider inside the
// command's transaction: the payment is written (inserted when fresh)
// already pending, or settled, with its ledger entries and events, and the
// request's answer. A refusal writes the payment initiated with the
// reason, commits, and is returned as gerr, so a retry resumes it.
func (a *App) initiateIn(ctx context.Context, tx Tx, t *Transaction, fresh bool) (out *Transaction, gerr, err error) {
	res, gerr := a.Gateway.Initiate(ctx, a.initiateRequest(t))
	write := func() error {
		if !fresh {
			return tx.UpdateTransaction(ctx, t)
		}
		if err := tx.InsertTransaction(ctx, t); err != nil {
			return fmt.Errorf("insert transaction: %w", err)
		}
		return nil
	}
	if gerr != nil {
		t.FailureReason, t.UpdatedAt = string(ErrorCode(gerr)), a.now()
		if err := write(); err != nil {
			return nil, nil, err
		}
		if fresh {
			// Refused, it stays initiated: it has entered that status (a
			// resumed one was counted when it did).
			return nil, gerr, a.countPayment(ctx, tx, t, StatusInitiated)
		}
		return nil, gerr, nil
	}
	t.ProviderRef, t.NextAction = res.ProviderRef, res.NextAction
	t.Route, t.RouteReason = res.Route, res.RouteReason
	t.FailureReason, t.UpdatedAt = "", a.now()
	if to, ev, final := outcome(res.State); final {
		// Settled at once: straight to the outcome, written once, without
		// the pending memo and hold that the same transaction would undo.
		t.NextAction, t.fresh = nil, fresh
		if err := a.move(ctx, tx, t, to, ev, res.Reason, write); err != nil {
			return nil, nil, err
		}
	} else {
		t.Status = StatusPending
		if err := write(); err != nil {
			return nil, nil, err
		}
		if err := a.postPayment(ctx, tx, t, StatusInitiated, StatusPending); err != nil {
			return nil, nil, err
		}
	}
	out = a.decorate(t)
	return out, nil, RunCommitHook(ctx, tx, out)
}

// initiateRequest is what a provider is asked to collect a payment.
func (a *App) initiateRequest(t *Transaction) InitiateRequest {
	return InitiateRequest{
		Mode: t.Mode, TransactionID: t.ID, Reference: t.Reference, Provider: t.Provider, Country: t.Country,
		Amount: t.Amount, PayerPhone: t.PayerPhone, PayerName: t.PayerName,
		SubMerchant: t.Metadata["aggregated_merchant_id"], NotifyURL: a.notifyURL(t.Provider),
		ExpiresAt: t.ExpiresAt,
	}
}

// merchantRefUsed is the validation_error of a merchant_ref that another
// record holds. A key that may not read (a publishable key, a secret key
// without can_read_transactions) learns nothing of that record.
func merchantRefUsed(existing *Transaction, hide bool) *Error {
	if hide {
		return merchantRefTaken()
	}
	return &Error{Code: EValidation, Fields: ValidationErrors{"merchant_ref": {
		fmt.Sprintf("is already used by %s (%s)", existing.Reference, existing.Status)}}}
}

// resumable reports whether an existing payment with the same merchant_ref
// is the unfinished creation of the same payment: one the provider did not
// take (502 gateway_error or 503 gateway_unavailable left it initiated),
// asked again with the same fields. A request that changes any of them is
// another payment, whose merchant_ref is taken.
func resumable(old, t *Transaction) bool {
	return old.Status == StatusInitiated && old.ProviderRef == "" && samePayment(old, t)
}

// samePayment reports whether old, a payment with a provider, has every
// field the request t asks for.
func samePayment(old, t *Transaction) bool {
	// expires_in is kept as expires_at: the same request asks the same
	// lifetime from its creation.
	return old.Type == TypePayment && old.Provider != "" && old.Provider == t.Provider && old.Amount == t.Amount &&
		old.ExpiresAt.Sub(old.CreatedAt) == t.ExpiresAt.Sub(t.CreatedAt) &&
		old.PayerPhone == t.PayerPhone && old.PayerName == t.PayerName && old.Country == t.Country &&
		old.SuccessURL == t.SuccessURL && old.FailedURL == t.FailedURL && old.CallbackURL == t.CallbackURL &&
		maps.Equal(old.Metadata, t.Metadata)
}

// createdBy reports whether old is the payment the request t, under its
// Idempotency-Key, created before: the request retried after a 5xx (its
// key released) once the payment moved on, from a provider's
// notification or reconciliation. It is answered the payment as it now
// is, where its merchant_ref, taken by itself, was refused.
func createdBy(old, t *Transaction) bool {
	return t.CreationKey != "" && old.CreationKey == t.CreationKey && old.Mode == t.Mode &&
		old.KeyType == t.KeyType && old.MerchantRef == t.MerchantRef && samePayment(old, t)
}

// price freezes the exchange rate when the currency is not the merchant's
// settlement currency, and the amount limits count in XOF.
func (a *App) price(t *Transaction, m *Merchant) error {
	if t.Amount.Currency != m.SettlementCurrency {
		rate, ok := a.Config.Rate(t.Amount.Currency, m.SettlementCurrency)
		if !ok {
			return &Error{Code: EValidation, Fields: ValidationErrors{"currency": {
				fmt.Sprintf("no exchange rate from %s to the settlement currency %s", t.Amount.Currency, m.SettlementCurrency)}}}
		}
		s := Convert(t.Amount, m.SettlementCurrency, rate)
		if s.Minor <= 0 {
			// A payment worth nothing to the merchant could post nothing
			// (1 to 3 XOF is 0.00 EUR), where a floor of 0 lets it through.
			return &Error{Code: EValidation, Fields: ValidationErrors{"amount": {
				fmt.Sprintf("is worth %s %s in the settlement currency: too small", s.Decimal(), m.SettlementCurrency)}}}
		}
		t.SettlementAmount = &s
		t.ExchangeRate = RateString(rate)
	}
	return nil
}

// RateString shows an exchange rate with nine decimals, one more for each
// leading zero of a rate under 1 (ten significant digits there), trailing
// zeros dropped: 655.957, and its inverse 0.001524490172, from which
// amount × rate gives back the settlement amount to the cent for any
// amount the limits allow (six decimals, 0.001524, gave 1524.00 for
// 1,000,000 XOF settled as 1524.49 EUR). The conversion itself uses the
// exact fraction.
func RateString(r *big.Rat) string {
	decimals := 9
	ten := big.NewRat(10, 1)
	for x := new(big.Rat).Abs(r); x.Sign() > 0 && x.Cmp(big.NewRat(1, 1)) < 0 && decimals < 40; x.Mul(x, ten) {
		decimals++
	}
	return strings.TrimRight(strings.TrimRight(r.FloatString(decimals), "0"), ".")
}

// inXOF is an amount's worth in whole XOF units, for limits.
func (a *App) inXOF(x Amount) (int64, error) {
	if x.Currency == XOF {
		// What Convert gives at the rate of 1 Rate returns, without the
		// big.Rat arithmetic: four times on every payment's path.
		return x.Minor / 100, nil
	}
	rate, ok := a.Config.Rate(x.Currency, XOF)
	if !ok {
		return 0, &Error{Code: EValidation, Fields: ValidationErrors{"currency": {"no exchange rate to XOF"}}}
	}
	// Rounded up to the franc: a limit compares the whole worth, and
	// 655.96 XOF is above a 655 XOF maximum.
	return (Convert(x, XOF, rate).Minor + 99) / 100, nil
}

// checkMerchantLimits applies the merchant's floor, ceiling and daily and
// monthly volume.
func (a *App) checkMerchantLimits(ctx context.Context, m *Merchant, t *Transaction) error {
	units, err := a.inXOF(t.Amount)
	if err != nil {
		return err
	}
	l := a.Config.LimitsFor(m.ID)
	if l.MinAmount > 0 && units < l.MinAmount {
		return E(EAmountBelowMerchantMinimum, "minimum", l.MinAmount, "currency", string(XOF))
	}
	if l.MaxAmount > 0 && units > l.MaxAmount {
		return E(EAmountAboveMerchantMaximum, "maximum", l.MaxAmount, "currency", string(XOF))
	}
	now := a.now()
	for _, w := range []struct {
		limit int64
		since time.Time
		name  string
	}{{l.Daily, startOfDay(now), "daily"}, {l.Monthly, startOfMonth(now), "monthly"}} {
		if w.limit <= 0 {
			continue
		}
		used, err := a.volume(ctx, VolumeQuery{Mode: t.Mode, MerchantID: m.ID, Since: w.since, HoldSince: now.Add(-PendingHold)})
		if err != nil {
			return fmt.Errorf("merchant volume: %w", err)
		}
		if used/100+units > w.limit {
			e := E(EMerchantLimitExceeded, "period", w.name, "limit", w.limit, "currency", string(XOF))
			e.Message = fmt.Sprintf("The merchant's %s collection limit of %d XOF would be exceeded.", w.name, w.limit)
			return e
		}
	}
	return nil
}

// checkProvider applies a provider's rules to a payment: it exists and is
// on, serves the country, the merchant may use it, it has a fee grid, the
// amount is above its floor and within the merchant's daily ceiling on it.
func (a *App) checkProvider(ctx context.Context, m *Merchant, t *Transaction, provider string) error {
	spec, ok := a.Config.Providers[provider]
	if !ok || !spec.Enabled || !spec.Payments {
		return E(EProviderUnavailable, "provider", provider)
	}
	if t.Mode == ModeLive && !spec.LiveReady() {
		return liveUnconfigured(provider)
	}
	if !spec.Serves(t.Country) {
		return E(EProviderCountryUnsupported, "provider", provider, "country", string(t.Country))
	}
	if !m.AllowsProvider(provider) {
		return E(EMerchantProviderNotAuthorized, "provider", provider)
	}
	if _, ok := a.Config.FeeGrid(provider, t.Country); !ok {
		e := E(EFeesUnavailable, "provider", provider, "country", string(t.Country))
		return e
	}
	units, err := a.inXOF(t.Amount)
	if err != nil {
		return err
	}
	if spec.MinAmount > 0 && units < spec.MinAmount {
		return E(EAmountBelowProviderMinimum, "minimum", spec.MinAmount, "provider", provider, "currency", string(XOF))
	}
	if spec.DailyLimit > 0 {
		used, err := a.volume(ctx, providerVolume(t, m.ID, provider, a.now()))
		if err != nil {
			return fmt.Errorf("provider volume: %w", err)
		}
		if used/100+units > spec.DailyLimit {
			return E(EDailyLimitExceeded, "limit", spec.DailyLimit, "currency", string(XOF), "provider", provider)
		}
	}
	return nil
}

// payerRoom is a payer's place under the BCEAO rules: the tier, the
// tier's ceiling over a rolling 30 days in whole XOF units (0: none), and
// what the payer paid in those days, across every merchant, in minor
// units of XOF (read only under a ceiling).
type payerRoom struct {
	tier          int
	ceiling, used int64
}

// remaining is what the payer may still pay before the ceiling, in XOF;
// ok is false when the tier has no ceiling.
func (r payerRoom) remaining() (Amount, bool) {
	if r.ceiling <= 0 {
		return Amount{}, false
	}
	return Amount{Minor: max(0, r.ceiling*100-r.used), Currency: XOF}, true
}

// payerRoomOf reads the payer's tier, ceiling and 30-day volume.
func (a *App) payerRoomOf(ctx context.Context, t *Transaction) (payerRoom, error) {
	r := payerRoom{tier: a.Config.BCEAO.DefaultTier}
	if k, ok := a.Config.BCEAO.Phones[t.PayerPhone]; ok {
		r.tier = k
	}
	for _, k := range a.Config.BCEAO.Tiers {
		if k.Tier == r.tier {
			r.ceiling = k.Ceiling
		}
	}
	if r.ceiling <= 0 {
		return r, nil
	}
	// A rolling 30 days: today and the 29 days before it (UTC).
	used, err := a.volume(ctx, payerVolume(t, a.now()))
	if err != nil {
		return r, fmt.Errorf("payer volume: %w", err)
	}
	r.used = used
	return r, nil
}

// checkPayerCeiling applies the BCEAO ceiling of the payer's tier over a
// rolling 30 days, across every merchant; it returns the payer's room as
// it found it.
func (a *App) checkPayerCeiling(ctx context.Context, t *Transaction) (payerRoom, error) {
	r, err := a.payerRoomOf(ctx, t)
	if err != nil || r.ceiling <= 0 {
		return r, err
	}
	units, err := a.inXOF(t.Amount)
	if err != nil {
		return r, err
	}
	if r.used/100+units > r.ceiling {
		return r, E(EBCEAOLimitExceeded, "tier", r.tier, "ceiling", r.ceiling)
	}
	return r, nil
}

// providerVolume reads the merchant's collections through a provider
// today, for the provider's daily limit.
func providerVolume(t *Transaction, merchantID, provider string, now time.Time) VolumeQuery {
	return VolumeQuery{Mode: t.Mode, MerchantID: merchantID, Provider: provider, Since: startOfDay(now), HoldSince: now.Add(-PendingHold)}
}

// payerVolume reads what the payer paid over a rolling 30 days: today and
// the 29 days before it (UTC), for the BCEAO ceiling.
func payerVolume(t *Transaction, now time.Time) VolumeQuery {
	return VolumeQuery{Mode: t.Mode, PayerPhone: t.PayerPhone, Since: startOfDay(now).AddDate(0, 0, -29), HoldSince: now.Add(-PendingHold)}
}

type volumesKey struct{}

// prefetchVolumes reads, in one round trip, every volume a payment's
// limits need (the merchant's day and month, each provider's day, the
// payer's 30 days), for the checks to find in ctx.
func (a *App) prefetchVolumes(ctx context.Context, m *Merchant, t *Transaction, providers []string) context.Context {
	if volumesSkipped(ctx) {
		return ctx
	}
	now := a.now()
	hold := now.Add(-PendingHold)
	var qs []VolumeQuery
	l := a.Config.LimitsFor(m.ID)
	if l.Daily > 0 {
		qs = append(qs, VolumeQuery{Mode: t.Mode, MerchantID: m.ID, Since: startOfDay(now), HoldSince: hold})
	}
	if l.Monthly > 0 {
		qs = append(qs, VolumeQuery{Mode: t.Mode, MerchantID: m.ID, Since: startOfMonth(now), HoldSince: hold})
	}
	for _, provider := range providers {
		if spec, ok := a.Config.Providers[provider]; ok && spec.DailyLimit > 0 {
			qs = append(qs, providerVolume(t, m.ID, provider, now))
		}
	}
	if t.PayerPhone != "" {
		qs = append(qs, payerVolume(t, now))
	}
	if len(qs) < 2 {
		return ctx
	}
	vs, err := a.Store.Volumes(ctx, qs)
	if err != nil {
		return ctx // the checks read them one by one, and report the error
	}
	got := make(map[volumeQueryKey]int64, len(qs))
	for i, q := range qs {
		got[q.key()] = vs[i]
	}
	return context.WithValue(ctx, volumesKey{}, got)
}

// volume reads a volume, from the prefetched ones when ctx has it, with
// what the process's other payments being created had reserved in its
// scope before ctx's payment (reserveLimits).
func (a *App) volume(ctx context.Context, q VolumeQuery) (int64, error) {
	if volumesSkipped(ctx) {
		return 0, nil
	}
	other := inFlightOf(ctx, q.Scope())
	if got, ok := ctx.Value(volumesKey{}).(map[volumeQueryKey]int64); ok {
		if v, ok := got[q.key()]; ok {
			return v + other, nil
		}
	}
	v, err := a.Store.Volume(ctx, q)
	return v + other, err
}

func startOfDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

func startOfMonth(t time.Time) time.Time {
	y, m, _ := t.UTC().Date()
	return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
}

// decorate sets what a record shows but the database does not keep.
func (a *App) decorate(t *Transaction) *Transaction {
	if t.Type == TypePayment {
		t.PaymentURL = strings.TrimRight(a.BaseURL, "/") + "/checkout/" + t.ID
	}
	return t
}

// initiate asks the provider to collect a payment in initiated and moves
// it to pending (or straight to its outcome when the provider settles at
// once). The request's commit hook runs in the transaction that records
// the provider's answer. A provider that cannot be reached leaves the
// payment initiated, so that a retry resumes it.
func (a *App) initiate(ctx context.Context, id string) (*Transaction, error) {
	t, err := a.Store.Transaction(ctx, "", id)
	if err != nil {
		return nil, err
	}
	// Asked to the end though the client hangs up, and its answer recorded:
	// cut off, the collection could be the provider's while the payment
	// waited for its notification (CreateRefund says the same of refunds).
	pctx, cancel := providerContext(ctx)
	res, gerr := a.Gateway.Initiate(pctx, a.initiateRequest(t))
	cancel()
	ctx = context.WithoutCancel(ctx)
	if gerr != nil {
		var e *Error
		if !errors.As(gerr, &e) {
			gerr = E(EGatewayUnavailable, "provider", t.Provider)
		}
		if uerr := a.update(ctx, func(tx Tx) error {
			cur, err := tx.TransactionForUpdate(ctx, id)
			if err != nil {
				return err
			}
			cur.FailureReason = string(ErrorCode(gerr))
			cur.UpdatedAt = a.now()
			return tx.UpdateTransaction(ctx, cur)
		}); uerr != nil {
			return nil, errors.Join(gerr, uerr)
		}
		return nil, gerr
	}
	var out *Transaction
	err = a.update(ctx, func(tx Tx) error {
		cur, err := tx.TransactionForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if cur.Status == StatusInitiated {
			cur.ProviderRef, cur.NextAction = res.ProviderRef, res.NextAction
			cur.Route, cur.RouteReason = res.Route, res.RouteReason
			cur.FailureReason = ""
			if err := a.postPayment(ctx, tx, cur, StatusInitiated, StatusPending); err != nil {
				return err
			}
			cur.Status = StatusPending
			cur.UpdatedAt = a.now()
			if err := tx.UpdateTransaction(ctx, cur); err != nil {
				return fmt.Errorf("update transaction: %w", err)
			}
			if res.State != ProviderPending && res.State != "" {
				if err := a.settle(ctx, tx, cur, res.State, res.Reason); err != nil {
					return err
				}
			}
		}
		out = a.decorate(cur)
		return RunCommitHook(ctx, tx, out)
	})
	return out, err
}

func (a *App) notifyURL(provider string) string {
	return strings.TrimRight(a.BaseURL, "/") + "/v1/providers/" + provider + "/notifications"
}

// settle moves an open payment to the outcome a provider reports and
// writes its event, inside tx. A payment no longer open is left alone.
func (a *App) settle(ctx context.Context, tx Tx, t *Transaction, state ProviderState, reason string) error {
	if !t.Status.Open() {
		if state == ProviderSuccess && t.collectedLate() {
			// The payer paid at the provider after the payment was
			// cancelled (the hosted page's cancel reaches no provider) or
			// expired: the money was collected, and it is the merchant's.
			// The payment succeeds, with its event, rather than leave the
			// payer charged for a payment that says it was not paid.
			return a.transition(ctx, tx, t, StatusSuccess, EventPaymentSuccess, "")
		}
		return nil
	}
	to, ev, ok := outcome(state)
	if !ok {
		return nil
	}
	return a.transition(ctx, tx, t, to, ev, reason)
}

// The failure reasons Xaalis gives itself, codes as the providers' are
// (payer_cancelled, insufficient_funds, ...), so that a merchant may
// branch on them: the hosted page's cancel said "cancelled by the payer"
// where a provider's said payer_cancelled.
const (
	ReasonPayerCancelled      = "payer_cancelled"
	ReasonNotPaidBeforeExpiry = "not_paid_before_expiry"
)

// collectedLate reports whether t is a payment closed without the payer's
// money (cancelled or expired) that a provider was asked to collect: a
// success its provider reports later still moves it.
func (t *Transaction) collectedLate() bool {
	return t.Type == TypePayment && (t.Status == StatusCancelled || t.Status == StatusExpired) && t.Provider != ""
}

// lateUnanswered reports whether t is a payment collectedLate whose
// initiation's answer was lost (its provider's id unknown): its provider
// may hold it under its reference.
func (t *Transaction) lateUnanswered() bool { return t.collectedLate() && t.ProviderRef == "" }

// outcome is the status and event a payment settles in for a provider's
// final state; ok is false for pending.
func outcome(state ProviderState) (Status, string, bool) {
	switch state {
	case ProviderSuccess:
		return StatusSuccess, EventPaymentSuccess, true
	case ProviderFailed:
		return StatusFailed, EventPaymentFailed, true
	case ProviderCancelled:
		return StatusCancelled, EventPaymentCancelled, true
	}
	return "", "", false
}

// transition changes a payment's status and writes its event in tx.
func (a *App) transition(ctx context.Context, tx Tx, t *Transaction, to Status, event, reason string) error {
	return a.move(ctx, tx, t, to, event, reason, func() error { return tx.UpdateTransaction(ctx, t) })
}

// move is transition with the write of the record given: an update, or
// the insert of a payment settled in the transaction that creates it.
func (a *App) move(ctx context.Context, tx Tx, t *Transaction, to Status, event, reason string, write func() error) error {
	if t.Type == TypePayment {
		if err := a.postPayment(ctx, tx, t, t.Status, to); err != nil {
			return err
		}
	}
	wasLate := t.collectedLate()
	t.Status = to
	if to != StatusSuccess {
		t.FailureReason = reason
	} else {
		t.FailureReason = "" // a payment collected late was cancelled or expired
	}
	if to != StatusInitiated && to != StatusPending {
		// Settled: the payer has nothing left to do (next_action: null
		// when nothing).
		t.NextAction = nil
	}
	t.UpdatedAt = a.now()
	if err := write(); err != nil {
		return fmt.Errorf("write transaction: %w", err)
	}
	if wasLate {
		// Collected late: nothing left to ask its provider (closeOpen).
		if err := tx.SetLatePoll(ctx, t.ID, time.Time{}); err != nil {
			return err
		}
	}
	if err := a.writeEvent(ctx, tx, t, event); err != nil {
		return err
	}
	return a.onSubscriptionPayment(ctx, tx, t, to)
}

// closeOpen is transition to cancelled or expired when Xaalis, not the
// provider, closes the payment (the hosted page's cancel, expiry): the
// provider, still asking the payer, may collect it after all, so it is
// asked again later (ReconcileDue), in case that notification is lost. A
// provider's own final answer needs no such poll.
func (a *App) closeOpen(ctx context.Context, tx Tx, t *Transaction, to Status, event, reason string) error {
	// Even one whose last attempt a provider refused (502 gateway_error):
	// an earlier attempt, or another route, may have reached it. One the
	// provider never received stops at the first poll (pollLate).
	if err := a.transition(ctx, tx, t, to, event, reason); err != nil {
		return err
	}
	if !t.collectedLate() {
		return nil
	}
	return tx.SetLatePoll(ctx, t.ID, a.nextLatePoll(t.UpdatedAt, t.UpdatedAt))
}

// LatePollWindow is how long after a payment was cancelled or expired its
// provider is still asked whether the payer paid after all: a wallet's
// request to the payer outlives neither a day nor, mostly, an hour.
const LatePollWindow = 24 * time.Hour

// nextLatePoll is when a payment closed at closed is next asked about
// after a poll at now: reconcile_after_seconds after it closed, then at
// intervals that double (about ten polls in LatePollWindow at the default
// 300 s), or never (the zero time) past the window.
func (a *App) nextLatePoll(closed, now time.Time) time.Time {
	next := now.Add(max(time.Duration(a.Config.ReconcileAfterSeconds)*time.Second, now.Sub(closed)))
	if next.Sub(closed) > LatePollWindow {
		return time.Time{}
	}
	return next
}

// writeEvent stores an event carrying the record as it now is.
func (a *App) writeEvent(ctx context.Context, tx Tx, t *Transaction, event string) error {
	// MarshalJSON itself, not json.Marshal: the same bytes without
	// json.Marshal's second pass over them, on every payment's path.
	data, err := a.decorate(t).MarshalJSON()
	if err != nil {
		return err
	}
	ev := &Event{ID: a.NewID(), MerchantID: t.MerchantID, Mode: t.Mode, Type: event, ObjectType: "transaction",
		ObjectID: t.ID, Data: data, CreatedAt: t.UpdatedAt, First: t.fresh}
	return a.emit(ctx, tx, ev, t.CallbackURL)
}

// LookupTransaction finds one of the merchant's payments or payouts by id,
// TXN- reference (16 or 14 characters) or merchant_ref, in the key's mode
// (the spec's GET /v1/status/{reference}: "works for payments and
// payouts"; a refund is read at GET /v1/refunds/{id}). It returns
// not_found or livemode_mismatch.
func (a *App) LookupTransaction(ctx context.Context, p *Principal, key string) (*Transaction, error) {
	t, err := a.lookup(ctx, p, key, "")
	if err == nil && t.Type == TypeRefund {
		return nil, ErrNotFound
	}
	return t, err
}

// lookup finds a transaction by id, reference or merchant_ref, of one
// type unless typ is "". An exact id or reference wins over a
// merchant_ref; among merchant_refs, the secret key's record wins over a
// payment made with a publishable key, which has a namespace of its own.
func (a *App) lookup(ctx context.Context, p *Principal, key string, typ TxType) (*Transaction, error) {
	if key == "" || len(key) > 255 {
		return nil, ErrNotFound
	}
	list, err := a.Store.LookupTransactions(ctx, p.Merchant.ID, key)
	if err != nil {
		return nil, fmt.Errorf("lookup transaction: %w", err)
	}
	if low := strings.ToLower(key); len(list) == 0 && low != key && isUUID(low) {
		// An id in upper case (RFC 9562 reads UUIDs in either case); ids
		// are stored in lower case. Only on a miss: a merchant_ref that
		// happens to look like one is found as written.
		key = low
		if list, err = a.Store.LookupTransactions(ctx, p.Merchant.ID, key); err != nil {
			return nil, fmt.Errorf("lookup transaction: %w", err)
		}
	}
	rank := func(t *Transaction) int {
		switch {
		case t.ID == key || t.Reference == key:
			return 0
		case !t.Publishable():
			return 1
		}
		return 2
	}
	var best *Transaction
	var other bool
	for _, t := range list {
		if typ != "" && t.Type != typ {
			continue
		}
		if t.Mode != p.Mode() {
			other = true
			continue
		}
		if best == nil || rank(t) < rank(best) {
			best = t
		}
	}
	switch {
	case best != nil:
		return a.decorate(best), nil
	case other:
		return nil, E(ELivemodeMismatch)
	}
	return nil, ErrNotFound
}

// isUUID reports whether s is a UUID in its 36-character hyphenated form.
// UUIDLower returns s in lower case when it is a UUID in another case, s
// otherwise: ids are stored in lower case, and RFC 9562 reads UUIDs in
// either case.
func UUIDLower(s string) string {
	if low := strings.ToLower(s); low != s && isUUID(low) {
		return low
	}
	return s
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}

// Payment returns a payment by id or lookup key; transactions of another
// type are not_found here.
func (a *App) Payment(ctx context.Context, p *Principal, key string) (*Transaction, error) {
	return a.lookupOfType(ctx, p, key, TypePayment)
}

// lookupOfType finds a transaction of one type by id or lookup key; one of
// another type is not_found.
func (a *App) lookupOfType(ctx context.Context, p *Principal, key string, typ TxType) (*Transaction, error) {
	return a.lookup(ctx, p, key, typ)
}

// Payments lists the merchant's payments in the key's mode.
func (a *App) Payments(ctx context.Context, p *Principal, f TxFilter, page PageRequest) ([]*Transaction, Pagination, error) {
	f.MerchantID, f.Mode, f.Type = p.Merchant.ID, p.Mode(), TypePayment
	list, total, err := a.Store.Transactions(ctx, f, page)
	if err != nil {
		return nil, Pagination{}, fmt.Errorf("list payments: %w", err)
	}
	for _, t := range list {
		a.decorate(t)
	}
	return list, NewPagination(page, total), nil
}

// Verify polls the provider about an open payment and applies what it
// says; a change writes its event. It returns not_found,
// livemode_mismatch, gateway_unavailable or gateway_error.
func (a *App) Verify(ctx context.Context, p *Principal, key string) (*Transaction, error) {
	t, err := a.Payment(ctx, p, key)
	if err != nil {
		return nil, err
	}
	if t.answerLost() || t.lateUnanswered() {
		// Its provider may hold it under its reference: asked, it settles
		// or goes pending as the lost answer would have left it.
		if in, err := a.Gateway.Collection(ctx, t.Mode, t.Provider, t.Reference); err == nil {
			return a.adoptFound(ctx, t.ID, in)
		}
	}
	if (!t.Status.Open() && !t.collectedLate()) || t.ProviderRef == "" {
		return a.finish(ctx, t.ID, nil)
	}
	if err := a.Store.Durable(ctx); err != nil {
		return nil, err
	}
	st, err := a.Gateway.Status(ctx, t.Mode, t.Provider, t.Route, t.ProviderRef)
	if err != nil {
		if !t.Status.Open() {
			// A closed payment is answered as it is when its provider
			// cannot say whether the payer paid after all.
			return a.finish(ctx, t.ID, nil)
		}
		return nil, err
	}
	return a.finish(ctx, t.ID, &st)
}

// adoptFound gives a payment whose initiation answer was lost what its
// provider answered about its reference (in), and runs the request's
// commit hook.
func (a *App) adoptFound(ctx context.Context, id string, in Initiation) (*Transaction, error) {
	var out *Transaction
	err := a.update(ctx, func(tx Tx) error {
		t, err := tx.TransactionForUpdate(ctx, id)
		if err != nil {
			return err
		}
		// A payment closed meanwhile takes only a success: only then is
		// the route the provider names its own.
		if t.answerLost() || (t.lateUnanswered() && in.State == ProviderSuccess) {
			t.Route, t.RouteReason = in.Route, in.RouteReason
			if err := a.adopt(ctx, tx, t, in.ProviderRef, in.State, in.Reason); err != nil {
				return err
			}
		}
		out = a.decorate(t)
		return RunCommitHook(ctx, tx, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// answerLost reports whether t is a payment sent to its provider whose
// answer never came: initiated, with a provider but without its id. The
// provider may hold it under its reference.
func (t *Transaction) answerLost() bool {
	return t.Type == TypePayment && t.Status == StatusInitiated && t.Provider != "" && t.ProviderRef == ""
}

// finish applies a provider status (when given) to a payment, records the
// poll, and runs the request's commit hook.
func (a *App) finish(ctx context.Context, id string, st *ProviderStatus) (*Transaction, error) {
	var out *Transaction
	err := a.update(ctx, func(tx Tx) error {
		t, err := tx.TransactionForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if st != nil {
			now := a.now()
			t.ReconciledAt = &now
			if t.Status.Open() && (st.State == ProviderPending || st.State == "") {
				if err := tx.UpdateTransaction(ctx, t); err != nil {
					return err
				}
			} else if err := a.settle(ctx, tx, t, st.State, st.Reason); err != nil {
				return err
			}
		}
		out = a.decorate(t)
		return RunCommitHook(ctx, tx, out)
	})
	return out, err
}

// Simulate acts as the payer of a test payment (the hosted page's test
// buttons and POST /v1/test-helpers/payments/{id}/simulate): success,
// failed or cancelled. It returns livemode_mismatch for a live key or
// payment, validation_error for another outcome or a payment with no
// provider yet, and not_found.
func (a *App) Simulate(ctx context.Context, p *Principal, key, outcome string) (*Transaction, error) {
	if p.Mode() != ModeTest {
		return nil, Errorf(ELivemodeMismatch, "Test helpers take test keys only.")
	}
	t, err := a.Payment(ctx, p, key)
	if err != nil {
		return nil, err
	}
	return a.simulate(ctx, t, outcome)
}

func (a *App) simulate(ctx context.Context, t *Transaction, outcome string) (*Transaction, error) {
	state := ProviderState(outcome)
	switch state {
	case ProviderSuccess, ProviderFailed, ProviderCancelled:
	default:
		return nil, &Error{Code: EValidation, Fields: ValidationErrors{"outcome": {"must be success, failed or cancelled"}}}
	}
	if t.Mode != ModeTest {
		return nil, E(ELivemodeMismatch)
	}
	if t.Status.Open() && t.ProviderRef == "" {
		if state != ProviderCancelled {
			return nil, &Error{Code: EValidation, Fields: ValidationErrors{"outcome": {
				"the payer has not chosen a provider yet; only cancelled applies"}}}
		}
		return a.cancel(ctx, t.ID, ReasonPayerCancelled)
	}
	if t.Status.Open() || (t.collectedLate() && t.ProviderRef != "" && state == ProviderSuccess) {
		// A payer who pays after the payment was cancelled or expired,
		// as one may in a wallet: the late collection succeeds it.
		perr := a.Gateway.PayerAction(ctx, t.Provider, t.ProviderRef, state)
		st, err := a.Gateway.Status(ctx, t.Mode, t.Provider, t.Route, t.ProviderRef)
		if perr != nil && (err != nil || st.State == ProviderPending || st.State == "") {
			return nil, perr
		}
		// A payer who already acted (a first attempt whose answer was lost
		// before the payment moved) leaves the provider's outcome: apply it.
		if err != nil {
			return nil, err
		}
		return a.finish(ctx, t.ID, &st)
	}
	return a.finish(ctx, t.ID, nil)
}

// cancel cancels an open payment on the service's side.
func (a *App) cancel(ctx context.Context, id, reason string) (*Transaction, error) {
	var out *Transaction
	err := a.update(ctx, func(tx Tx) error {
		t, err := tx.TransactionForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if t.Status.Open() {
			if err := a.closeOpen(ctx, tx, t, StatusCancelled, EventPaymentCancelled, reason); err != nil {
				return err
			}
		}
		out = a.decorate(t)
		return RunCommitHook(ctx, tx, out)
	})
	return out, err
}

// NotificationRequest is an inbound notification as received.
type NotificationRequest struct {
	Request *http.Request
	Body    []byte
	// Check, when set, vets a body whose signature verified, before
	// anything of it is stored: the API's own rules for every string a
	// request carries (validation_error for a control character).
	Check func(body []byte) error
}

// ApplyNotification records a verified provider notification: the payment,
// payout or refund it names moves to its outcome, once. It reports whether the notification
// was a duplicate.
func (a *App) ApplyNotification(ctx context.Context, mode Mode, n Notification) (duplicate bool, err error) {
	// A notification is nobody's request: it claims no Idempotency-Key,
	// even when its context came from the request that caused it.
	ctx = WithPendingClaim(ctx, nil)
	t, err := a.Store.TransactionByProviderRef(ctx, mode, n.Provider, n.ProviderRef)
	adopt := false
	if errors.Is(err, ErrNotFound) && n.Reference != "" && n.Dispute == nil {
		// A payment the provider took whose answer never came back (a
		// timeout, a crash): still initiated, it has no ProviderRef yet,
		// and the provider names it by the reference it was sent. Without
		// this the payer's confirmation was refused, and the payment
		// expired although paid.
		if t, err = a.Store.TransactionByReference(ctx, mode, n.Provider, n.Reference); err == nil &&
			(t.Type != TypePayment || t.ProviderRef != "") {
			err = ErrNotFound
		}
		adopt = err == nil
	}
	if err != nil {
		return false, err
	}
	err = a.update(ctx, func(tx Tx) error {
		first, err := tx.NotificationFirstSeen(ctx, n.Provider, n.EventID, a.now())
		if err != nil {
			return err
		}
		if !first {
			duplicate = true
			return nil
		}
		if n.Dispute != nil {
			// A provider reports a dispute on a payment: open it, once.
			if _, err := tx.DisputeByProviderEvent(ctx, n.EventID); err == nil {
				duplicate = true
				return nil
			}
			_, err := a.openDispute(ctx, tx, DisputeOpen{TransactionID: t.ID, Amount: n.Dispute.Amount.Minor,
				Reason: n.Dispute.Reason, ProviderEventID: n.EventID})
			return err
		}
		if t.Type == TypeRefund {
			// The payment before the refund, as every refund command locks.
			if _, err := tx.TransactionForUpdate(ctx, t.ParentID); err != nil {
				return err
			}
		}
		cur, err := tx.TransactionForUpdate(ctx, t.ID)
		if err != nil {
			return err
		}
		if adopt {
			switch cur.ProviderRef {
			case "":
				return a.adopt(ctx, tx, cur, n.ProviderRef, n.State, n.Reason)
			case n.ProviderRef:
				// Given it meanwhile (a resumed creation, another
				// notification): applied as any notification of it.
			default:
				return ErrNotFound
			}
		}
		switch cur.Type {
		case TypePayout:
			if !cur.Status.Open() {
				return nil
			}
			return a.settlePayout(ctx, tx, cur, n.State, n.Reason)
		case TypeRefund:
			if !cur.Status.Open() {
				return nil
			}
			return a.settleRefund(ctx, tx, cur, n.State, n.Reason)
		}
		return a.settle(ctx, tx, cur, n.State, n.Reason)
	})
	return duplicate, err
}

// adopt gives a payment left initiated, its initiation's answer lost, the
// provider's id of its collection and the state the provider reports, in
// tx: settled, or pending as the answer would have left it (reconciliation
// polls it from then on). A payment cancelled or expired meanwhile takes
// only a success (collected late); any other payment no longer initiated
// is left alone.
func (a *App) adopt(ctx context.Context, tx Tx, cur *Transaction, providerRef string, state ProviderState, reason string) error {
	if cur.lateUnanswered() {
		// Cancelled or expired while its provider's answer was lost: a
		// success is money collected late (settle), anything else leaves
		// it as it is.
		if state != ProviderSuccess {
			return nil
		}
		cur.ProviderRef = providerRef
		return a.settle(ctx, tx, cur, state, reason)
	}
	if cur.Status != StatusInitiated {
		return nil
	}
	cur.ProviderRef, cur.FailureReason, cur.UpdatedAt = providerRef, "", a.now()
	if _, _, final := outcome(state); final {
		return a.settle(ctx, tx, cur, state, reason)
	}
	cur.Status = StatusPending
	if err := tx.UpdateTransaction(ctx, cur); err != nil {
		return err
	}
	return a.postPayment(ctx, tx, cur, StatusInitiated, StatusPending)
}

// HandleNotification verifies an inbound notification and applies it. It
// returns invalid_signature, provider_unavailable_webhook, duplicate (a
// notification already handled: answer 200, nothing done) or not_found.
func (a *App) HandleNotification(ctx context.Context, provider string, r NotificationRequest) error {
	n, err := a.Gateway.VerifyNotification(ctx, provider, r.Request, r.Body)
	if err != nil {
		return err
	}
	if r.Check != nil {
		if err := r.Check(r.Body); err != nil {
			return err
		}
	}
	dup, err := a.ApplyNotification(ctx, ModeLive, n)
	if err != nil {
		return err
	}
	if dup {
		return E(EDuplicate)
	}
	return nil
}

// ExpireDue expires open payments past their expires_at; it returns how
// many it expired. Several processes may run it at once: each payment is
// locked and checked again before it moves.
func (a *App) ExpireDue(ctx context.Context, limit int) (int, error) {
	due, err := a.Store.DueTransactions(ctx, DueQuery{Now: a.now(), Limit: limit, Expired: true})
	if err != nil {
		return 0, fmt.Errorf("due expiries: %w", err)
	}
	n := 0
	var errs []error
	for _, d := range due {
		// A payment left initiated by a provider whose answer never came
		// back may have been paid, its notification lost too: the provider
		// is asked by reference, outside the transaction, before it ends.
		var probe *Initiation
		if d.answerLost() && a.Gateway != nil {
			// Asked once: a provider unreachable then leaves it to expire
			// (waiting for it would hold back every expiry behind it).
			if in, err := a.Gateway.Collection(ctx, d.Mode, d.Provider, d.Reference); err == nil {
				probe = &in
			}
		}
		// A pending payment whose notification was lost: its provider is
		// asked once more, as reconciliation would (a payment shorter than
		// reconcile_after_seconds is never polled otherwise).
		var final *ProviderStatus
		if d.Status == StatusPending && d.ProviderRef != "" && a.Gateway != nil {
			if st, err := a.Gateway.Status(ctx, d.Mode, d.Provider, d.Route, d.ProviderRef); err == nil {
				if _, _, ok := outcome(st.State); ok {
					final = &st
				}
			}
		}
		expired := false
		err := a.update(ctx, func(tx Tx) error {
			t, err := tx.TransactionForUpdate(ctx, d.ID)
			if err != nil {
				return err
			}
			// Another process may have moved it since it was read.
			if !t.Status.Open() || t.ExpiresAt.After(a.now()) {
				return nil
			}
			if final != nil && t.Status == StatusPending && t.ProviderRef == d.ProviderRef {
				return a.settle(ctx, tx, t, final.State, final.Reason)
			}
			if probe != nil && t.Status == StatusInitiated && t.ProviderRef == "" {
				// The route that knew it (its refunds go there first).
				t.Route, t.RouteReason = probe.Route, probe.RouteReason
				if _, _, final := outcome(probe.State); final {
					return a.adopt(ctx, tx, t, probe.ProviderRef, probe.State, probe.Reason)
				}
				t.ProviderRef = probe.ProviderRef
			}
			expired = true
			return a.closeOpen(ctx, tx, t, StatusExpired, EventPaymentExpired, ReasonNotPaidBeforeExpiry)
		})
		if err != nil {
			// One payment that cannot move does not hold the others.
			if errs = append(errs, fmt.Errorf("expire %s: %w", d.ID, err)); ctx.Err() != nil {
				break
			}
			continue
		}
		if expired {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// ReconcileDue polls the provider about payments pending longer than the
// configured delay, recovering lost notifications, and about payments
// Xaalis cancelled or expired whose late poll is due (pollLate); it
// returns how many payments changed.
func (a *App) ReconcileDue(ctx context.Context, limit int) (int, error) {
	now := a.now()
	due, err := a.Store.DueTransactions(ctx, DueQuery{Now: now, Limit: limit, Reconcile: true,
		Before: now.Add(-time.Duration(a.Config.ReconcileAfterSeconds) * time.Second)})
	if err != nil {
		return 0, fmt.Errorf("due reconciliations: %w", err)
	}
	// The provider hears only of payments a power cut cannot undo.
	if err := a.Store.Durable(ctx); err != nil {
		return 0, err
	}
	var errs []error
	changed := 0
	for _, t := range due {
		st, err := a.Gateway.Status(ctx, t.Mode, t.Provider, t.Route, t.ProviderRef)
		if err != nil {
			// The provider is down: poll again next round.
			continue
		}
		after, err := a.finish(ctx, t.ID, &st)
		if err != nil {
			// One payment that cannot move does not hold the others.
			if errs = append(errs, fmt.Errorf("reconcile %s: %w", t.ID, err)); ctx.Err() != nil {
				return changed, errors.Join(errs...)
			}
			continue
		}
		if after.Status != t.Status {
			changed++
		}
	}
	late, err := a.Store.DueTransactions(ctx, DueQuery{Now: now, Limit: limit, LatePoll: true})
	if err != nil {
		return changed, errors.Join(append(errs, fmt.Errorf("due late polls: %w", err))...)
	}
	for _, t := range late {
		moved, err := a.pollLate(ctx, t)
		if err != nil {
			if errs = append(errs, fmt.Errorf("late poll %s: %w", t.ID, err)); ctx.Err() != nil {
				break
			}
			continue
		}
		if moved {
			changed++
		}
	}
	return changed, errors.Join(errs...)
}

// pollLate asks the provider about a payment cancelled or expired after it
// was asked to collect it: a success found is money collected late, which
// succeeds the payment (settle) as its notification would have. Another
// final answer stops the polls; no answer, or pending, leaves the next
// poll where the claim put it.
func (a *App) pollLate(ctx context.Context, t *Transaction) (moved bool, err error) {
	// The next poll is set before the provider is asked, in a transaction
	// of its own: a write that fails after the answer, or a provider that
	// never answers, leaves the payment asked again at its next time, not
	// at every round, and past LatePollWindow not at all.
	claimed := false
	err = a.update(ctx, func(tx Tx) error {
		cur, err := tx.TransactionForUpdate(ctx, t.ID)
		if err != nil {
			return err
		}
		if !cur.collectedLate() {
			// Moved meanwhile (or an older release's row): nothing to ask.
			return tx.SetLatePoll(ctx, cur.ID, time.Time{})
		}
		*t, claimed = *cur, true
		return tx.SetLatePoll(ctx, cur.ID, a.nextLatePoll(cur.UpdatedAt, a.now()))
	})
	if err != nil || !claimed {
		return false, err
	}
	var st *ProviderStatus
	var found *Initiation
	state := ProviderPending
	if t.ProviderRef == "" {
		// Its initiation's answer was lost: the provider may hold it
		// under its reference.
		in, err := a.Gateway.Collection(ctx, t.Mode, t.Provider, t.Reference)
		switch {
		case err == nil:
			found, state = &in, in.State
		case errors.Is(err, ErrNotFound):
			// The provider never received it: nothing to collect.
			state = ProviderFailed
		}
	} else if s, err := a.Gateway.Status(ctx, t.Mode, t.Provider, t.Route, t.ProviderRef); err == nil {
		st, state = &s, s.State
	}
	if _, _, final := outcome(state); !final {
		return false, nil
	}
	err = a.update(ctx, func(tx Tx) error {
		cur, err := tx.TransactionForUpdate(ctx, t.ID)
		if err != nil {
			return err
		}
		moved = false
		switch {
		case !cur.collectedLate():
			return nil // moved meanwhile: move() dropped its poll
		case state != ProviderSuccess:
			// The provider's collection ended unpaid: nothing more to ask.
			return tx.SetLatePoll(ctx, cur.ID, time.Time{})
		case found != nil && cur.lateUnanswered():
			moved = true
			cur.Route, cur.RouteReason = found.Route, found.RouteReason
			return a.adopt(ctx, tx, cur, found.ProviderRef, found.State, found.Reason)
		case st != nil && cur.ProviderRef == t.ProviderRef:
			moved = true
			return a.settle(ctx, tx, cur, st.State, st.Reason)
		}
		return nil
	})
	return moved, err
}
