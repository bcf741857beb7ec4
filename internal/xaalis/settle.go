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
// A live one whose provider was called less than DispatchAfter ago is
// refused: that call may still answer.
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
		case cur.Mode == ModeLive && dispatchedLately(cur, a.now(), false):
			// A call to its provider (its creation's, or a dispatcher's)
			// may be under way: settled now, its answer would come to a
			// closed record and be dropped, perhaps a payment made. No
			// call outlives DispatchAfter (ProviderCallBudget is less).
			return &Error{Code: EValidation, Fields: ValidationErrors{"status": {fmt.Sprintf(
				"its provider was called about it less than %s ago and may still answer: settle it after %s",
				DispatchAfter, cur.DispatchedAt.Add(DispatchAfter).UTC().Format(time.RFC3339))}}}
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
	return out, err
}
