package xaalis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xaalis/xaalis/internal/ledger"
)

// PayoutInput is the body of POST /v1/payouts.
type PayoutInput struct {
	MerchantRef *string `json:"merchant_ref"`
	Amount      *Number `json:"amount"`
	Currency    *string `json:"currency"`
	Provider    *string `json:"provider"`
	Country     *string `json:"country"`
	Recipient   *struct {
		Phone *string `json:"phone"`
		Name  *string `json:"name"`
	} `json:"recipient"`
	Description *string `json:"description"`
	CallbackURL *string `json:"callback_url"`
}

// Payout event types.
const (
	EventPayoutSuccess = "payout.success"
	EventPayoutFailed  = "payout.failed"
	// EventPayoutCancelled is not in the specification's list; every
	// committed state change has its event, so a cancelled payout has one.
	EventPayoutCancelled = "payout.cancelled"
)

// CreatePayout sends money from the merchant's balance to a wallet. The
// amount plus the provider's fee is reserved at once; the provider is then
// called with the payout's reference as its idempotency key, and its
// answer settles the reservation (success: final debit; failed or
// cancelled: released). A payout whose outcome is unknown stays initiated
// and is reconciled, never sent twice. Errors: merchant_inactive,
// merchant_kyc_required, payouts_disabled, validation_error,
// amount_must_be_positive, invalid_phone_number, provider_unavailable,
// provider_country_unsupported, merchant_provider_not_authorized,
// provider_payout_unsupported, fees_unavailable,
// amount_below_provider_minimum, amount_below_merchant_minimum,
// amount_above_merchant_maximum, insufficient_balance.
func (a *App) CreatePayout(ctx context.Context, p *Principal, idemKey string, in PayoutInput) (*Transaction, error) {
	m := p.Merchant
	if err := m.ActiveError(); err != nil {
		return nil, err
	}
	if p.Mode() == ModeLive && m.KYC != KYCApproved {
		return nil, E(EMerchantKYCRequired)
	}
	if !m.PayoutsEnabled {
		return nil, E(EPayoutsDisabled)
	}
	v := ValidationErrors{}
	ref := checkMerchantRef(v, in.MerchantRef, true)
	cur := m.SettlementCurrency
	if in.Currency != nil {
		if cur = Currency(strings.ToUpper(strings.TrimSpace(*in.Currency))); cur != m.SettlementCurrency {
			v.Add("currency", fmt.Sprintf("must be the account's settlement currency, %s", m.SettlementCurrency))
		}
	}
	country := m.Country
	if in.Country != nil {
		if country = Country(strings.ToUpper(strings.TrimSpace(*in.Country))); !country.Valid() {
			v.Add("country", "must be one of SN, CI, ML, BF, TG, BJ, NE, GW")
		}
	}
	provider := ""
	if in.Provider == nil || strings.TrimSpace(*in.Provider) == "" {
		v.Add("provider", "is required")
	} else {
		provider = strings.TrimSpace(*in.Provider)
	}
	phone, name := "", ""
	if in.Recipient == nil || in.Recipient.Phone == nil || strings.TrimSpace(*in.Recipient.Phone) == "" {
		v.Add("recipient.phone", "is required")
	} else {
		phone = strings.TrimSpace(*in.Recipient.Phone)
	}
	if in.Recipient != nil && in.Recipient.Name != nil {
		if name = strings.TrimSpace(*in.Recipient.Name); utf8.RuneCountInString(name) > 200 {
			v.Add("recipient.name", "must be at most 200 characters")
		}
	}
	desc := ""
	if in.Description != nil {
		if desc = strings.TrimSpace(*in.Description); utf8.RuneCountInString(desc) > 500 {
			v.Add("description", "must be at most 500 characters")
		}
	}
	callback := a.callbackURL(ctx, v, in.CallbackURL)
	amount, err := WholeUnits(v, "amount", in.Amount, cur)
	if err := v.Err(); err != nil {
		return nil, err // before amount_must_be_positive
	}
	if err != nil {
		return nil, err
	}
	if phone, err = ParsePhone(phone, country); err != nil {
		return nil, err
	}
	spec, ok := a.Config.Providers[provider]
	var grid FeeGrid
	var xof int64
	// The provider's and the merchant's rules, as the configuration says
	// now: a payout made before under the request's key is answered
	// rather than refused by a rule changed since (payoutBefore).
	check := func() error {
		switch {
		case !ok || !spec.Enabled:
			return E(EProviderUnavailable, "provider", provider)
		case p.Mode() == ModeLive && !spec.LiveReady():
			return liveUnconfigured(provider)
		case !spec.Serves(country):
			return E(EProviderCountryUnsupported, "provider", provider, "country", string(country))
		case !m.AllowsProvider(provider):
			return E(EMerchantProviderNotAuthorized, "provider", provider)
		case !spec.Payouts:
			return E(EProviderPayoutUnsupported, "provider", provider)
		}
		var found bool
		if grid, found = a.Config.FeeGrid(provider, country); !found {
			return E(EFeesUnavailable, "provider", provider, "country", string(country))
		}
		var err error
		if xof, err = a.inXOF(amount); err != nil {
			return err
		}
		if spec.MinAmount > 0 && xof < spec.MinAmount {
			return E(EAmountBelowProviderMinimum, "minimum", spec.MinAmount, "provider", provider, "currency", string(XOF))
		}
		// The merchant's per-transaction floor and ceiling bound its payouts as
		// its payments ("Payment and payout validation").
		l := a.Config.LimitsFor(m.ID)
		if l.MinAmount > 0 && xof < l.MinAmount {
			return E(EAmountBelowMerchantMinimum, "minimum", l.MinAmount, "currency", string(XOF))
		}
		if l.MaxAmount > 0 && xof > l.MaxAmount {
			return E(EAmountAboveMerchantMaximum, "maximum", l.MaxAmount, "currency", string(XOF))
		}
		return nil
	}
	if refusal := check(); refusal != nil {
		return a.payoutBefore(ctx, p, idemKey, ref, func(old *Transaction) bool {
			return old.Amount == amount && old.Provider == provider && old.PayerPhone == phone
		}, refusal)
	}
	now := a.now()
	t := &Transaction{
		ID: a.NewID(), MerchantID: m.ID, Mode: p.Mode(), Type: TypePayout, Reference: NewReference(), MerchantRef: ref,
		Status: StatusInitiated, Amount: amount, LimitAmount: xof * 100, Country: country, Provider: provider,
		PayerPhone: phone, PayerName: name, CallbackURL: callback, Description: desc, Fee: a.Config.GridFee(grid, amount),
		IdempotencyKey: idemKey, Metadata: map[string]string{}, ExpiresAt: now.Add(30 * 24 * time.Hour),
		CreatedAt: now, UpdatedAt: now,
	}
	resume := false
	// In test mode the provider answers in this process: the payout, its
	// reservation, the provider's answer and the request's answer are one
	// transaction. In live mode the reservation commits, marked as sent,
	// before the call, so a process that stops during it leaves a payout
	// the dispatcher asks about before sending again.
	inTx := a.Gateway != nil && a.Gateway.InProcess(t.Mode)
	var out *Transaction
	// The command may run again (Rerunnable): each run starts from the
	// draft. In test mode the simulator answers a second run's payout,
	// same reference, with the first's.
	draft := *t
	err = a.update(Rerunnable(ctx), func(tx Tx) error {
		d := draft
		t, resume, out = &d, false, nil
		old, taken, err := tx.TransactionByIdempotencyKeyAndMerchantRef(ctx, m.ID, t.Mode, idemKey, KeySecret, ref)
		if err != nil {
			return err
		}
		if old != nil {
			// The request ran before and its answer was never stored (the
			// process stopped mid-call): carry on with the same payout. A
			// key past its day names a new one (keyedBefore).
			same := old.Type == TypePayout && old.MerchantRef == ref && old.Amount == t.Amount &&
				old.Provider == t.Provider && old.PayerPhone == t.PayerPhone
			again, err := a.keyedBefore(ctx, tx, old, same)
			if err != nil {
				return err
			}
			if again {
				t, resume = old, true
				return nil
			}
		}
		if taken != nil {
			return merchantRefTaken()
		}
		t.DispatchedAt = &now
		total := Amount{Minor: t.Amount.Minor + t.Fee.Minor, Currency: cur}
		if !inTx {
			if err := tx.InsertTransaction(ctx, t); err != nil {
				return fmt.Errorf("insert payout: %w", err)
			}
			return a.reserve(ctx, tx, t.Mode, m.ID, total, "payout.reserve", "transaction", t.ID)
		}
		// The reservation first: no provider hears of a payout the balance
		// refuses. The payout is then written once, in the state the
		// provider's answer leaves it in, as a payment settled at once: no
		// row inserted initiated and updated in the same transaction, and
		// its event is its first.
		if err := a.reserve(ctx, tx, t.Mode, m.ID, total, "payout.reserve", "transaction", t.ID); err != nil {
			return err
		}
		t.fresh = true
		res, perr := a.sendPayout(ctx, t)
		if err := a.applyPayoutIn(ctx, tx, t, &res, perr); err != nil {
			return err
		}
		out = t
		return RunCommitHook(ctx, tx, t)
	})
	switch {
	case err != nil:
		return nil, err
	case resume && !t.Status.Open():
		return a.applyPayout(ctx, t.ID, nil, nil)
	case resume:
		return a.dispatchPayout(ctx, t.ID, true)
	case inTx:
		return out, nil
	}
	res, perr := a.sendPayout(ctx, t)
	// The provider's answer is recorded though the request that asked
	// was cancelled meanwhile (CreateRefund does the same).
	return a.applyPayout(context.WithoutCancel(ctx), t.ID, &res, perr)
}

// dispatchPayout sends an initiated payout to its provider (asking first,
// when an earlier call's answer was lost) and applies the answer, running
// the request's commit hook in that transaction.
// resumed is a retry under its Idempotency-Key (dispatchedLately).
func (a *App) dispatchPayout(ctx context.Context, id string, resumed bool) (*Transaction, error) {
	var t *Transaction
	var prior *time.Time
	busy := false
	err := a.update(ctx, func(tx Tx) error {
		cur, err := tx.TransactionForUpdate(ctx, id)
		if err != nil {
			return err
		}
		t, prior = cur, cur.DispatchedAt
		if !cur.Status.Open() {
			return nil
		}
		now := a.now()
		if busy = dispatchedLately(cur, now, resumed); busy {
			return nil
		}
		// Record the attempt before the call: a process that stops during
		// it leaves a payout the dispatcher asks about before sending again.
		cur.DispatchedAt = &now
		return tx.UpdateTransaction(ctx, cur)
	})
	if err != nil {
		return nil, err
	}
	if !t.Status.Open() || busy {
		return a.applyPayout(ctx, id, nil, nil)
	}
	// One budget for the lookup and the call (providerContext).
	pctx, cancel := providerContext(ctx)
	defer cancel()
	var res PayoutResult
	var perr error
	if prior != nil || t.Status == StatusPending {
		res, perr = a.Gateway.PayoutStatus(pctx, t.Mode, t.Provider, t.Reference)
		switch {
		case ErrorCode(perr) == ENotFound && t.Status == StatusInitiated:
			// The provider never received it: sending now cannot send twice.
			res, perr = a.sendPayout(pctx, t)
		case ErrorCode(perr) == ENotFound && t.Mode == ModeTest:
			// A pending test payout unknown to this process's simulator,
			// which holds its payouts in memory (another process made
			// it): no outcome, and no failure to tell either. A live
			// provider that lost a payout it took keeps not_found as the
			// payout's failure_reason, for the operator to see.
			return a.applyPayout(context.WithoutCancel(ctx), id, nil, nil)
		case ErrorCode(perr) == EGatewayError:
			// A lookup's refusal (its provider or its routes gone from
			// the configuration) tells nothing of the payout: failed
			// for it, its money would be released though the provider
			// may pay it. Unknown still; asked again later.
			res, perr = PayoutResult{}, E(EGatewayUnavailable)
		}
	} else {
		res, perr = a.sendPayout(pctx, t)
	}
	return a.applyPayout(context.WithoutCancel(ctx), id, &res, perr)
}

// payoutBefore answers a payout request that a rule refused (refusal)
// with the payout the same request made before under its Idempotency-Key
// (its answer never stored: a process stopped mid-call), as it now is,
// running the request's commit hook: the rule changed since (a country
// disabled, a limit lowered), and the payout is made, or being made. Told
// "refused", the client would pay again elsewhere. Without one, the
// refusal stands.
func (a *App) payoutBefore(ctx context.Context, p *Principal, idemKey, ref string, same func(*Transaction) bool, refusal error) (*Transaction, error) {
	if idemKey == "" || ref == "" {
		return nil, refusal
	}
	x := a.byMerchantRef(ctx, p.Merchant.ID, ref, func(x *Transaction) bool {
		return x.Type == TypePayout && x.Mode == p.Mode() && x.IdempotencyKey == idemKey && same(x)
	})
	if x == nil {
		return nil, refusal
	}
	// As it is: the dispatcher carries an open one on.
	return a.applyPayout(ctx, x.ID, nil, nil)
}

func (a *App) sendPayout(ctx context.Context, t *Transaction) (PayoutResult, error) {
	// Asked to the end though the client hangs up (CreateRefund says why).
	ctx, cancel := providerContext(ctx)
	defer cancel()
	return a.Gateway.Payout(ctx, PayoutOrder{
		Mode: t.Mode, TransactionID: t.ID, Reference: t.Reference, Provider: t.Provider, Country: t.Country,
		Amount: t.Amount, RecipientPhone: t.PayerPhone, RecipientName: t.PayerName, NotifyURL: a.notifyURL(t.Provider),
	})
}

// applyPayout settles a payout by a provider's answer (res, or perr): a
// refusal fails it; an unknown outcome leaves it for reconciliation.
func (a *App) applyPayout(ctx context.Context, id string, res *PayoutResult, perr error) (*Transaction, error) {
	var out *Transaction
	err := a.update(ctx, func(tx Tx) error {
		t, err := tx.TransactionForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if err := a.applyPayoutIn(ctx, tx, t, res, perr); err != nil {
			return err
		}
		out = t
		return RunCommitHook(ctx, tx, t)
	})
	return out, err
}

// applyPayoutIn applies a provider's answer to a locked payout, inside tx.
func (a *App) applyPayoutIn(ctx context.Context, tx Tx, t *Transaction, res *PayoutResult, perr error) error {
	if !t.Status.Open() {
		return nil
	}
	switch {
	case perr != nil && ErrorCode(perr) == EGatewayError:
		// The provider refused: no money left.
		return a.settlePayout(ctx, tx, t, ProviderFailed, string(EGatewayError))
	case perr != nil:
		// Unknown outcome: keep the reservation; the dispatcher asks the
		// provider again later with the same reference.
		t.FailureReason = string(ErrorCode(perr))
		t.UpdatedAt = a.now()
		return a.save(ctx, tx, t)
	case res != nil:
		// An answer came: an earlier attempt's failure is no longer the
		// last word.
		t.FailureReason = ""
		if res.ProviderRef != "" {
			t.ProviderRef = res.ProviderRef
		}
		// The route that took it, once: a later lookup by its reference
		// answered by another route (its first one down) did not make it.
		if res.Route != "" && t.Route == "" {
			t.Route, t.RouteReason = res.Route, res.RouteReason
		}
		return a.settlePayout(ctx, tx, t, res.State, res.Reason)
	}
	return nil
}

// settlePayout moves an open payout to a provider state, with its ledger
// entry and event.
func (a *App) settlePayout(ctx context.Context, tx Tx, t *Transaction, state ProviderState, reason string) error {
	total := Amount{Minor: t.Amount.Minor + t.Fee.Minor, Currency: t.Amount.Currency}
	cur, mode := string(total.Currency), string(t.Mode)
	var to Status
	var ev string
	switch state {
	case ProviderSuccess:
		postings := []ledger.Posting{
			{Account: account(t.Mode, t.MerchantID, ledger.Reserved), Currency: cur, Amount: -total.Minor},
			{Account: ledger.Provider(mode, t.Provider, ledger.Clearing), Currency: cur, Amount: t.Amount.Minor},
		}
		if t.Fee.Minor > 0 {
			postings = append(postings, ledger.Posting{Account: ledger.Fees(mode), Currency: cur, Amount: t.Fee.Minor})
		}
		if err := a.post(ctx, tx, t.Mode, t.MerchantID, "payout.success", "transaction", t.ID, postings); err != nil {
			return err
		}
		to, ev = StatusSuccess, EventPayoutSuccess
	case ProviderFailed, ProviderCancelled:
		if err := a.release(ctx, tx, t.Mode, t.MerchantID, total, "payout.release", "transaction", t.ID); err != nil {
			return err
		}
		to, ev = StatusFailed, EventPayoutFailed
		if state == ProviderCancelled {
			to, ev = StatusCancelled, EventPayoutCancelled
		}
	default:
		if t.Status == StatusInitiated {
			t.Status, t.FailureReason, t.UpdatedAt = StatusPending, "", a.now()
		}
		return a.save(ctx, tx, t)
	}
	return a.move(ctx, tx, t, to, ev, reason, func() error { return a.save(ctx, tx, t) })
}

// save writes a payout: inserted when the transaction at hand creates it
// (fresh: written once, after its provider's answer in this process),
// updated otherwise. Every branch of applyPayoutIn with an answer or an
// error ends in it, so a fresh payout is always written.
func (a *App) save(ctx context.Context, tx Tx, t *Transaction) error {
	if !t.fresh {
		return tx.UpdateTransaction(ctx, t)
	}
	if err := tx.InsertTransaction(ctx, t); err != nil {
		return fmt.Errorf("insert %s: %w", t.Type, err)
	}
	return nil
}

// Payouts lists the merchant's payouts in the key's mode.
func (a *App) Payouts(ctx context.Context, p *Principal, f TxFilter, page PageRequest) ([]*Transaction, Pagination, error) {
	f.MerchantID, f.Mode, f.Type = p.Merchant.ID, p.Mode(), TypePayout
	list, total, err := a.Store.Transactions(ctx, f, page)
	if err != nil {
		return nil, Pagination{}, fmt.Errorf("list payouts: %w", err)
	}
	return list, NewPagination(page, total), nil
}

// Payout returns a payout by id, reference or merchant_ref.
func (a *App) Payout(ctx context.Context, p *Principal, key string) (*Transaction, error) {
	return a.lookupOfType(ctx, p, key, TypePayout)
}

// DispatchAfter is how long after its last provider call a payout or
// refund whose outcome is unknown is asked about again.
const DispatchAfter = time.Minute

// DispatchDue sends or asks again about payouts and refunds whose provider
// outcome is still unknown; it returns how many it touched.
func (a *App) DispatchDue(ctx context.Context, limit int) (int, error) {
	now := a.now()
	due, err := a.Store.DueTransactions(ctx, DueQuery{Now: now, Limit: limit, Dispatch: true, Before: now.Add(-DispatchAfter)})
	if err != nil {
		return 0, fmt.Errorf("due dispatches: %w", err)
	}
	var errs []error
	for _, t := range due {
		var derr error
		switch t.Type {
		case TypePayout:
			_, derr = a.dispatchPayout(ctx, t.ID, false)
		case TypeRefund:
			_, derr = a.dispatchRefund(ctx, t.ID, false)
		}
		if ctx.Err() != nil {
			break
		}
		if derr != nil {
			// One that cannot move does not hold the others.
			errs = append(errs, fmt.Errorf("dispatch %s: %w", t.ID, derr))
		}
	}
	return len(due), errors.Join(errs...)
}
