package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/xaalis/xaalis/internal/xaalis"
)

const merchantColumns = `m.id, m.name, m.country, m.settlement_currency, m.status, m.kyc,
	m.allowed_providers, m.allow_ips, m.payouts_enabled, m.created_at, m.updated_at, m.return_hosts`

func scanMerchant(sc func(...any) error, extra ...any) (*xaalis.Merchant, error) {
	var m xaalis.Merchant
	var providers, ips, hosts string
	var payouts int
	var created, updated int64
	dst := append([]any{&m.ID, &m.Name, &m.Country, &m.SettlementCurrency, &m.Status, &m.KYC,
		&providers, &ips, &payouts, &created, &updated, &hosts}, extra...)
	if err := sc(dst...); err != nil {
		return nil, notFound(err)
	}
	m.AllowedProviders, m.ReturnHosts = splitList(providers), splitList(hosts)
	var err error
	if m.AllowIPs, err = parsePrefixes(ips); err != nil {
		return nil, err
	}
	m.PayoutsEnabled = payouts == 1
	m.CreatedAt, m.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &m, nil
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func joinPrefixes(ps []netip.Prefix) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return strings.Join(out, ",")
}

func parsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range splitList(s) {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return nil, fmt.Errorf("stored prefix %q: %w", v, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Merchant returns a merchant by id.
func (s *Store) Merchant(ctx context.Context, id string) (*xaalis.Merchant, error) {
	return getMerchant(ctx, s.read, id)
}

func getMerchant(ctx context.Context, q querier, id string) (*xaalis.Merchant, error) {
	return scanMerchant(q.QueryRowContext(ctx, `SELECT `+merchantColumns+` FROM merchants m WHERE m.id = ?`, id).Scan)
}

// CreateMerchant inserts a merchant.
func (t *Tx) CreateMerchant(ctx context.Context, m *xaalis.Merchant) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO merchants (id, name, country, settlement_currency, status, kyc,
		allowed_providers, allow_ips, payouts_enabled, created_at, updated_at, return_hosts)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		m.ID, m.Name, m.Country, m.SettlementCurrency, m.Status, m.KYC,
		strings.Join(m.AllowedProviders, ","), joinPrefixes(m.AllowIPs), boolInt(m.PayoutsEnabled),
		micros(m.CreatedAt), micros(m.UpdatedAt), strings.Join(m.ReturnHosts, ","))
	return err
}

// MerchantForUpdate reads a merchant inside the write transaction, which
// already holds SQLite's single write lock.
func (t *Tx) MerchantForUpdate(ctx context.Context, id string) (*xaalis.Merchant, error) {
	return getMerchant(ctx, t.tx, id)
}

// UpdateMerchant writes every mutable field of m.
func (t *Tx) UpdateMerchant(ctx context.Context, m *xaalis.Merchant) error {
	res, err := t.tx.ExecContext(ctx, `UPDATE merchants SET name = ?, status = ?, kyc = ?, allowed_providers = ?,
		allow_ips = ?, payouts_enabled = ?, updated_at = ?, return_hosts = ? WHERE id = ?`,
		m.Name, m.Status, m.KYC, strings.Join(m.AllowedProviders, ","), joinPrefixes(m.AllowIPs),
		boolInt(m.PayoutsEnabled), micros(m.UpdatedAt), strings.Join(m.ReturnHosts, ","), m.ID)
	if err != nil {
		return err
	}
	return oneRow(res)
}

func oneRow(res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return xaalis.ErrNotFound
	}
	return nil
}

// InsertSettingOnce records a setting unless it exists.
func (t *Tx) InsertSettingOnce(ctx context.Context, name string, value []byte) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT DO NOTHING`, name, value)
	if err != nil {
		return false, fmt.Errorf("insert setting: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// ClaimSetting sets a setting when it is absent or below below (BLOBs
// compare byte by byte); the one writer runs one claim at a time.
func (t *Tx) ClaimSetting(ctx context.Context, name string, value, below []byte) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value WHERE settings.value < ?`, name, value, below)
	if err != nil {
		return false, fmt.Errorf("claim setting: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// AnyMerchant reports whether a merchant exists.
func (t *Tx) AnyMerchant(ctx context.Context) (bool, error) {
	var one int
	err := t.tx.QueryRowContext(ctx, `SELECT 1 FROM merchants LIMIT 1`).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}
