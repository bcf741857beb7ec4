// Package ledger is double-entry bookkeeping: every movement of money is an
// entry of two or more postings that sum to zero in each currency, and an
// account's balance is the sum of its postings.
//
// Accounts are named "<mode>:<owner>:<id>:<bucket>", for example
// "test:merchant:0192…:available". The sign convention is the merchant's
// view: a positive balance on a merchant account is money Xaalis holds for
// the merchant.
package ledger

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Merchant buckets.
const (
	// Available is what the merchant may pay out now. It may be negative:
	// a debt, left by a refund or a chargeback larger than what was
	// available (entries with AllowDebt), and recovered from the next
	// credits. Nothing else may take it below zero.
	Available = "available"
	// Pending is what payments still pending should bring (a memo, offset
	// by the provider's Expected account).
	Pending = "pending"
	// Reserved holds payout reservations, payout requests and chargebacks.
	Reserved = "reserved"
)

// Provider buckets.
const (
	// Clearing is money between Xaalis and the provider: collected for us,
	// or paid out by it on our behalf.
	Clearing = "clearing"
	// Expected offsets merchants' Pending memos.
	Expected = "expected"
)

// Merchant names a merchant's account.
func Merchant(mode, merchantID, bucket string) string {
	return mode + ":merchant:" + merchantID + ":" + bucket
}

// Provider names a provider's account.
func Provider(mode, provider, bucket string) string {
	return mode + ":provider:" + provider + ":" + bucket
}

// Fees is where Xaalis's fees accrue.
func Fees(mode string) string { return mode + ":xaalis:fees:earned" }

// World is money that left the system: bank transfers of settlements.
func World(mode string) string { return mode + ":world:external:settled" }

// NonNegative reports whether an account may never go below zero, which
// the database itself enforces: a merchant's reserved money.
func NonNegative(account string) bool {
	return strings.Contains(account, ":merchant:") && strings.HasSuffix(account, ":"+Reserved)
}

// MayOwe reports whether an account may go below zero only through an
// entry that allows debt (Entry.AllowDebt): a merchant's available money.
// A credit to it is always allowed, so a debt is recovered from the next
// credits; any other debit must leave it at zero or more.
func MayOwe(account string) bool {
	return strings.Contains(account, ":merchant:") && strings.HasSuffix(account, ":"+Available)
}

// DebitChecked reports whether what an entry adds to an account (delta)
// is a debit that must leave a MayOwe account at zero or more: the entry
// does not allow debt. Both stores check those debits against the balance.
func (e *Entry) DebitChecked(account string, delta int64) bool {
	return !e.AllowDebt && MayOwe(account) && delta < 0
}

// Overdrawn reports whether one of an entry's debits leaves a MayOwe
// account below zero when the entry does not allow debt: balance is the
// account's balance after the entry, delta what the entry added to it.
func (e *Entry) Overdrawn(account string, delta, balance int64) bool {
	return e.DebitChecked(account, delta) && balance < 0
}

// Posting moves Amount (minor units, signed) into Account.
type Posting struct {
	Account  string
	Currency string
	Amount   int64
}

// Entry is one journal entry.
type Entry struct {
	ID         string
	Mode       string
	MerchantID string
	// Kind says what happened, such as "payment.success" or "payout.reserve".
	Kind string
	// RefType and RefID name the record that caused it.
	RefType   string
	RefID     string
	Postings  []Posting
	CreatedAt time.Time
	// AllowDebt lets the entry take a merchant's available balance below
	// zero: refunds and chargebacks, which the merchant owes whatever its
	// balance. Not stored: the check happens as the entry is posted.
	AllowDebt bool
}

// ErrUnbalanced: an entry's postings do not sum to zero.
var ErrUnbalanced = errors.New("ledger: entry does not sum to zero")

// ErrNegative: a posting would take a non-negative account below zero, or
// a merchant's available balance below zero in an entry without AllowDebt.
var ErrNegative = errors.New("ledger: a non-negative account would go below zero")

// Validate checks an entry: at least two postings, none zero, every
// account named, and a zero sum in each currency.
func (e *Entry) Validate() error {
	if len(e.Postings) < 2 {
		return fmt.Errorf("%w: %s has %d postings", ErrUnbalanced, e.Kind, len(e.Postings))
	}
	sums := map[string]int64{}
	for _, p := range e.Postings {
		if p.Account == "" || p.Currency == "" || p.Amount == 0 {
			return fmt.Errorf("%w: %s has an empty posting %+v", ErrUnbalanced, e.Kind, p)
		}
		sums[p.Currency] += p.Amount
	}
	for c, s := range sums {
		if s != 0 {
			return fmt.Errorf("%w: %s sums to %d %s", ErrUnbalanced, e.Kind, s, c)
		}
	}
	return nil
}

// Move is the entry moving amount from one account to another.
func Move(from, to, currency string, amount int64) []Posting {
	return []Posting{{Account: from, Currency: currency, Amount: -amount}, {Account: to, Currency: currency, Amount: amount}}
}

// Problem is one finding of a ledger check.
type Problem struct {
	// Kind is "unbalanced_entry", "balance_mismatch" or "count_mismatch".
	Kind     string
	EntryID  string
	Account  string
	Currency string
	// Cached and Posted are the cached balance and the sum of postings;
	// for a count_mismatch, the cached count and the rows counted.
	Cached int64
	Posted int64
	// Counted is what a count_mismatch counts: "merchant mode type
	// status" of the transactions.
	Counted string
}

// CountMismatch is the Kind of a cached count of transactions (the
// lists' total_count reads it) that differs from the rows it counts.
const CountMismatch = "count_mismatch"

func (p Problem) String() string {
	switch p.Kind {
	case "unbalanced_entry":
		return fmt.Sprintf("entry %s sums to %d %s", p.EntryID, p.Posted, p.Currency)
	case CountMismatch:
		return fmt.Sprintf("transactions %s: cached count %d, rows %d", p.Counted, p.Cached, p.Posted)
	}
	return fmt.Sprintf("account %s (%s): cached balance %d, postings sum to %d", p.Account, p.Currency, p.Cached, p.Posted)
}

// Sort orders problems for stable output.
func Sort(ps []Problem) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Kind != ps[j].Kind {
			return ps[i].Kind < ps[j].Kind
		}
		return ps[i].EntryID+ps[i].Account+ps[i].Counted < ps[j].EntryID+ps[j].Account+ps[j].Counted
	})
}
