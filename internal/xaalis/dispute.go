package xaalis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xaalis/xaalis/internal/ledger"
)

// Dispute events.
const (
	EventDisputeOpened    = "dispute.opened"
	EventDisputeResponded = "dispute.responded"
	EventDisputeWon       = "dispute.won"
	EventDisputeLost      = "dispute.lost"
)

// Dispute limits (spec: Limits).
const (
	// DefaultDisputeResponseWindow: the configuration's
	// dispute_response_seconds, when it sets none.
	DefaultDisputeResponseWindow = 7 * 24 * time.Hour
	DisputeMaxEvidence           = 20
	DisputeMaxEvidenceLen        = 500
	DisputeMaxResponseLen        = 2000
	DisputeDefaultPerPage        = 20
	DisputeMaxPerPage            = 100
	disputeReferenceAlphabet     = referenceAlphabet
)

// MarshalJSON renders the dispute record.
func (d *Dispute) MarshalJSON() ([]byte, error) {
	ev := d.Evidence
	if ev == nil {
		ev = []string{}
	}
	return json.Marshal(struct {
		ID               string        `json:"id"`
		Object           string        `json:"object"`
		Reference        string        `json:"reference"`
		TransactionID    string        `json:"transaction_id"`
		MerchantRef      *string       `json:"merchant_reference"`
		Amount           string        `json:"amount"`
		Currency         Currency      `json:"currency"`
		Reason           *string       `json:"reason"`
		Status           DisputeStatus `json:"status"`
		Evidence         []string      `json:"evidence"`
		MerchantResponse *string       `json:"merchant_response"`
		DueBy            string        `json:"due_by"`
		RespondedAt      *string       `json:"responded_at"`
		ClosedAt         *string       `json:"closed_at"`
		Livemode         bool          `json:"livemode"`
		CreatedAt        string        `json:"created_at"`
		UpdatedAt        string        `json:"updated_at"`
	}{d.ID, "dispute", d.Reference, d.TransactionID, strPtr(d.MerchantRef), d.Amount.Decimal(), d.Amount.Currency, strPtr(d.Reason), d.Status, ev,
		strPtr(d.MerchantResponse), Timestamp(d.DueBy), tsPtr(d.RespondedAt), tsPtr(d.ClosedAt), d.Mode.Live(),
		Timestamp(d.CreatedAt), Timestamp(d.UpdatedAt)})
}

// DisputeOpen is what opens a dispute: an operator, or a provider's
// notification.
type DisputeOpen struct {
	TransactionID string
	// Amount in minor units of the payment's currency (hundredths); 0 is
	// all that was not refunded.
	Amount int64
	Reason string
	// ProviderEventID is the provider's notification id, when a provider
	// reported it.
	ProviderEventID string
}

// OpenDispute opens a dispute on a successful payment: the payment goes
// disputed, the amount moves to reserved (what available cannot cover is
// owed meanwhile), dispute.opened. It returns not_found or
// validation_error.
func (a *App) OpenDispute(ctx context.Context, in DisputeOpen) (*Dispute, error) {
	in.Reason = strings.TrimSpace(in.Reason)
	v := ValidationErrors{}
	checkNote(v, "reason", in.Reason)
	if err := v.Err(); err != nil {
		return nil, err
	}
	if strings.TrimSpace(in.TransactionID) != "" {
		id, err := a.OperatorTransactionID(ctx, in.TransactionID)
		if err != nil {
			return nil, err
		}
		in.TransactionID = id
	}
	var out *Dispute
	err := a.update(ctx, func(tx Tx) error {
		d, err := a.openDispute(ctx, tx, in)
		if err != nil {
			return err
		}
		out = d
		return a.audit(ctx, tx, "dispute.open", "dispute", d.ID, nil, d)
	})
	return out, err
}

func (a *App) openDispute(ctx context.Context, tx Tx, in DisputeOpen) (*Dispute, error) {
	if strings.TrimSpace(in.TransactionID) == "" {
		return nil, &Error{Code: EValidation, Fields: ValidationErrors{"transaction_id": {"is required: the payment's id, reference or merchant_ref"}}}
	}
	pay, err := tx.TransactionForUpdate(ctx, in.TransactionID)
	if err != nil {
		return nil, err
	}
	bad := func(msg string) error {
		return &Error{Code: EValidation, Fields: ValidationErrors{"transaction_id": {msg}}}
	}
	if pay.Type != TypePayment {
		return nil, bad("is not a payment")
	}
	if pay.Status != StatusSuccess {
		return nil, bad(fmt.Sprintf("is %s: only a successful payment can be disputed", pay.Status))
	}
	if _, err := tx.OpenDisputeOf(ctx, pay.ID); err == nil {
		return nil, bad("already has an open dispute")
	} else if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	refunded, err := tx.RefundedAmount(ctx, pay.ID)
	if in.ProviderEventID != "" {
		// A provider's chargeback is money it took back: only refunds that
		// reached the payer lessen what it can claim. Refused because of a
		// refund still in flight, it would be lost (a provider notifies
		// once), and that refund may yet fail.
		refunded, err = tx.SucceededRefundAmount(ctx, pay.ID)
	}
	if err != nil {
		return nil, err
	}
	left := pay.Amount.Minor - refunded
	if left <= 0 {
		// Its refunds, those still in flight included, give back all of it.
		return nil, bad("has nothing left to dispute: its refunds, those still in flight included, cover the whole amount")
	}
	amount := Amount{Minor: left, Currency: pay.Amount.Currency}
	switch {
	case in.Amount > left && in.ProviderEventID != "":
		// A provider that reports the payment's gross amount after a
		// partial refund: the payer can claim back only what was not
		// refunded, which is held. Refused, the chargeback would never
		// reach the ledger (a provider notifies once).
	case in.Amount != 0:
		if in.Amount < 0 || in.Amount > left {
			return nil, &Error{Code: EValidation, Fields: ValidationErrors{"amount": {
				fmt.Sprintf("must be positive and at most the %s not refunded", Amount{Minor: left, Currency: pay.Amount.Currency}.Decimal())}}}
		}
		amount.Minor = in.Amount
	}
	led := amount
	if pay.SettlementAmount != nil {
		// After the refunds, as a refund after others is counted: the
		// refunds and the dispute are worth together at most what the
		// payment credited.
		led = pay.settledPart(refunded, amount.Minor)
	}
	now := a.now()
	d := &Dispute{ID: a.NewID(), MerchantID: pay.MerchantID, Mode: pay.Mode, Reference: "DSP-" + RandomString(16, disputeReferenceAlphabet),
		TransactionID: pay.ID, MerchantRef: pay.MerchantRef, Amount: amount, LedgerAmount: led, Reason: strings.TrimSpace(in.Reason), Status: DisputeNeedsResponse,
		DueBy: now.Add(a.Config.DisputeResponseWindow()), ProviderEventID: in.ProviderEventID, CreatedAt: now, UpdatedAt: now}
	// The disputed money is held in reserved, taken from available whatever
	// it holds: what available cannot give (the shortfall) is a debt, the
	// same as a refund's, recovered from the next credits or settled by a
	// won dispute.
	avail, err := tx.LockBalance(ctx, account(pay.Mode, pay.MerchantID, ledger.Available), led.Currency)
	if err != nil {
		return nil, err
	}
	d.Shortfall = led.Minor - min(max(avail, 0), led.Minor)
	if err := tx.InsertDispute(ctx, d); err != nil {
		return nil, fmt.Errorf("insert dispute: %w", err)
	}
	if err := a.reserveOwed(ctx, tx, pay.Mode, pay.MerchantID, led, "dispute.open", "dispute", d.ID); err != nil {
		return nil, err
	}
	// The payment's move is told by dispute.opened.
	if err := a.countPayment(ctx, tx, pay, StatusDisputed); err != nil {
		return nil, err
	}
	pay.Status, pay.UpdatedAt = StatusDisputed, now
	if err := tx.UpdateTransaction(ctx, pay); err != nil {
		return nil, err
	}
	if err := a.disputeEvent(ctx, tx, d, EventDisputeOpened, pay.CallbackURL); err != nil {
		return nil, err
	}
	return d, nil
}

func (a *App) disputeEvent(ctx context.Context, tx Tx, d *Dispute, typ, callback string) error {
	data, err := d.MarshalJSON()
	if err != nil {
		return err
	}
	return a.emit(ctx, tx, &Event{ID: a.NewID(), MerchantID: d.MerchantID, Mode: d.Mode, Type: typ, ObjectType: "dispute",
		ObjectID: d.ID, Data: data, CreatedAt: d.UpdatedAt}, callback)
}

// DisputeResponse is the body of POST /v1/disputes/{id}/respond.
type DisputeResponse struct {
	Evidence         []string `json:"evidence"`
	MerchantResponse *string  `json:"merchant_response"`
}

// RespondDispute records the merchant's answer: at most 20 evidence URLs of
// at most 500 characters, and a response of at most 2000 characters. It is
// accepted only while the dispute needs a response, before its due_by
// (dispute_not_respondable with the status otherwise: a response after
// due_by loses the dispute, if the deadline job has not yet); the dispute
// goes under_review,
// dispute.responded. It returns not_found, livemode_mismatch or
// validation_error too.
func (a *App) RespondDispute(ctx context.Context, p *Principal, key string, in DisputeResponse) (*Dispute, error) {
	v := ValidationErrors{}
	if len(in.Evidence) > DisputeMaxEvidence {
		v.Add("evidence", fmt.Sprintf("at most %d URLs", DisputeMaxEvidence))
	}
	for i, e := range in.Evidence {
		u, err := url.Parse(e)
		switch {
		case utf8.RuneCountInString(e) > DisputeMaxEvidenceLen:
			v.Add(fmt.Sprintf("evidence[%d]", i), fmt.Sprintf("must be at most %d characters", DisputeMaxEvidenceLen))
		case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
			v.Add(fmt.Sprintf("evidence[%d]", i), "must be an absolute http or https URL")
		}
	}
	resp := ""
	if in.MerchantResponse != nil {
		if resp = strings.TrimSpace(*in.MerchantResponse); utf8.RuneCountInString(resp) > DisputeMaxResponseLen {
			v.Add("merchant_response", fmt.Sprintf("must be at most %d characters", DisputeMaxResponseLen))
		}
	}
	if len(in.Evidence) == 0 && resp == "" {
		v.Add("merchant_response", "give a response or evidence")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	d, err := a.Dispute(ctx, p, key)
	if err != nil {
		return nil, err
	}
	// The payment's callback_url gets its disputes' events, this one too.
	pay, err := a.Store.Transaction(ctx, d.MerchantID, d.TransactionID)
	if err != nil {
		return nil, fmt.Errorf("read disputed payment: %w", err)
	}
	var out *Dispute
	late := false
	err = a.update(ctx, func(tx Tx) error {
		late = false
		cur, err := tx.DisputeForUpdate(ctx, d.ID)
		if err != nil {
			return err
		}
		if cur.Status != DisputeNeedsResponse {
			return E(EDisputeNotRespondable, "status", string(cur.Status))
		}
		now := a.now()
		if !cur.DueBy.After(now) {
			// Past due_by: lost, as the deadline job would have made it
			// (it runs every few seconds); the answer comes too late.
			late = true
			_, err := a.closeDispute(ctx, tx, cur.ID, DisputeLost)
			return err
		}
		cur.Evidence, cur.MerchantResponse, cur.RespondedAt, cur.Status, cur.UpdatedAt = in.Evidence, resp, &now, DisputeUnderReview, now
		if err := tx.UpdateDispute(ctx, cur); err != nil {
			return err
		}
		if err := a.disputeEvent(ctx, tx, cur, EventDisputeResponded, pay.CallbackURL); err != nil {
			return err
		}
		out = cur
		return RunCommitHook(ctx, tx, cur)
	})
	if err == nil && late {
		return nil, E(EDisputeNotRespondable, "status", string(DisputeLost))
	}
	return out, err
}

// DecideDispute is the operator's decision. won: the reservation is
// released (what was owed is settled first) and the payment returns to
// success; lost: the reserved amount goes back to the provider and the
// payment stays disputed. id is the dispute's id or DSP- reference. It
// returns not_found and validation_error for a closed dispute, another
// outcome or a note the text rules refuse. The note (why) is kept in the
// decision's audit entry.
func (a *App) DecideDispute(ctx context.Context, id string, outcome DisputeStatus, why string) (*Dispute, error) {
	why = strings.TrimSpace(why)
	v := ValidationErrors{}
	if outcome != DisputeWon && outcome != DisputeLost {
		v.Add("outcome", "must be won or lost")
	}
	checkNote(v, "note", why)
	if err := v.Err(); err != nil {
		return nil, err
	}
	if !isUUID(id) {
		// A DSP- reference, as the API takes it.
		d, err := a.Store.Dispute(ctx, "", id)
		if err != nil {
			return nil, err
		}
		id = d.ID
	}
	var out *Dispute
	err := a.update(ctx, func(tx Tx) error {
		before, err := tx.DisputeForUpdate(ctx, id)
		if err != nil {
			return err
		}
		d, err := a.closeDispute(ctx, tx, id, outcome)
		if err != nil {
			return err
		}
		out = d
		return a.auditNote(ctx, tx, "dispute.decide", "dispute", d.ID, before, d, why)
	})
	return out, err
}

func (a *App) closeDispute(ctx context.Context, tx Tx, id string, outcome DisputeStatus) (*Dispute, error) {
	d, err := tx.DisputeForUpdate(ctx, id)
	if err != nil {
		return nil, err
	}
	if d.Status != DisputeNeedsResponse && d.Status != DisputeUnderReview {
		return nil, &Error{Code: EValidation, Message: fmt.Sprintf("The dispute is already %s.", d.Status),
			Fields: ValidationErrors{"status": {fmt.Sprintf("is %s: the dispute is closed", d.Status)}}}
	}
	pay, err := tx.TransactionForUpdate(ctx, d.TransactionID)
	if err != nil {
		return nil, err
	}
	cur, mode := string(d.LedgerAmount.Currency), string(d.Mode)
	reserved := ledger.Posting{Account: account(d.Mode, d.MerchantID, ledger.Reserved), Currency: cur, Amount: -d.LedgerAmount.Minor}
	now := a.now()
	var ev string
	switch outcome {
	case DisputeWon:
		// The hold returns to available, settling first the debt the
		// shortfall left there.
		postings := []ledger.Posting{reserved, {Account: account(d.Mode, d.MerchantID, ledger.Available), Currency: cur, Amount: d.LedgerAmount.Minor}}
		if err := a.post(ctx, tx, d.Mode, d.MerchantID, "dispute.won", "dispute", d.ID, postings); err != nil {
			return nil, err
		}
		pay.Status = StatusSuccess
		ev = EventDisputeWon
	case DisputeLost:
		postings := []ledger.Posting{reserved, {Account: ledger.Provider(mode, pay.Provider, ledger.Clearing), Currency: cur, Amount: d.LedgerAmount.Minor}}
		if err := a.post(ctx, tx, d.Mode, d.MerchantID, "dispute.lost", "dispute", d.ID, postings); err != nil {
			return nil, err
		}
		ev = EventDisputeLost
	}
	pay.UpdatedAt = now
	if err := tx.UpdateTransaction(ctx, pay); err != nil {
		return nil, err
	}
	d.Status, d.ClosedAt, d.UpdatedAt = outcome, &now, now
	if err := tx.UpdateDispute(ctx, d); err != nil {
		return nil, err
	}
	return d, a.disputeEvent(ctx, tx, d, ev, pay.CallbackURL)
}

// ExpireDisputes loses the disputes whose response window passed without
// a response; it returns how many.
func (a *App) ExpireDisputes(ctx context.Context, limit int) (int, error) {
	due, err := a.Store.DueDisputes(ctx, a.now(), limit)
	if err != nil {
		return 0, fmt.Errorf("due disputes: %w", err)
	}
	n := 0
	var errs []error
	for _, d := range due {
		err := a.update(ctx, func(tx Tx) error {
			cur, err := tx.DisputeForUpdate(ctx, d.ID)
			if err != nil || cur.Status != DisputeNeedsResponse || cur.DueBy.After(a.now()) {
				return err
			}
			_, err = a.closeDispute(ctx, tx, d.ID, DisputeLost)
			if err == nil {
				n++
			}
			return err
		})
		if err != nil {
			// One dispute that cannot move does not hold the others.
			if errs = append(errs, fmt.Errorf("expire dispute %s: %w", d.ID, err)); ctx.Err() != nil {
				break
			}
		}
	}
	return n, errors.Join(errs...)
}

// Dispute returns one of the merchant's disputes by id or reference;
// not_found or livemode_mismatch.
func (a *App) Dispute(ctx context.Context, p *Principal, key string) (*Dispute, error) {
	d, err := a.Store.Dispute(ctx, p.Merchant.ID, key)
	if err != nil {
		return nil, err
	}
	if d.Mode != p.Mode() {
		return nil, E(ELivemodeMismatch)
	}
	return d, nil
}

// Disputes lists the merchant's disputes in the key's mode.
func (a *App) Disputes(ctx context.Context, p *Principal, status DisputeStatus, page PageRequest) ([]*Dispute, Pagination, error) {
	list, total, err := a.Store.Disputes(ctx, p.Merchant.ID, p.Mode(), status, page)
	if err != nil {
		return nil, Pagination{}, fmt.Errorf("list disputes: %w", err)
	}
	return list, NewPagination(page, total), nil
}
