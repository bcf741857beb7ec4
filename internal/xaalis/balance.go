package xaalis

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/xaalis/xaalis/internal/ledger"
)

// Balance is the balance record of GET /v1/balance, in the merchant's
// settlement currency.
type Balance struct {
	// Available: successful payments net of fees, less refunds, payouts and
	// withdrawals, less what is reserved: what may be paid out now. Below
	// zero it is a debt that refunds or chargebacks left, recovered from
	// the next credits; payouts wait until it covers them.
	Available Amount
	// Pending: payments still pending, not yet collected (a memo).
	Pending Amount
	// Reserved: payout reservations, payout requests and chargebacks.
	Reserved Amount
	// Accounting: all the merchant's money Xaalis holds: available (less
	// any debt) and reserved together.
	Accounting  Amount
	LastUpdated time.Time
	Mode        Mode
}

// MarshalJSON renders the balance record; amounts are JSON numbers.
func (b *Balance) MarshalJSON() ([]byte, error) {
	last := b.LastUpdated
	return json.Marshal(struct {
		Object      string     `json:"object"`
		Currency    Currency   `json:"currency"`
		Available   jsonNumber `json:"available"`
		Pending     jsonNumber `json:"pending"`
		Reserved    jsonNumber `json:"reserved"`
		Accounting  jsonNumber `json:"accounting"`
		LastUpdated string     `json:"last_updated"`
		Livemode    bool       `json:"livemode"`
	}{"balance", b.Available.Currency, units(b.Available), units(b.Pending), units(b.Reserved), units(b.Accounting),
		Timestamp(last), b.Mode.Live()})
}

// Balance reads the merchant's balance in the key's mode.
func (a *App) Balance(ctx context.Context, p *Principal) (*Balance, error) {
	return a.MerchantBalance(ctx, p.Merchant, p.Mode())
}

// MerchantBalance reads a merchant's balance in a mode.
func (a *App) MerchantBalance(ctx context.Context, m *Merchant, mode Mode) (*Balance, error) {
	cur := m.SettlementCurrency
	avail, pend, res := account(mode, m.ID, ledger.Available), account(mode, m.ID, ledger.Pending), account(mode, m.ID, ledger.Reserved)
	got, last, err := a.Store.Balances(ctx, []string{avail, pend, res}, cur)
	if err != nil {
		return nil, fmt.Errorf("read balances: %w", err)
	}
	if last.IsZero() {
		last = m.CreatedAt
	}
	b := &Balance{
		Available: Amount{Minor: got[avail], Currency: cur}, Pending: Amount{Minor: got[pend], Currency: cur},
		Reserved: Amount{Minor: got[res], Currency: cur}, Accounting: Amount{Minor: got[avail] + got[res], Currency: cur},
		LastUpdated: last, Mode: mode,
	}
	return b, nil
}
