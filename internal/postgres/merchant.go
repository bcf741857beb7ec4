package postgres

import (
	"context"
	"fmt"

	"github.com/xaalis/xaalis/internal/xaalis"
)

const merchantColumns = `m.id, m.name, m.country, m.settlement_currency, m.status, m.kyc,
	m.allowed_providers, m.allow_ips, m.payouts_enabled, m.created_at, m.updated_at, m.return_hosts`

// scanMerchant scans merchantColumns, then extra, from one row.
func scanMerchant(op string, row interface{ Scan(...any) error }, extra ...any) (*xaalis.Merchant, error) {
	var m xaalis.Merchant
	dst := append([]any{&m.ID, &m.Name, &m.Country, &m.SettlementCurrency, &m.Status, &m.KYC,
		&m.AllowedProviders, &m.AllowIPs, &m.PayoutsEnabled, &m.CreatedAt, &m.UpdatedAt, &m.ReturnHosts}, extra...)
	if err := row.Scan(dst...); err != nil {
		return nil, notFound(op, err)
	}
	m.AllowedProviders, m.AllowIPs = nilIfEmpty(m.AllowedProviders), nilIfEmpty(m.AllowIPs)
	m.ReturnHosts = nilIfEmpty(m.ReturnHosts)
	m.CreatedAt, m.UpdatedAt = m.CreatedAt.UTC(), m.UpdatedAt.UTC()
	return &m, nil
}

func getMerchant(ctx context.Context, q querier, id string, lock string) (*xaalis.Merchant, error) {
	return scanMerchant("read merchant", q.QueryRow(ctx, `SELECT `+merchantColumns+` FROM merchants m WHERE m.id = $1`+lock, id))
}

// Merchant returns a merchant by id.
func (s *Store) Merchant(ctx context.Context, id string) (*xaalis.Merchant, error) {
	return getMerchant(ctx, s.pool, id, "")
}

// CreateMerchant inserts a merchant.
func (t *Tx) CreateMerchant(ctx context.Context, m *xaalis.Merchant) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO merchants (id, name, country, settlement_currency, status, kyc,
		allowed_providers, allow_ips, payouts_enabled, created_at, updated_at, return_hosts)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		m.ID, m.Name, m.Country, m.SettlementCurrency, m.Status, m.KYC,
		nonNil(m.AllowedProviders), cidrs(m.AllowIPs), m.PayoutsEnabled, m.CreatedAt, m.UpdatedAt, nonNil(m.ReturnHosts))
	if err != nil {
		return fmt.Errorf("create merchant: %w", err)
	}
	return nil
}

// MerchantForUpdate reads a merchant and locks its row until the
// transaction ends.
func (t *Tx) MerchantForUpdate(ctx context.Context, id string) (*xaalis.Merchant, error) {
	return getMerchant(ctx, t.tx, id, ` FOR UPDATE`)
}

// UpdateMerchant writes every mutable field of m.
func (t *Tx) UpdateMerchant(ctx context.Context, m *xaalis.Merchant) error {
	tag, err := t.tx.Exec(ctx, `UPDATE merchants SET name = $1, status = $2, kyc = $3, allowed_providers = $4,
		allow_ips = $5, payouts_enabled = $6, updated_at = $7, return_hosts = $8 WHERE id = $9`,
		m.Name, m.Status, m.KYC, nonNil(m.AllowedProviders), cidrs(m.AllowIPs), m.PayoutsEnabled, m.UpdatedAt,
		nonNil(m.ReturnHosts), m.ID)
	return oneRow("update merchant", tag, err)
}

// AnyMerchant reports whether at least one merchant exists.
func (t *Tx) AnyMerchant(ctx context.Context) (bool, error) {
	var found bool
	if err := t.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM merchants)`).Scan(&found); err != nil {
		return false, fmt.Errorf("any merchant: %w", err)
	}
	return found, nil
}
