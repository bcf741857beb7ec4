package postgres

import (
	"context"
	"fmt"

	"github.com/xaalis/xaalis/internal/xaalis"
)

const planColumns = `id, merchant_id, mode, name, amount, currency, interval, interval_count, active, metadata,
	created_at, updated_at, term_count`

func scanPlan(op string, row interface{ Scan(...any) error }) (*xaalis.Plan, error) {
	var p xaalis.Plan
	if err := row.Scan(&p.ID, &p.MerchantID, &p.Mode, &p.Name, &p.Amount.Minor, &p.Amount.Currency, &p.Interval,
		&p.IntervalCount, &p.Active, &p.Metadata, &p.CreatedAt, &p.UpdatedAt, &p.TermCount); err != nil {
		return nil, notFound(op, err)
	}
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	return &p, nil
}

func getPlan(ctx context.Context, q querier, merchantID, id string, lock string) (*xaalis.Plan, error) {
	return scanPlan("read plan", q.QueryRow(ctx, `SELECT `+planColumns+` FROM plans WHERE merchant_id = $1 AND id = $2`+lock,
		merchantID, id))
}

// Plan returns a plan of the merchant in either mode.
func (s *Store) Plan(ctx context.Context, merchantID, id string) (*xaalis.Plan, error) {
	return getPlan(ctx, s.pool, merchantID, id, "")
}

// Plans returns one page of the merchant's plans in a mode, newest first,
// and the total count.
func (s *Store) Plans(ctx context.Context, f xaalis.PlanFilter, page xaalis.PageRequest) ([]*xaalis.Plan, int, error) {
	// $3 NULL keeps both active and inactive plans.
	const where = `merchant_id = $1 AND mode = $2 AND ($3::boolean IS NULL OR active = $3)`
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM plans WHERE `+where, f.MerchantID, f.Mode, f.Active).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count plans: %w", err)
	}
	tail, args := pageSQL(page, f.MerchantID, f.Mode, f.Active)
	rows, err := s.pool.Query(ctx, `SELECT `+planColumns+` FROM plans WHERE `+where+`
		ORDER BY created_at DESC, id DESC`+tail, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("list plans: %w", err)
	}
	defer rows.Close()
	var out []*xaalis.Plan
	for rows.Next() {
		p, err := scanPlan("list plans", rows)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list plans: %w", err)
	}
	return out, total, nil
}

// metadata is never NULL: a nil map is stored as {}.
func metadata(md map[string]string) map[string]string {
	if md == nil {
		return map[string]string{}
	}
	return md
}

// CreatePlan inserts a plan.
func (t *Tx) CreatePlan(ctx context.Context, p *xaalis.Plan) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO plans (`+planColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		p.ID, p.MerchantID, p.Mode, p.Name, p.Amount.Minor, p.Amount.Currency, p.Interval, p.IntervalCount,
		p.Active, metadata(p.Metadata), p.CreatedAt, p.UpdatedAt, p.TermCount)
	if err != nil {
		return fmt.Errorf("create plan: %w", err)
	}
	return nil
}

// PlanForUpdate reads a plan and locks its row until the transaction ends.
func (t *Tx) PlanForUpdate(ctx context.Context, merchantID, id string) (*xaalis.Plan, error) {
	return getPlan(ctx, t.tx, merchantID, id, ` FOR UPDATE`)
}

// UpdatePlan writes a plan's mutable fields.
func (t *Tx) UpdatePlan(ctx context.Context, p *xaalis.Plan) error {
	tag, err := t.tx.Exec(ctx, `UPDATE plans SET name = $1, active = $2, metadata = $3, updated_at = $4
		WHERE merchant_id = $5 AND id = $6`, p.Name, p.Active, metadata(p.Metadata), p.UpdatedAt, p.MerchantID, p.ID)
	return oneRow("update plan", tag, err)
}
