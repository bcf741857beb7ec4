package xaalis

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xaalis/xaalis/internal/ledger"
)

// PayoutRequestInput is the body of POST /v1/payout-requests.
type PayoutRequestInput struct {
	Amount           *Number `json:"amount"`
	Currency         *string `json:"currency"`
	DestinationPhone *string `json:"destination_phone"`
	DestinationIBAN  *string `json:"destination_iban"`
	DestinationBank  *string `json:"destination_bank"`
	MerchantNote     *string `json:"merchant_note"`
}

// Payout request limits (spec: Limits).
const (
	PayoutRequestThrottle       = 10
	PayoutRequestThrottleWindow = time.Minute
	PayoutRequestListSize       = 50
)

// Payout request events.
const (
	EventPRSubmitted = "payout_request.submitted"
	EventPRApproved  = "payout_request.approved"
	EventPRRejected  = "payout_request.rejected"
	EventPRCompleted = "payout_request.completed"
	EventPRFailed    = "payout_request.failed"
)

var ibanPattern = regexp.MustCompile(`^[A-Z]{2}[0-9]{2}[A-Z0-9]{10,30}$`)

// uemoaIBANLength is the length of an IBAN of each UEMOA country.
var uemoaIBANLength = map[string]int{"SN": 28, "CI": 28, "ML": 28, "BF": 28, "TG": 28, "BJ": 28, "NE": 28, "GW": 25}

// validIBAN reports whether iban (upper case, no spaces) is an IBAN: its
// form, its length where the country is a UEMOA one, and its check
// digits (ISO 13616: the number formed by the BBAN, the country's letters
// as 10 to 35 and the check digits, modulo 97, is 1), so that a mistyped
// account goes back to the merchant rather than to the operator's queue.
func validIBAN(iban string) bool {
	if !ibanPattern.MatchString(iban) {
		return false
	}
	if n, ok := uemoaIBANLength[iban[:2]]; ok && len(iban) != n {
		return false
	}
	rem := 0
	for _, c := range iban[4:] + iban[:4] {
		switch {
		case c >= '0' && c <= '9':
			rem = (rem*10 + int(c-'0')) % 97
		default: // A-Z, as the pattern has it: two digits
			rem = (rem*100 + int(c-'A'+10)) % 97
		}
	}
	return rem == 1
}

// SubmitPayoutRequest asks to withdraw part of the balance: the amount is
// reserved at once. A merchant may submit 10 a minute; the count lives in
// the database, so it holds across server processes. Errors:
// merchant_inactive, merchant_kyc_required, validation_error,
// amount_must_be_positive, invalid_phone_number, too_many_requests (with
// RetryAfter), insufficient_balance.
func (a *App) SubmitPayoutRequest(ctx context.Context, p *Principal, in PayoutRequestInput) (*PayoutRequest, error) {
	m := p.Merchant
	if err := m.ActiveError(); err != nil {
		return nil, err
	}
	if p.Mode() == ModeLive && m.KYC != KYCApproved {
		return nil, E(EMerchantKYCRequired)
	}
	v := ValidationErrors{}
	cur := m.SettlementCurrency
	if in.Currency != nil {
		if cur = Currency(strings.ToUpper(strings.TrimSpace(*in.Currency))); cur != m.SettlementCurrency {
			v.Add("currency", fmt.Sprintf("must be the account's settlement currency, %s", m.SettlementCurrency))
		}
	}
	str := func(f string, s *string, max int) string {
		if s == nil {
			return ""
		}
		out := strings.TrimSpace(*s)
		if utf8.RuneCountInString(out) > max {
			v.Add(f, fmt.Sprintf("must be at most %d characters", max))
		}
		return out
	}
	phone := str("destination_phone", in.DestinationPhone, 32)
	iban := strings.ToUpper(strings.ReplaceAll(str("destination_iban", in.DestinationIBAN, 42), " ", ""))
	bank := str("destination_bank", in.DestinationBank, 200)
	note := str("merchant_note", in.MerchantNote, 1000)
	if phone == "" && iban == "" {
		v.Add("destination_phone", "a destination is required: destination_phone or destination_iban")
	}
	if iban != "" && !validIBAN(iban) {
		v.Add("destination_iban", "is not an IBAN (its form, length or check digits)")
	}
	amount, err := WholeUnits(v, "amount", in.Amount, cur)
	if err := v.Err(); err != nil {
		return nil, err // before amount_must_be_positive
	}
	if err != nil {
		return nil, err
	}
	if phone != "" {
		if phone, err = ParsePhone(phone, m.Country); err != nil {
			return nil, err
		}
	}
	fee := a.Config.GridFee(a.Config.WithdrawalFee, amount)
	if fee.Minor >= amount.Minor {
		return nil, &Error{Code: EValidation, Fields: ValidationErrors{"amount": {
			fmt.Sprintf("must be more than the withdrawal fee of %s %s", fee.Decimal(), cur)}}}
	}
	now := a.now()
	r := &PayoutRequest{
		ID: a.NewID(), MerchantID: m.ID, Mode: p.Mode(), Reference: NewPayoutRequestReference(), Status: PRSubmitted,
		Amount: amount, Fee: fee, Net: Amount{Minor: amount.Minor - fee.Minor, Currency: cur}, DestPhone: phone,
		DestIBAN: iban, DestBank: bank, MerchantNote: note, SubmittedAt: now, UpdatedAt: now,
	}
	err = a.update(ctx, func(tx Tx) error {
		// Per mode: test requests never hold back a live withdrawal.
		n, oldest, err := tx.PayoutRequestsSince(ctx, m.ID, r.Mode, now.Add(-PayoutRequestThrottleWindow))
		if err != nil {
			return fmt.Errorf("count payout requests: %w", err)
		}
		if n >= PayoutRequestThrottle {
			wait := oldest.Add(PayoutRequestThrottleWindow).Sub(now)
			e := tooMany(wait, "At most 10 payout requests a minute; retry after Retry-After seconds.")
			return e
		}
		if err := tx.InsertPayoutRequest(ctx, r); err != nil {
			return fmt.Errorf("insert payout request: %w", err)
		}
		if err := a.reserve(ctx, tx, r.Mode, m.ID, r.Amount, "payout_request.reserve", "payout_request", r.ID); err != nil {
			return err
		}
		if err := a.prEvent(ctx, tx, r, EventPRSubmitted); err != nil {
			return err
		}
		return RunCommitHook(ctx, tx, r)
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

func tooMany(wait time.Duration, msg string) *Error {
	if wait < time.Second {
		wait = time.Second
	}
	return &Error{Code: ETooManyRequests, Message: msg, RetryAfter: wait}
}

func (a *App) prEvent(ctx context.Context, tx Tx, r *PayoutRequest, typ string) error {
	data, err := r.MarshalJSON()
	if err != nil {
		return err
	}
	return a.emit(ctx, tx, &Event{ID: a.NewID(), MerchantID: r.MerchantID, Mode: r.Mode, Type: typ,
		ObjectType: "payout_request", ObjectID: r.ID, Data: data, CreatedAt: r.UpdatedAt}, "")
}

// PayoutRequest returns one of the merchant's payout requests by id or
// PR- reference in the key's mode; not_found or livemode_mismatch.
func (a *App) PayoutRequest(ctx context.Context, p *Principal, key string) (*PayoutRequest, error) {
	r, err := a.Store.PayoutRequest(ctx, p.Merchant.ID, key)
	if err != nil {
		return nil, err
	}
	if r.Mode != p.Mode() {
		return nil, E(ELivemodeMismatch)
	}
	return r, nil
}

// PayoutRequests returns the merchant's last 50 payout requests, newest
// first.
func (a *App) PayoutRequests(ctx context.Context, p *Principal) ([]*PayoutRequest, error) {
	return a.Store.PayoutRequests(ctx, p.Merchant.ID, p.Mode(), PayoutRequestListSize)
}

// Settlements lists the merchant's settled (completed) payout requests.
func (a *App) Settlements(ctx context.Context, p *Principal, page PageRequest) ([]Settlement, Pagination, error) {
	list, total, err := a.Store.Settlements(ctx, p.Merchant.ID, p.Mode(), page)
	if err != nil {
		return nil, Pagination{}, fmt.Errorf("list settlements: %w", err)
	}
	out := make([]Settlement, len(list))
	for i, r := range list {
		out[i] = Settlement{r}
	}
	return out, NewPagination(page, total), nil
}

// PayoutRequestAction is an operator's move of a payout request.
type PayoutRequestAction string

// The four operator moves; submission is the merchant's.
const (
	ActionApprove  PayoutRequestAction = "approve"
	ActionReject   PayoutRequestAction = "reject"
	ActionComplete PayoutRequestAction = "complete"
	ActionFail     PayoutRequestAction = "fail"
)

// MovePayoutRequest applies an operator's action. Only the specification's
// moves exist: submitted→approved, submitted→rejected (reservation
// released), approved→completed (reservation consumed: the net leaves to
// the destination, the fee is earned), approved→failed (released). Any
// other move is a validation_error naming the status. The reason is kept
// in the move's audit entry (and on the record as rejection_reason or
// failure_reason). id is the request's id or PR- reference. It returns
// not_found too.
func (a *App) MovePayoutRequest(ctx context.Context, id string, action PayoutRequestAction, reason string) (*PayoutRequest, error) {
	reason = strings.TrimSpace(reason)
	v := ValidationErrors{}
	if action == ActionReject && reason == "" {
		v.Add("reason", "is required to reject")
	}
	checkNote(v, "reason", reason)
	if err := v.Err(); err != nil {
		return nil, err
	}
	if !isUUID(id) {
		// A PR- reference, as the merchant's API and the CLI's own
		// answers name it.
		r, err := a.Store.PayoutRequest(ctx, "", id)
		if err != nil {
			return nil, err
		}
		id = r.ID
	}
	var out *PayoutRequest
	err := a.update(ctx, func(tx Tx) error {
		r, err := tx.PayoutRequestForUpdate(ctx, id)
		if err != nil {
			return err
		}
		from := r.Status
		before := *r
		now := a.now()
		var ev string
		mode, cur := string(r.Mode), string(r.Amount.Currency)
		switch {
		case action == ActionApprove && from == PRSubmitted:
			r.Status, r.ApprovedAt, ev = PRApproved, &now, EventPRApproved
		case action == ActionReject && from == PRSubmitted:
			if err := a.release(ctx, tx, r.Mode, r.MerchantID, r.Amount, "payout_request.release", "payout_request", r.ID); err != nil {
				return err
			}
			r.Status, r.RejectionReason, ev = PRRejected, reason, EventPRRejected
		case action == ActionComplete && from == PRApproved:
			postings := []ledger.Posting{
				{Account: account(r.Mode, r.MerchantID, ledger.Reserved), Currency: cur, Amount: -r.Amount.Minor},
				{Account: ledger.World(mode), Currency: cur, Amount: r.Net.Minor},
			}
			if r.Fee.Minor > 0 {
				postings = append(postings, ledger.Posting{Account: ledger.Fees(mode), Currency: cur, Amount: r.Fee.Minor})
			}
			if err := a.post(ctx, tx, r.Mode, r.MerchantID, "payout_request.complete", "payout_request", r.ID, postings); err != nil {
				return err
			}
			r.Status, r.CompletedAt, ev = PRCompleted, &now, EventPRCompleted
		case action == ActionFail && from == PRApproved:
			if err := a.release(ctx, tx, r.Mode, r.MerchantID, r.Amount, "payout_request.release", "payout_request", r.ID); err != nil {
				return err
			}
			r.Status, r.FailureReason, ev = PRFailed, reason, EventPRFailed
		default:
			return &Error{Code: EValidation, Message: fmt.Sprintf("A payout request in status %s cannot be moved by %s.", from, action),
				Fields: ValidationErrors{"status": {fmt.Sprintf("is %s: %s is not possible", from, action)}}}
		}
		r.UpdatedAt = now
		if err := tx.UpdatePayoutRequest(ctx, r); err != nil {
			return fmt.Errorf("update payout request: %w", err)
		}
		if err := a.prEvent(ctx, tx, r, ev); err != nil {
			return err
		}
		out = r
		return a.auditNote(ctx, tx, "payout_request."+string(action), "payout_request", r.ID, &before, r, reason)
	})
	return out, err
}
