package xaalis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xaalis/xaalis/internal/ledger"
)

// The events of splits, additions to the specification's list (every
// committed change has its event): a split made, to the payment's
// merchant; its share credited, to the beneficiary, whose balance it
// changes and which otherwise had nothing to reconcile against.
const (
	EventSplitCreated  = "split.created"
	EventSplitCredited = "split.credited"
)

// splitEvent writes a split's event for merchantID (the payment's
// merchant, or the beneficiary), to callback too when it is not "".
func (a *App) splitEvent(ctx context.Context, tx Tx, it *SplitItem, typ, merchantID, callback string, at time.Time) error {
	data, err := it.MarshalJSON()
	if err != nil {
		return fmt.Errorf("split event: %w", err)
	}
	return a.emit(ctx, tx, &Event{ID: a.NewID(), MerchantID: merchantID, Mode: it.Mode, Type: typ, ObjectType: "split",
		ObjectID: it.ID, Data: data, CreatedAt: at}, callback)
}

// SplitInput is the body of POST /v1/payments/{id}/splits.
type SplitInput struct {
	Items []struct {
		BeneficiaryMerchantID *string `json:"beneficiary_merchant_id"`
		// Beneficiary is accepted as a shorter name of the same field.
		Beneficiary *string `json:"beneficiary"`
		Amount      *Number `json:"amount"`
		Description *string `json:"description"`
	} `json:"items"`
}

// MarshalJSON renders a split item.
func (s *SplitItem) MarshalJSON() ([]byte, error) {
	status := "pending"
	if s.CreditedAt != nil {
		status = "credited"
	}
	var credited *string
	var creditedCur *Currency
	if s.Credited != nil && s.CreditedAt != nil {
		d, c := s.Credited.Decimal(), s.Credited.Currency
		credited, creditedCur = &d, &c
	}
	return json.Marshal(struct {
		ID                    string    `json:"id"`
		Object                string    `json:"object"`
		PaymentID             string    `json:"payment_id"`
		MerchantReference     *string   `json:"merchant_reference"`
		BeneficiaryMerchantID string    `json:"beneficiary_merchant_id"`
		Amount                string    `json:"amount"`
		Currency              Currency  `json:"currency"`
		Description           *string   `json:"description"`
		Status                string    `json:"status"`
		CreditedAt            *string   `json:"credited_at"`
		CreditedAmount        *string   `json:"credited_amount"`
		CreditedCurrency      *Currency `json:"credited_currency"`
		Livemode              bool      `json:"livemode"`
		CreatedAt             string    `json:"created_at"`
	}{s.ID, "split", s.PaymentID, strPtr(s.MerchantRef), s.BeneficiaryID, s.Amount.Decimal(), s.Amount.Currency,
		strPtr(s.Description), status, tsPtr(s.CreditedAt), credited, creditedCur, s.Mode.Live(), Timestamp(s.CreatedAt)})
}

// CreateSplits divides a payment among marketplace beneficiaries. Splits
// are immutable; two requests on one payment are serialised on its row,
// and the total of all splits never exceeds the payment. Each share is
// credited to its beneficiary's balance when the payment succeeds (at once
// if it already has), net of the payment's provider fee pro rata.
// Errors: split_items_required, non_payment_transaction_split,
// transaction_not_splittable (status), split_total_exceeds_transaction
// (total_split, transaction_amount), splits_exceed_transaction_amount,
// beneficiary_not_active (beneficiary_merchant_id), validation_error,
// amount_must_be_positive, insufficient_balance, not_found,
// livemode_mismatch, merchant_kyc_required (live mode).
func (a *App) CreateSplits(ctx context.Context, p *Principal, key string, in SplitInput) ([]*SplitItem, error) {
	if err := p.Merchant.ActiveError(); err != nil {
		return nil, err
	}
	// A split moves money to another merchant: a live one, as any other
	// money-moving call, waits for the merchant's KYC.
	if p.Mode() == ModeLive && p.Merchant.KYC != KYCApproved {
		return nil, E(EMerchantKYCRequired)
	}
	if len(in.Items) == 0 {
		return nil, E(ESplitItemsRequired)
	}
	pay, err := a.lookup(ctx, p, key, "")
	if err != nil {
		return nil, err
	}
	if pay.Type != TypePayment {
		return nil, E(ENonPaymentTransactionSplit, "type", string(pay.Type))
	}
	if err := splittable(pay); err != nil {
		return nil, err
	}
	v := ValidationErrors{}
	items := make([]*SplitItem, 0, len(in.Items))
	var total int64
	var amountErr error // the first item's amount_must_be_positive
	now := a.now()
	for i, it := range in.Items {
		field := fmt.Sprintf("items[%d]", i)
		ben := ""
		switch {
		case it.BeneficiaryMerchantID != nil:
			ben = strings.TrimSpace(*it.BeneficiaryMerchantID)
		case it.Beneficiary != nil:
			ben = strings.TrimSpace(*it.Beneficiary)
		}
		if ben == "" {
			v.Add(field+".beneficiary_merchant_id", "is required")
		} else if ben == p.Merchant.ID {
			v.Add(field+".beneficiary_merchant_id", "must be another merchant than the payment's")
		}
		amt, err := WholeUnits(v, field+".amount", it.Amount, pay.Amount.Currency)
		if err != nil && amountErr == nil {
			amountErr = err
		}
		desc := ""
		if it.Description != nil {
			if desc = strings.TrimSpace(*it.Description); utf8.RuneCountInString(desc) > 500 {
				v.Add(field+".description", "must be at most 500 characters")
			}
		}
		total += amt.Minor
		items = append(items, &SplitItem{ID: a.NewID(), PaymentID: pay.ID, MerchantID: pay.MerchantID, Mode: pay.Mode,
			BeneficiaryID: ben, Amount: amt, Description: desc, CreatedAt: now})
	}
	if err := v.Err(); err != nil {
		return nil, err // before amount_must_be_positive
	}
	if amountErr != nil {
		return nil, amountErr
	}
	if total > pay.Amount.Minor {
		return nil, E(ESplitTotalExceedsTransaction, "total_split", units(Amount{Minor: total, Currency: pay.Amount.Currency}),
			"transaction_amount", units(pay.Amount))
	}
	for i, it := range items {
		field := fmt.Sprintf("items[%d].beneficiary_merchant_id", i)
		b, err := a.Store.Merchant(ctx, it.BeneficiaryID)
		if errors.Is(err, ErrNotFound) {
			return nil, &Error{Code: EValidation, Fields: ValidationErrors{field: {
				fmt.Sprintf("%s is not a merchant", it.BeneficiaryID)}}}
		} else if err != nil {
			return nil, err
		}
		// "The beneficiary merchant must be active": suspended and closed,
		// which the error's row names, and pending, not yet activated.
		if b.Status != MerchantActive {
			return nil, E(EBeneficiaryNotActive, "beneficiary_merchant_id", b.ID)
		}
		if b.SettlementCurrency != pay.LedgerAmount().Currency {
			return nil, &Error{Code: EValidation, Fields: ValidationErrors{field: {
				fmt.Sprintf("%s settles in %s, the payment in %s", b.ID, b.SettlementCurrency, pay.LedgerAmount().Currency)}}}
		}
	}
	err = a.update(ctx, func(tx Tx) error {
		cur, err := tx.TransactionForUpdate(ctx, pay.ID)
		if err != nil {
			return err
		}
		if err := splittable(cur); err != nil {
			return err
		}
		existing, err := tx.SplitItemsForUpdate(ctx, cur.ID)
		if err != nil {
			return err
		}
		var before int64
		for _, s := range existing {
			before += s.Amount.Minor
		}
		if before+total > cur.Amount.Minor {
			return E(ESplitsExceedTransactionAmount)
		}
		for _, it := range items {
			it.LedgerAmount, it.MerchantRef = it.Amount, cur.MerchantRef
			if cur.SettlementAmount != nil {
				it.LedgerAmount = Convert(it.Amount, cur.SettlementAmount.Currency, new(big.Rat).SetFrac64(cur.SettlementAmount.Minor, cur.Amount.Minor))
			}
			if err := tx.InsertSplitItem(ctx, it); err != nil {
				return fmt.Errorf("insert split: %w", err)
			}
			if err := a.splitEvent(ctx, tx, it, EventSplitCreated, cur.MerchantID, cur.CallbackURL, it.CreatedAt); err != nil {
				return err
			}
		}
		if cur.Status == StatusSuccess {
			if err := a.creditSplits(ctx, tx, cur, items); err != nil {
				return err
			}
		}
		return RunCommitHook(ctx, tx, splitList{items})
	})
	if err != nil {
		return nil, err
	}
	return items, nil
}

// splitList is the answer of a split request: the items created.
type splitList struct{ items []*SplitItem }

// MarshalJSON renders the list.
func (l splitList) MarshalJSON() ([]byte, error) { return json.Marshal(l.items) }

// splittable refuses payments whose status allows no split.
func splittable(t *Transaction) error {
	switch t.Status {
	case StatusRefunded, StatusCancelled, StatusExpired, StatusDisputed, StatusFailed:
		return E(ETransactionNotSplittable, "status", string(t.Status))
	}
	return nil
}

// creditSplits credits the items of an already successful payment: each
// share, net of the payment's fee pro rata, leaves the merchant's available
// balance (under lock: insufficient_balance when it was spent) for the
// beneficiary's.
func (a *App) creditSplits(ctx context.Context, tx Tx, pay *Transaction, items []*SplitItem) error {
	shares := netShares(pay, items, pay.Fee)
	var sum int64
	for i, it := range items {
		if it.CreditedAt == nil {
			sum += shares[i]
		}
	}
	if sum == 0 {
		return nil
	}
	cur := pay.LedgerAmount().Currency
	avail, err := tx.LockBalance(ctx, account(pay.Mode, pay.MerchantID, ledger.Available), cur)
	if err != nil {
		return err
	}
	if avail < sum {
		return InsufficientBalance(cur, avail, sum)
	}
	postings := []ledger.Posting{{Account: account(pay.Mode, pay.MerchantID, ledger.Available), Currency: string(cur), Amount: -sum}}
	now := a.now()
	for i, it := range items {
		if it.CreditedAt != nil || shares[i] == 0 {
			continue
		}
		postings = append(postings, ledger.Posting{Account: account(pay.Mode, it.BeneficiaryID, ledger.Available), Currency: string(cur), Amount: shares[i]})
		if err := tx.MarkSplitCredited(ctx, it.ID, now); err != nil {
			return err
		}
		it.CreditedAt, it.Credited, it.MerchantRef = &now, &Amount{Minor: shares[i], Currency: cur}, pay.MerchantRef
		if err := a.splitEvent(ctx, tx, it, EventSplitCredited, it.BeneficiaryID, "", now); err != nil {
			return err
		}
	}
	return a.post(ctx, tx, pay.Mode, pay.MerchantID, "split.credit", "transaction", pay.ID, postings)
}

// Splits lists a payment's split items; not_found or livemode_mismatch.
func (a *App) Splits(ctx context.Context, p *Principal, key string) ([]*SplitItem, error) {
	// Only a payment has splits: anything else is not_found, as on
	// GET /v1/payments/{id}.
	pay, err := a.lookupOfType(ctx, p, key, TypePayment)
	if err != nil {
		return nil, err
	}
	items, err := a.Store.Splits(ctx, pay.ID)
	if err != nil {
		return nil, err
	}
	withCredited(pay, items)
	return items, nil
}

// withCredited sets what each credited item of the payment pay gave its
// beneficiary, and the payment's merchant_ref.
func withCredited(pay *Transaction, items []*SplitItem) {
	shares := netShares(pay, items, pay.Fee)
	for i, it := range items {
		it.MerchantRef = pay.MerchantRef
		if it.CreditedAt != nil {
			it.Credited = &Amount{Minor: shares[i], Currency: pay.LedgerAmount().Currency}
		}
	}
}
