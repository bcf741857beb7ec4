package xaalis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xaalis/xaalis/internal/ledger"
)

// RefundInput is the body of POST /v1/refunds.
type RefundInput struct {
	TransactionID *string `json:"transaction_id"`
	Amount        *Number `json:"amount"`
	Reason        *string `json:"reason"`
}

// Refund event types.
const (
	EventRefundSuccess            = "refund.success"
	EventPaymentRefunded          = "payment.refunded"
	EventPaymentPartiallyRefunded = "payment.partially_refunded"
	// EventRefundFailed is not in the specification's list: a refund the
	// provider refused changes state, and every change has its event.
	EventRefundFailed = "refund.failed"
)

// validTransactionID is the strict identifier a refund names: a UUID (of
// either case, as RFC 9562 reads them) or a TXN- reference, current or
// older (LooksLikeReference).
func validTransactionID(s string) bool { return isUUID(s) || LooksLikeReference(s) }

// CreateRefund gives back part or all of a successful payment through its
// provider. Refunds of one payment are serialised on the payment's row, so
// concurrent refunds never exceed what is refundable. The refunded amount
// moves from available to reserved whatever available holds: a refund
// within the refundable amount is never refused for balance, and what
// available cannot cover is carried as a debt (available below zero),
// recovered from the next credits. Errors: validation_error,
// amount_must_be_positive, transaction_not_found (404),
// livemode_mismatch, non_payment_transaction_refund,
// transaction_already_fully_refunded, transaction_not_refundable,
// refund_not_supported, refund_exceeds_refundable.
func (a *App) CreateRefund(ctx context.Context, p *Principal, idemKey string, in RefundInput) (*Transaction, error) {
	m := p.Merchant
	if err := m.ActiveError(); err != nil {
		return nil, err
	}
	if p.Mode() == ModeLive && m.KYC != KYCApproved {
		return nil, E(EMerchantKYCRequired)
	}
	v := ValidationErrors{}
	key := ""
	if in.TransactionID == nil || strings.TrimSpace(*in.TransactionID) == "" {
		v.Add("transaction_id", "is required")
	} else if key = strings.TrimSpace(*in.TransactionID); !validTransactionID(key) {
		v.Add("transaction_id", "must be a transaction id (UUID) or a TXN- reference")
	} else if !strings.HasPrefix(key, "TXN-") {
		key = strings.ToLower(key) // ids are stored in lower case
	}
	reason := ""
	if in.Reason != nil {
		if reason = strings.TrimSpace(*in.Reason); utf8.RuneCountInString(reason) > 500 {
			v.Add("reason", "must be at most 500 characters")
		}
	}
	if in.Amount == nil {
		v.Add("amount", "is required")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	list, err := a.Store.LookupTransactions(ctx, m.ID, key)
	if err != nil {
		return nil, fmt.Errorf("find payment: %w", err)
	}
	var pay *Transaction
	for _, t := range list {
		if t.ID == key || t.Reference == key {
			pay = t
		}
	}
	if pay == nil {
		return nil, E(ETransactionNotFound, "transaction_id", key)
	}
	if pay.Mode != p.Mode() {
		return nil, E(ELivemodeMismatch)
	}
	amount, err := WholeUnits(v, "amount", in.Amount, pay.Amount.Currency)
	if err := v.Err(); err != nil {
		return nil, err // before amount_must_be_positive
	}
	if err != nil {
		return nil, err
	}
	if pay.Type != TypePayment {
		return nil, E(ENonPaymentTransactionRefund, "type", string(pay.Type))
	}
	// A refund that committed under this Idempotency-Key is resumed in the
	// transaction below, whatever its payment's status now: once that
	// refund is done the payment may be refunded, and the same request
	// asked again (its answer lost, the refund finished by the dispatcher
	// after a takeover) must get the refund, not a refusal. With a key, the
	// refusals wait for that lookup.
	refusal := a.refundRefusal(pay)
	if refusal != nil && idemKey == "" {
		return nil, refusal
	}
	now := a.now()
	r := &Transaction{
		ID: a.NewID(), MerchantID: m.ID, Mode: p.Mode(), Type: TypeRefund, Reference: NewReference(), ParentID: pay.ID,
		Status: StatusInitiated, Amount: amount, LimitAmount: 0, Country: pay.Country, Provider: pay.Provider,
		PayerPhone: pay.PayerPhone, PayerName: pay.PayerName, CustomerID: pay.CustomerID,
		Description: reason, IdempotencyKey: idemKey, Metadata: refundMetadata(pay),
		// Its events go where its payment's do, as a dispute's.
		CallbackURL: pay.CallbackURL,
		ExpiresAt:   now.Add(30 * 24 * time.Hour), CreatedAt: now, UpdatedAt: now,
	}
	resume := false
	// As for payouts: one transaction with an in-process provider; with a
	// live one the reservation commits, marked as sent, before the call.
	inTx := a.Gateway != nil && a.Gateway.InProcess(r.Mode)
	var out *Transaction
	err = a.update(ctx, func(tx Tx) error {
		if idemKey != "" {
			old, err := tx.TransactionByIdempotencyKey(ctx, m.ID, r.Mode, idemKey)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			if err == nil {
				// The same refund, whose answer was never stored: resume
				// it. A key past its day names a new one (keyedBefore).
				same := old.Type == TypeRefund && old.ParentID == r.ParentID && old.Amount == r.Amount
				again, err := a.keyedBefore(ctx, tx, old, same)
				if err != nil {
					return err
				}
				if again {
					r, resume = old, true
					return nil
				}
			}
		}
		if refusal != nil {
			return refusal
		}
		// The payment's row lock serialises refunds of one payment.
		cur, err := tx.TransactionForUpdate(ctx, pay.ID)
		if err != nil {
			return err
		}
		if cur.Status == StatusRefunded {
			return E(ETransactionAlreadyFullyRefunded)
		}
		if cur.Status != StatusSuccess {
			return E(ETransactionNotRefundable, "status", string(cur.Status))
		}
		done, err := tx.RefundedAmount(ctx, cur.ID)
		if err != nil {
			return fmt.Errorf("refunded amount: %w", err)
		}
		left := cur.Amount.Minor - done
		if left <= 0 {
			return E(ETransactionAlreadyFullyRefunded)
		}
		if amount.Minor > left {
			c := cur.Amount.Currency
			return E(ERefundExceedsRefundable, "requested", units(amount), "refundable", units(Amount{Minor: left, Currency: c}),
				"already_refunded", units(Amount{Minor: done, Currency: c}))
		}
		if cur.SettlementAmount != nil {
			s := cur.settledPart(done, amount.Minor)
			r.SettlementAmount, r.ExchangeRate = &s, cur.ExchangeRate
		}
		r.DispatchedAt = &now
		if err := tx.InsertTransaction(ctx, r); err != nil {
			return fmt.Errorf("insert refund: %w", err)
		}
		// Never refused for balance: what available cannot cover is owed.
		if err := a.reserveOwed(ctx, tx, r.Mode, m.ID, r.LedgerAmount(), "refund.reserve", "transaction", r.ID); err != nil {
			return err
		}
		if !inTx {
			return nil
		}
		res, perr := a.Gateway.Refund(ctx, a.refundRequest(r, cur))
		if err := a.applyRefundIn(ctx, tx, r, &res, perr); err != nil {
			return err
		}
		out = r
		return RunCommitHook(ctx, tx, r)
	})
	switch {
	case err != nil:
		return nil, err
	case resume && !r.Status.Open():
		return a.applyRefund(ctx, r.ID, nil, nil)
	case resume:
		return a.dispatchRefund(ctx, r.ID, true)
	case inTx:
		return out, nil
	}
	return a.sendRefund(ctx, r, pay)
}

// sendRefund asks the provider for refund r of payment pay and applies
// its answer. The provider is asked to the end though the client hangs
// up: cut off, the call made an unknown outcome of a refund the provider
// may never have received, settled only a minute later by the
// dispatcher. The answer, or the route of an attempt whose outcome is
// unknown, is recorded though the request was cancelled meanwhile:
// unrecorded, the route was lost and the refund could be sent again
// elsewhere.
func (a *App) sendRefund(ctx context.Context, r, pay *Transaction) (*Transaction, error) {
	pctx, cancel := providerContext(ctx)
	res, perr := a.Gateway.Refund(pctx, a.refundRequest(r, pay))
	cancel()
	return a.applyRefund(context.WithoutCancel(ctx), r.ID, &res, perr)
}

// refundRefusal is why payment pay cannot be refunded as it was read
// (transaction_already_fully_refunded, transaction_not_refundable,
// refund_not_supported), or nil.
func (a *App) refundRefusal(pay *Transaction) error {
	if pay.Status == StatusRefunded {
		return E(ETransactionAlreadyFullyRefunded)
	}
	if pay.Status != StatusSuccess {
		return E(ETransactionNotRefundable, "status", string(pay.Status))
	}
	if spec := a.Config.Providers[pay.Provider]; !spec.Refunds {
		e := E(ERefundNotSupported, "provider", pay.Provider)
		e.Message = "This provider cannot refund automatically: pay the payer out (POST /v1/payouts to the payer's number), then ask the operator to mark the payment refunded."
		return e
	}
	return nil
}

// refundRequest asks the provider to refund r of payment pay.
// A refund that has a route went there already (an attempt whose outcome
// is unknown, applyRefundIn): it goes there only.
func (a *App) refundRequest(r, pay *Transaction) RefundRequest {
	req := RefundRequest{Mode: r.Mode, Reference: r.Reference, Provider: r.Provider, Route: pay.Route,
		PaymentProviderRef: pay.ProviderRef, Amount: r.Amount}
	if r.Route != "" {
		req.Route, req.Pinned = r.Route, true
	}
	return req
}

// dispatchRefund asks the provider to refund (idempotent on the refund's
// reference, so asking again is safe) and applies the answer.
//
// resumed is a retry under the refund's Idempotency-Key, whose first
// request (stopped, or answered 5xx) holds the key no more.
func (a *App) dispatchRefund(ctx context.Context, id string, resumed bool) (*Transaction, error) {
	var r, pay *Transaction
	parent, err := a.refundParent(ctx, id)
	if err != nil {
		return nil, err
	}
	busy := false
	err = a.update(ctx, func(tx Tx) error {
		// The payment first, then the refund: every command that locks
		// both (creation, dispatch, settlement) takes them in this order.
		var err error
		if pay, err = tx.TransactionForUpdate(ctx, parent); err != nil {
			return err
		}
		cur, err := tx.TransactionForUpdate(ctx, id)
		if err != nil {
			return err
		}
		r = cur
		if !cur.Status.Open() {
			return nil
		}
		now := a.now()
		if busy = dispatchedLately(cur, now, resumed); busy {
			return nil
		}
		cur.DispatchedAt = &now
		return tx.UpdateTransaction(ctx, cur)
	})
	if err != nil {
		return nil, err
	}
	if !r.Status.Open() || busy {
		return a.applyRefund(ctx, id, nil, nil)
	}
	// One budget for the lookup and the call (providerContext).
	pctx, cancel := providerContext(ctx)
	defer cancel()
	// A refund sent on a route whose answer never came, or to a provider
	// that no longer refunds (its configuration changed since it was
	// sent), is asked about by its reference too: failed without asking,
	// it might have been made.
	refunds := a.Config.Providers[r.Provider].Refunds
	if r.Route != "" && refunds {
		// An attempt there has an unknown outcome: sent again there only,
		// where the reference is the provider's idempotency key.
		return a.sendRefund(pctx, r, pay)
	}
	// Sent before (creation commits the refund as sent) with no route
	// recorded: the process that sent it may have stopped during the
	// call, so the provider is asked by its reference first. Sent again
	// blind, it could fail over to a route that does not share the first
	// one's idempotency, and refund the payer twice.
	route := r.Route
	if route == "" {
		route = pay.Route
	}
	res, perr := a.Gateway.RefundStatus(pctx, r.Mode, r.Provider, route, r.Reference)
	if errors.Is(perr, ErrNotFound) {
		// No route has it: sent now, on any route, it is sent once (a
		// provider that no longer refunds refuses it, and it fails).
		return a.sendRefund(pctx, r, pay)
	}
	if perr != nil {
		// Unknown still (a route could not be asked, or would not say):
		// asked again by the dispatcher, never failed for it.
		res, perr = PayoutResult{}, E(EGatewayUnavailable)
	}
	return a.applyRefund(context.WithoutCancel(ctx), id, &res, perr)
}

// dispatchedLately reports whether a payout or refund was last handed to
// its provider less than DispatchAfter ago by a dispatcher (of this
// process or another), whose call may still be under way: two at once
// could each find nothing by the reference and each send it, perhaps on
// two routes. The request that created it called too (creation marks it
// sent, DispatchedAt = CreatedAt); a retry under its Idempotency-Key
// (resumed) holds the key that request held, so that request runs no
// more, and only a dispatcher's later mark holds the retry back.
func dispatchedLately(t *Transaction, now time.Time, resumed bool) bool {
	if t.DispatchedAt == nil || now.Sub(*t.DispatchedAt) >= DispatchAfter {
		return false
	}
	return !resumed || !t.DispatchedAt.Equal(t.CreatedAt)
}

// applyRefund settles a refund by the provider's answer, with its ledger
// entry and events: refund.success, then payment.partially_refunded or
// payment.refunded (the payment becomes refunded when nothing is left).
func (a *App) applyRefund(ctx context.Context, id string, res *PayoutResult, perr error) (*Transaction, error) {
	var out *Transaction
	parent, err := a.refundParent(ctx, id)
	if err != nil {
		return nil, err
	}
	err = a.update(ctx, func(tx Tx) error {
		// The payment before the refund (see dispatchRefund): settling a
		// refund posts to the balances and may move the payment.
		if _, err := tx.TransactionForUpdate(ctx, parent); err != nil {
			return err
		}
		r, err := tx.TransactionForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if err := a.applyRefundIn(ctx, tx, r, res, perr); err != nil {
			return err
		}
		out = r
		return RunCommitHook(ctx, tx, r)
	})
	return out, err
}

// applyRefundIn applies a provider's answer to a locked refund (its
// payment locked first), inside tx.
func (a *App) applyRefundIn(ctx context.Context, tx Tx, r *Transaction, res *PayoutResult, perr error) error {
	if !r.Status.Open() {
		return nil
	}
	state, reason := ProviderState(""), ""
	switch {
	case perr != nil && (ErrorCode(perr) == EGatewayError || ErrorCode(perr) == ERefundNotSupported):
		state, reason = ProviderFailed, string(ErrorCode(perr))
	case perr != nil:
		r.FailureReason, r.UpdatedAt = string(ErrorCode(perr)), a.now()
		// The route an attempt whose outcome is unknown went to: the
		// refund is sent again there only (refundRequest).
		if res != nil && res.Route != "" && r.Route == "" {
			r.Route, r.RouteReason = res.Route, res.RouteReason
		}
		if err := tx.UpdateTransaction(ctx, r); err != nil {
			return err
		}
	case res != nil:
		// The route that took it (the payment's, or another after a
		// failover); until then none did (route: null). An answer came:
		// an earlier attempt's failure is no longer the last word.
		state, reason, r.FailureReason = res.State, res.Reason, ""
		if res.ProviderRef != "" {
			r.ProviderRef = res.ProviderRef
		}
		// A route recorded (an unknown outcome there) stays, unless that
		// route answered: another that answered a lookup did not make it.
		if res.Route != "" && (r.Route == "" || r.Route == res.Route) {
			r.Route, r.RouteReason = res.Route, res.RouteReason
		}
	}
	return a.settleRefund(ctx, tx, r, state, reason)
}

func (a *App) settleRefund(ctx context.Context, tx Tx, r *Transaction, state ProviderState, reason string) error {
	amt := r.LedgerAmount()
	switch state {
	case ProviderSuccess:
		if err := a.post(ctx, tx, r.Mode, r.MerchantID, "refund.success", "transaction", r.ID,
			ledger.Move(account(r.Mode, r.MerchantID, ledger.Reserved), ledger.Provider(string(r.Mode), r.Provider, ledger.Clearing),
				string(amt.Currency), amt.Minor)); err != nil {
			return err
		}
		if err := a.transition(ctx, tx, r, StatusSuccess, EventRefundSuccess, ""); err != nil {
			return err
		}
		pay, err := tx.TransactionForUpdate(ctx, r.ParentID)
		if err != nil {
			return err
		}
		// What the payer got back, not what is reserved: refunds still
		// on their way to the provider count only once they succeed, so
		// that the payment is refunded (once, payment.refunded) when its
		// last refund succeeds.
		done, err := tx.SucceededRefundAmount(ctx, pay.ID)
		if err != nil {
			return err
		}
		switch {
		case pay.Status == StatusRefunded:
			return nil // marked refunded by hand meanwhile: told already
		case done >= pay.Amount.Minor:
			return a.transition(ctx, tx, pay, StatusRefunded, EventPaymentRefunded, "")
		}
		return a.event(ctx, tx, pay, EventPaymentPartiallyRefunded)
	case ProviderFailed, ProviderCancelled:
		if err := a.release(ctx, tx, r.Mode, r.MerchantID, amt, "refund.release", "transaction", r.ID); err != nil {
			return err
		}
		return a.transition(ctx, tx, r, StatusFailed, EventRefundFailed, reason)
	case ProviderPending:
		if r.Status == StatusInitiated {
			r.Status, r.UpdatedAt = StatusPending, a.now()
			return tx.UpdateTransaction(ctx, r)
		}
	}
	return nil
}

// event writes an event about a record whose status did not change.
func (a *App) event(ctx context.Context, tx Tx, t *Transaction, typ string) error {
	t.UpdatedAt = a.now()
	if err := tx.UpdateTransaction(ctx, t); err != nil {
		return err
	}
	return a.writeEvent(ctx, tx, t, typ)
}

// MarkRefunded is the operator's action for providers without automatic
// refunds: after the merchant paid the payer back with a payout, the
// payment is marked refunded (event payment.refunded). No money moves
// here: the payout already debited the merchant. The note (the payout
// that paid the payer back) is kept in the audit entry. It returns
// not_found, non_payment_transaction_refund, transaction_not_refundable
// or validation_error for a note the text rules refuse.
func (a *App) MarkRefunded(ctx context.Context, id, note string) (*Transaction, error) {
	note = strings.TrimSpace(note)
	v := ValidationErrors{}
	checkNote(v, "note", note)
	if err := v.Err(); err != nil {
		return nil, err
	}
	id, err := a.OperatorTransactionID(ctx, id)
	if err != nil {
		return nil, err
	}
	var out *Transaction
	err = a.update(ctx, func(tx Tx) error {
		t, err := tx.TransactionForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if t.Type != TypePayment {
			return E(ENonPaymentTransactionRefund, "type", string(t.Type))
		}
		if t.Status == StatusRefunded {
			out = a.decorate(t)
			return nil
		}
		if t.Status != StatusSuccess {
			return E(ETransactionNotRefundable, "status", string(t.Status))
		}
		before := *t
		if err := a.transition(ctx, tx, t, StatusRefunded, EventPaymentRefunded, ""); err != nil {
			return err
		}
		out = t
		return a.auditNote(ctx, tx, "payment.mark_refunded", "transaction", t.ID, &before, t, note)
	})
	return out, err
}

// Refund returns a refund by id or reference.
func (a *App) Refund(ctx context.Context, p *Principal, key string) (*Transaction, error) {
	return a.lookupOfType(ctx, p, key, TypeRefund)
}

// refundParent is the payment a refund gives back, which never changes.
func (a *App) refundParent(ctx context.Context, id string) (string, error) {
	r, err := a.Store.Transaction(ctx, "", id)
	if err != nil {
		return "", err
	}
	return r.ParentID, nil
}

// refundMetadata is a new refund's metadata: its payment's. A refund
// request carries none of its own, and with the payment's the refund's
// record and events name the merchant's order (metadata.order_id) as the
// payment's do, where its merchant_reference is null.
func refundMetadata(pay *Transaction) map[string]string {
	md := maps.Clone(pay.Metadata)
	if md == nil {
		md = map[string]string{}
	}
	return md
}

// settledPart is the worth in the payment's settlement currency of amount
// (minor units of the payment's currency) given back after done was: what
// done and amount are worth together, less what done is worth, at the
// rate frozen at the payment, so that the parts of a payment given back
// (its refunds, a dispute) add up to its settlement amount exactly. Each
// rounded on its own, they drifted (ten refunds of 1 EUR of a 10 EUR
// payment debited 0.03 XOF more than it had credited).
func (t *Transaction) settledPart(done, amount int64) Amount {
	rate := new(big.Rat).SetFrac64(t.SettlementAmount.Minor, t.Amount.Minor)
	worth := func(minor int64) int64 {
		return Convert(Amount{Minor: minor, Currency: t.Amount.Currency}, t.SettlementAmount.Currency, rate).Minor
	}
	return Amount{Minor: worth(done+amount) - worth(done), Currency: t.SettlementAmount.Currency}
}
