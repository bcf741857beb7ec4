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
	// withdrawals, less what is reserved: what may be paid out now.
	Available Amount
	// Pending: payments still pending, not yet collected (a memo).
	Pending Amount
	// Reserved: payout reservations, payout requests and chargebacks.
	Reserved Amount
	// Accounting: all the merchant's money Xaalis holds: available and
	// reserved together, less what the merchant owes on disputes that
	// available could not cover.
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
	m := p.Merchant
	cur := m.SettlementCurrency
	avail, pend, res := account(p.Mode(), m.ID, ledger.Available), account(p.Mode(), m.ID, ledger.Pending), account(p.Mode(), m.ID, ledger.Reserved)
	debt := account(p.Mode(), m.ID, chargebackDebtBucket)
	got, last, err := a.Store.Balances(ctx, []string{avail, pend, res, debt}, cur)
	if err != nil {
		return nil, fmt.Errorf("read balances: %w", err)
	}
	if last.IsZero() {
		last = m.CreatedAt
	}
	b := &Balance{
		Available: Amount{Minor: got[avail], Currency: cur}, Pending: Amount{Minor: got[pend], Currency: cur},
		Reserved: Amount{Minor: got[res], Currency: cur}, Accounting: Amount{Minor: got[avail] + got[res] + got[debt], Currency: cur},
		LastUpdated: last, Mode: p.Mode(),
	}
	return b, nil
}
