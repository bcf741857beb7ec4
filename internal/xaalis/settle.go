package xaalis

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// SettledByOperator is the failure_reason of a payout or refund the
// operator settled as failed by hand (SettleByHand).
const SettledByOperator = "settled_by_operator"

// settleQuiet is how long after a live payout or refund was marked sent
// (DispatchedAt) it may be settled by hand: every call ends within
// ProviderCallBudget, and its answer would come to a closed record and be
// dropped, perhaps a payment made. The slack covers a call that began
// after its mark (a creation's transaction waiting for the writer) and an
// answer waiting for the row's lock. settleHold is how long the
// dispatchers then leave it alone (its DispatchedAt set that far ahead),
// so that the operator's second try, settleQuiet later, meets no new call;
// long, since a try just after a hold ends is held again.
const (
	settleQuiet = ProviderCallBudget + 30*time.Second
	settleHold  = 30 * time.Minute
)

// SettleByHand is the operator's last resort for a payout or refund whose
// outcome no provider will tell (a payout the provider never finalises, a
// refund whose routes refuse every lookup, a provider gone from the
// configuration): once the provider has said what became of it (its
// statement, its support), the operator records that outcome, success or
// failed, with the provider's word in the note. It settles the record as
// the provider's answer would have: its ledger entries, its events
// (payout.success or payout.failed; refund.success, then
// payment.partially_refunded or payment.refunded, or refund.failed), its
// reservation consumed or released, and an audit entry with the note.
// Settling a record again with the outcome it has answers it unchanged.
// A live one marked sent less than settleQuiet ago is refused (a call
// may still answer), and held from the dispatchers for settleHold: asked
// again once settleQuiet has passed (the refusal says when), it settles.
// typ is the record's type (TypePayout or TypeRefund): another is not
// found. It returns not_found, validation_error (the outcome, a note
// missing or refused by the text rules; on status, a record already
// settled otherwise).
func (a *App) SettleByHand(ctx context.Context, typ TxType, id string, outcome ProviderState, note string) (*Transaction, error) {
	note = strings.TrimSpace(note)
	v := ValidationErrors{}
	if outcome != ProviderSuccess && outcome != ProviderFailed {
		v.Add("outcome", "must be success or failed")
	}
	if note == "" {
		v.Add("note", "is required: what the provider said of it, and where")
	}
	checkNote(v, "note", note)
	if err := v.Err(); err != nil {
		return nil, err
	}
	id, err := a.operatorTransactionID(ctx, id, typ)
	if err != nil {
		return nil, err
	}
	t, err := a.Store.Transaction(ctx, "", id)
	if err != nil {
		return nil, err
	}
	if t.Type != typ || (typ != TypePayout && typ != TypeRefund) {
		return nil, ErrNotFound
	}
	want := StatusSuccess
	if outcome == ProviderFailed {
		want = StatusFailed
	}
	var out *Transaction
	var retryAt time.Time
	err = a.update(ctx, func(tx Tx) error {
		// A refund's payment first, as every command that locks both.
		if t.Type == TypeRefund {
			if _, err := tx.TransactionForUpdate(ctx, t.ParentID); err != nil {
				return err
			}
		}
		cur, err := tx.TransactionForUpdate(ctx, id)
		if err != nil {
			return err
		}
		switch {
		case cur.Status == want:
			out = a.decorate(cur)
			return nil
		case !cur.Status.Open():
			return &Error{Code: EValidation, Fields: ValidationErrors{"status": {"the " + string(cur.Type) + " is " + string(cur.Status) + " already"}}}
		case cur.Mode == ModeLive && cur.DispatchedAt != nil:
			// A call to its provider (its creation's, or a dispatcher's)
			// may be under way: settled now, its answer would come to a
			// closed record and be dropped, perhaps a payment made.
			now, at := a.now(), *cur.DispatchedAt
			if at.After(now) {
				// Held by an earlier try: quiet since it was placed?
				if placed := at.Add(-settleHold); now.Before(placed.Add(settleQuiet)) {
					retryAt = placed.Add(settleQuiet)
					return nil
				}
			} else if now.Sub(at) < settleQuiet {
				// Held from the dispatchers from now on, so that no new
				// call begins before the operator's second try.
				held := now.Add(settleHold)
				cur.DispatchedAt = &held
				retryAt = now.Add(settleQuiet)
				return tx.UpdateTransaction(ctx, cur)
			}
		}
		before := *cur
		reason := ""
		if outcome == ProviderFailed {
			reason = SettledByOperator
		}
		if cur.Type == TypePayout {
			err = a.settlePayout(ctx, tx, cur, outcome, reason)
		} else {
			err = a.settleRefund(ctx, tx, cur, outcome, reason)
		}
		if err != nil {
			return err
		}
		out = cur
		return a.auditNote(ctx, tx, string(cur.Type)+".settle_by_hand", "transaction", cur.ID, &before, cur, note)
	})
	if err == nil && !retryAt.IsZero() {
		// Whole seconds, rounded up: asked again at the time told, it
		// settles.
		retryAt = retryAt.Add(time.Second - 1).Truncate(time.Second)
		return nil, &Error{Code: EValidation, Fields: ValidationErrors{"status": {fmt.Sprintf(
			"its provider may have been called about it less than %s ago and may still answer: it is now held from its provider for %s; settle it again at %s or later",
			settleQuiet, settleHold, retryAt.UTC().Format(time.RFC3339))}}}
	}
	return out, err
}
