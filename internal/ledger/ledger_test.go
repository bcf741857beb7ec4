package ledger_test

import (
	"errors"
	"testing"

	"github.com/xaalis/xaalis/internal/ledger"
)

func TestValidate(t *testing.T) {
	a, b := ledger.Merchant("test", "m", ledger.Available), ledger.Fees("test")
	for name, c := range map[string]struct {
		postings []ledger.Posting
		ok       bool
	}{
		"OK":               {ledger.Move(a, b, "XOF", 100), true},
		"OKTwoCurrencies":  {append(ledger.Move(a, b, "XOF", 100), ledger.Move(b, a, "EUR", 5)...), true},
		"ErrOnePosting":    {[]ledger.Posting{{Account: a, Currency: "XOF", Amount: 1}}, false},
		"ErrUnbalanced":    {[]ledger.Posting{{Account: a, Currency: "XOF", Amount: 1}, {Account: b, Currency: "XOF", Amount: -2}}, false},
		"ErrCurrencyMixed": {[]ledger.Posting{{Account: a, Currency: "XOF", Amount: 1}, {Account: b, Currency: "EUR", Amount: -1}}, false},
		"ErrZeroPosting":   {[]ledger.Posting{{Account: a, Currency: "XOF", Amount: 0}, {Account: b, Currency: "XOF", Amount: 0}}, false},
		"ErrNoAccount":     {[]ledger.Posting{{Currency: "XOF", Amount: 1}, {Account: b, Currency: "XOF", Amount: -1}}, false},
	} {
		t.Run(name, func(t *testing.T) {
			e := &ledger.Entry{Kind: "x", Postings: c.postings}
			err := e.Validate()
			if c.ok != (err == nil) || (err != nil && !errors.Is(err, ledger.ErrUnbalanced)) {
				t.Fatalf("Validate = %v", err)
			}
		})
	}
}

func TestNonNegative(t *testing.T) {
	for acc, want := range map[string][2]bool{ // NonNegative, MayOwe
		ledger.Merchant("live", "m1", ledger.Available):       {false, true},
		ledger.Merchant("live", "m1", ledger.Reserved):        {true, false},
		ledger.Merchant("live", "m1", ledger.Pending):         {false, false},
		ledger.Provider("live", "channel_a", ledger.Clearing): {false, false},
		ledger.Fees("live"):  {false, false},
		ledger.World("live"): {false, false},
	} {
		if got := [2]bool{ledger.NonNegative(acc), ledger.MayOwe(acc)}; got != want {
			t.Errorf("%s: NonNegative, MayOwe = %v, want %v", acc, got, want)
		}
	}
}

// TestOverdrawn: only a debit without AllowDebt may not leave a
// merchant's available below zero; credits always pass (they recover a
// debt), and other accounts are not judged here.
func TestOverdrawn(t *testing.T) {
	avail := ledger.Merchant("test", "m", ledger.Available)
	plain, debt := &ledger.Entry{}, &ledger.Entry{AllowDebt: true}
	for _, c := range []struct {
		e              *ledger.Entry
		acc            string
		delta, balance int64
		want           bool
	}{
		{plain, avail, -100, -1, true},
		{plain, avail, -100, 0, false},
		{plain, avail, 50, -50, false}, // a credit that recovers part of a debt
		{debt, avail, -100, -100, false},
		{plain, ledger.Merchant("test", "m", ledger.Pending), -100, -100, false},
		{plain, ledger.World("test"), -100, -100, false},
	} {
		if got := c.e.Overdrawn(c.acc, c.delta, c.balance); got != c.want {
			t.Errorf("AllowDebt=%v %s %+d → %d: %v, want %v", c.e.AllowDebt, c.acc, c.delta, c.balance, got, c.want)
		}
	}
}
