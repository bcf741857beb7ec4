package xaalis

import (
	"context"
	"fmt"
	"math/big"

	"github.com/xaalis/xaalis/internal/ledger"
)

// LedgerAmount is what a transaction moves in the merchant's ledger: the
// settlement amount when the rate was frozen, else the amount.
func (t *Transaction) LedgerAmount() Amount {
	if t.SettlementAmount != nil {
		return *t.SettlementAmount
	}
	return t.Amount
}

// account names one of a merchant's ledger accounts.
func account(mode Mode, merchantID, bucket string) string {
	return ledger.Merchant(string(mode), merchantID, bucket)
}

// post writes one journal entry caused by a record, inside tx. It may not
// take a merchant's available balance below zero (ledger.ErrNegative).
func (a *App) post(ctx context.Context, tx Tx, mode Mode, merchantID, kind, refType, refID string, postings ...[]ledger.Posting) error {
	return a.postEntry(ctx, tx, false, mode, merchantID, kind, refType, refID, postings...)
}

// postDebt writes an entry that may take a merchant's available balance
// below zero, a debt: refunds and chargebacks only, which the merchant owes
// whatever its balance.
func (a *App) postDebt(ctx context.Context, tx Tx, mode Mode, merchantID, kind, refType, refID string, postings ...[]ledger.Posting) error {
	return a.postEntry(ctx, tx, true, mode, merchantID, kind, refType, refID, postings...)
}

// worthNothing are the entry kinds whose amount is a share converted to
// the settlement currency, which may round to nothing.
var worthNothing = map[string]bool{
	"refund.reserve": true, "refund.success": true, "refund.release": true,
	"dispute.open": true, "dispute.won": true, "dispute.lost": true,
}

func (a *App) postEntry(ctx context.Context, tx Tx, debt bool, mode Mode, merchantID, kind, refType, refID string, postings ...[]ledger.Posting) error {
	e := &ledger.Entry{ID: a.NewID(), Mode: string(mode), MerchantID: merchantID, Kind: kind, RefType: refType,
		RefID: refID, CreatedAt: a.now(), AllowDebt: debt}
	moves := false
	for _, p := range postings {
		e.Postings = append(e.Postings, p...)
		for _, q := range p {
			moves = moves || q.Amount != 0
		}
	}
	if !moves && len(e.Postings) > 0 && worthNothing[kind] {
		// A refund or a dispute of a payment in another currency whose
		// worth in the settlement currency rounds to 0.00 (the last 3 XOF
		// of a payment settled in EUR) moves nothing: its entry is not
		// written. Any other entry of zeros, or with some postings of
		// zero, is still refused by the ledger: that is a mistake.
		return nil
	}
	if err := tx.PostEntry(ctx, e); err != nil {
		return fmt.Errorf("post %s: %w", kind, err)
	}
	return nil
}

// postPayment writes the ledger side of a payment's move from one status
// to another: a memo in pending while the payer has not paid, and on
// success the collection credited to available net of the provider fee.
func (a *App) postPayment(ctx context.Context, tx Tx, t *Transaction, from, to Status) error {
	if err := a.postPaymentLedger(ctx, tx, t, from, to); err != nil {
		return err
	}
	// The stat counters are locked last, as in every command, so that no
	// two transactions wait for each other's rows in opposite orders.
	if from != to {
		return a.countPayment(ctx, tx, t, to)
	}
	return nil
}

// PaymentFee is the fee a successful payment of amt through provider in
// country pays: its fee grid's, at most the amount itself.
func (a *App) PaymentFee(provider string, country Country, amt Amount) Amount {
	fee := Amount{Currency: amt.Currency}
	if g, ok := a.Config.FeeGrid(provider, country); ok {
		fee = a.Config.GridFee(g, amt)
		if fee.Minor > amt.Minor {
			fee.Minor = amt.Minor
		}
	}
	return fee
}

func (a *App) postPaymentLedger(ctx context.Context, tx Tx, t *Transaction, from, to Status) error {
	// The volume counters follow the payment into and out of the counted
	// statuses, in the same transaction.
	if in, was := counted(to), counted(from); in != was {
		delta := t.LimitAmount
		if was {
			delta = -delta
		}
		if err := tx.AddVolume(ctx, VolumeScopes(t), VolumeDay(t.CreatedAt), delta); err != nil {
			return fmt.Errorf("volume counters: %w", err)
		}
	}
	// A pending payment holds room in the hold counters, by the minute of
	// its creation; the limits read the last PendingHold of them.
	if in, was := to == StatusPending, from == StatusPending; in != was {
		delta := t.LimitAmount
		if was {
			delta = -delta
		}
		if err := tx.AddVolume(ctx, HoldScopes(t), HoldMinute(t.CreatedAt), delta); err != nil {
			return fmt.Errorf("hold counters: %w", err)
		}
	}
	amt := t.LedgerAmount()
	cur := string(amt.Currency)
	mode := string(t.Mode)
	pending, expected := account(t.Mode, t.MerchantID, ledger.Pending), ledger.Provider(mode, t.Provider, ledger.Expected)
	if to == StatusPending && from != StatusPending {
		if err := a.post(ctx, tx, t.Mode, t.MerchantID, "payment.pending", "transaction", t.ID,
			ledger.Move(expected, pending, cur, amt.Minor)); err != nil {
			return err
		}
	}
	if from == StatusPending && to != StatusPending {
		if err := a.post(ctx, tx, t.Mode, t.MerchantID, "payment.pending_cleared", "transaction", t.ID,
			ledger.Move(pending, expected, cur, amt.Minor)); err != nil {
			return err
		}
	}
	if to != StatusSuccess || from == StatusSuccess || from == StatusDisputed {
		return nil
	}
	fee := a.PaymentFee(t.Provider, t.Country, amt)
	t.Fee = fee
	postings := []ledger.Posting{
		{Account: ledger.Provider(mode, t.Provider, ledger.Clearing), Currency: cur, Amount: -amt.Minor},
	}
	if fee.Minor > 0 {
		postings = append(postings, ledger.Posting{Account: ledger.Fees(mode), Currency: cur, Amount: fee.Minor})
	}
	// Marketplace shares reach their beneficiaries with the collection,
	// net of the fee pro rata, so the merchant's part is never negative.
	var items []*SplitItem
	if !t.fresh {
		var err error
		if items, err = tx.SplitItemsForUpdate(ctx, t.ID); err != nil {
			return err
		}
	}
	net := amt.Minor - fee.Minor
	merchant := net
	now := a.now()
	for i, share := range netShares(t, items, fee) {
		it := items[i]
		if it.CreditedAt != nil || share == 0 {
			continue
		}
		postings = append(postings, ledger.Posting{Account: account(t.Mode, it.BeneficiaryID, ledger.Available), Currency: cur, Amount: share})
		merchant -= share
		if err := tx.MarkSplitCredited(ctx, it.ID, now); err != nil {
			return err
		}
		it.CreditedAt, it.Credited, it.MerchantRef = &now, &Amount{Minor: share, Currency: Currency(cur)}, t.MerchantRef
		if err := a.splitEvent(ctx, tx, it, EventSplitCredited, it.BeneficiaryID, "", now); err != nil {
			return err
		}
	}
	if merchant > 0 {
		postings = append(postings, ledger.Posting{Account: account(t.Mode, t.MerchantID, ledger.Available), Currency: cur, Amount: merchant})
	}
	return a.post(ctx, tx, t.Mode, t.MerchantID, "payment.success", "transaction", t.ID, postings)
}

// netShares is each split item's share of a payment net of its provider
// fee, pro rata and rounded down: together they never exceed the net.
func netShares(t *Transaction, items []*SplitItem, fee Amount) []int64 {
	gross := t.LedgerAmount().Minor
	out := make([]int64, len(items))
	if gross == 0 {
		return out
	}
	net := new(big.Int).SetInt64(gross - fee.Minor)
	for i, it := range items {
		v := new(big.Int).Mul(new(big.Int).SetInt64(it.LedgerAmount.Minor), net)
		out[i] = v.Quo(v, new(big.Int).SetInt64(gross)).Int64()
	}
	return out
}

// reserve moves money of a merchant from available to reserved, after
// checking under lock that available covers it: payouts, payout requests.
// It returns insufficient_balance (context currency, available, required),
// also while available is negative (a debt). A store that checks such a
// debit when the transaction commits (CommitChecks) is not asked to lock
// the balance now: its commit fails with the same error.
func (a *App) reserve(ctx context.Context, tx Tx, mode Mode, merchantID string, amt Amount, kind, refType, refID string) error {
	if c, ok := tx.(CommitChecks); !ok || !c.ChecksAtCommit() {
		avail, err := tx.LockBalance(ctx, account(mode, merchantID, ledger.Available), amt.Currency)
		if err != nil {
			return fmt.Errorf("lock balance: %w", err)
		}
		if avail < amt.Minor {
			return InsufficientBalance(amt.Currency, avail, amt.Minor)
		}
	}
	return a.post(ctx, tx, mode, merchantID, kind, refType, refID,
		ledger.Move(account(mode, merchantID, ledger.Available), account(mode, merchantID, ledger.Reserved), string(amt.Currency), amt.Minor))
}

// InsufficientBalance is the insufficient_balance of a debit of required
// minor units from an available balance of available.
func InsufficientBalance(cur Currency, available, required int64) *Error {
	return E(EInsufficientBalance, "currency", string(cur), "available", units(Amount{Minor: available, Currency: cur}),
		"required", units(Amount{Minor: required, Currency: cur}))
}

// reserveOwed moves money the merchant owes from available to reserved
// whatever available holds: what it cannot cover leaves available negative,
// a debt recovered from the next credits. Refunds within the refundable
// amount use it, so a merchant can always give a payer's money back.
func (a *App) reserveOwed(ctx context.Context, tx Tx, mode Mode, merchantID string, amt Amount, kind, refType, refID string) error {
	// Locked first, as every debit of available is: entries that lower it
	// then take effect in the order they were written.
	if _, err := tx.LockBalance(ctx, account(mode, merchantID, ledger.Available), amt.Currency); err != nil {
		return fmt.Errorf("lock balance: %w", err)
	}
	return a.postDebt(ctx, tx, mode, merchantID, kind, refType, refID,
		ledger.Move(account(mode, merchantID, ledger.Available), account(mode, merchantID, ledger.Reserved), string(amt.Currency), amt.Minor))
}

// release gives reserved money back to available.
func (a *App) release(ctx context.Context, tx Tx, mode Mode, merchantID string, amt Amount, kind, refType, refID string) error {
	return a.post(ctx, tx, mode, merchantID, kind, refType, refID,
		ledger.Move(account(mode, merchantID, ledger.Reserved), account(mode, merchantID, ledger.Available), string(amt.Currency), amt.Minor))
}

// units renders an amount as a JSON number of whole units ("4950.5").
func units(a Amount) jsonNumber { return jsonNumber(a.Decimal()) }

// jsonNumber is a decimal written as a JSON number, never through a float.
type jsonNumber string

// MarshalJSON writes the number as it is, trimmed of useless zeros.
func (n jsonNumber) MarshalJSON() ([]byte, error) {
	s := string(n)
	for len(s) > 0 && s[len(s)-1] == '0' && containsDot(s) {
		s = s[:len(s)-1]
	}
	if len(s) > 0 && s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return []byte(s), nil
}

func containsDot(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return true
		}
	}
	return false
}

// LedgerCheck compares cached balances with their postings and every
// entry with zero. An empty result is a consistent ledger.
func (a *App) LedgerCheck(ctx context.Context) ([]ledger.Problem, error) {
	ps, err := a.Store.CheckLedger(ctx)
	if err != nil {
		return nil, fmt.Errorf("check ledger: %w", err)
	}
	ledger.Sort(ps)
	return ps, nil
}
