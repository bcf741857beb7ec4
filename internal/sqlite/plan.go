package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/xaalis/xaalis/internal/xaalis"
)

const planColumns = `id, merchant_id, mode, name, amount, currency, interval, interval_count, active, metadata,
	created_at, updated_at, term_count`

func scanPlan(sc func(...any) error) (*xaalis.Plan, error) {
	var p xaalis.Plan
	var active int
	var md string
	var created, updated int64
	if err := sc(&p.ID, &p.MerchantID, &p.Mode, &p.Name, &p.Amount.Minor, &p.Amount.Currency, &p.Interval,
		&p.IntervalCount, &active, &md, &created, &updated, &p.TermCount); err != nil {
		return nil, notFound(err)
	}
	p.Active = active == 1
	p.CreatedAt, p.UpdatedAt = fromMicros(created), fromMicros(updated)
	if err := json.Unmarshal([]byte(md), &p.Metadata); err != nil {
		return nil, fmt.Errorf("plan metadata: %w", err)
	}
	return &p, nil
}

func getPlan(ctx context.Context, q querier, merchantID, id string) (*xaalis.Plan, error) {
	return scanPlan(q.QueryRowContext(ctx, `SELECT `+planColumns+` FROM plans WHERE merchant_id = ? AND id = ?`,
		merchantID, id).Scan)
}

// Plan returns a plan of the merchant in either mode.
func (s *Store) Plan(ctx context.Context, merchantID, id string) (*xaalis.Plan, error) {
	return getPlan(ctx, s.read, merchantID, id)
}

// Plans returns one page of the merchant's plans in a mode, newest first,
// and the total count.
func (s *Store) Plans(ctx context.Context, f xaalis.PlanFilter, page xaalis.PageRequest) ([]*xaalis.Plan, int, error) {
	where, args := `merchant_id = ? AND mode = ?`, []any{f.MerchantID, f.Mode}
	if f.Active != nil {
		where += ` AND active = ?`
		args = append(args, boolInt(*f.Active))
	}
	var total int
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM plans WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count plans: %w", err)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+planColumns+` FROM plans WHERE `+where+`
		ORDER BY created_at DESC, id DESC LIMIT +? OFFSET ?`, append(args, page.PerPage, page.Offset())...)
	if err != nil {
		return nil, 0, fmt.Errorf("list plans: %w", err)
	}
	defer rows.Close()
	var out []*xaalis.Plan
	for rows.Next() {
		p, err := scanPlan(rows.Scan)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, p)
	}
	return out, total, rows.Err()
}

func metadataJSON(md map[string]string) (string, error) {
	if md == nil {
		md = map[string]string{}
	}
	b, err := json.Marshal(md)
	return string(b), err
}

// CreatePlan inserts a plan.
func (t *Tx) CreatePlan(ctx context.Context, p *xaalis.Plan) error {
	md, err := metadataJSON(p.Metadata)
	if err != nil {
		return err
	}
	_, err = t.tx.ExecContext(ctx, `INSERT INTO plans (`+planColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		p.ID, p.MerchantID, p.Mode, p.Name, p.Amount.Minor, p.Amount.Currency, p.Interval, p.IntervalCount,
		boolInt(p.Active), md, micros(p.CreatedAt), micros(p.UpdatedAt), p.TermCount)
	return err
}

// PlanForUpdate reads a plan inside the write transaction.
func (t *Tx) PlanForUpdate(ctx context.Context, merchantID, id string) (*xaalis.Plan, error) {
	return getPlan(ctx, t.tx, merchantID, id)
}

// UpdatePlan writes a plan's mutable fields.
func (t *Tx) UpdatePlan(ctx context.Context, p *xaalis.Plan) error {
	md, err := metadataJSON(p.Metadata)
	if err != nil {
		return err
	}
	res, err := t.tx.ExecContext(ctx, `UPDATE plans SET name = ?, active = ?, metadata = ?, updated_at = ?
		WHERE merchant_id = ? AND id = ?`, p.Name, boolInt(p.Active), md, micros(p.UpdatedAt), p.MerchantID, p.ID)
	if err != nil {
		return err
	}
	return oneRow(res)
}
