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
	for acc, want := range map[string]bool{
		ledger.Merchant("live", "m1", ledger.Available):       true,
		ledger.Merchant("live", "m1", ledger.Reserved):        true,
		ledger.Merchant("live", "m1", ledger.Pending):         false,
		ledger.Provider("live", "channel_a", ledger.Clearing): false,
		ledger.Fees("live"):  false,
		ledger.World("live"): false,
	} {
		if got := ledger.NonNegative(acc); got != want {
			t.Errorf("%s: %v", acc, got)
		}
	}
}
