package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

const prColumns = `id, merchant_id, mode, reference, status, amount, fee, net, currency, dest_phone, dest_iban,
	dest_bank, merchant_note, rejection_reason, failure_reason, submitted_at, approved_at, completed_at, updated_at`

// scanPR reads prColumns. Amount, fee and net share the row's currency.
func scanPR(op string, row interface{ Scan(...any) error }) (*xaalis.PayoutRequest, error) {
	var r xaalis.PayoutRequest
	var cur xaalis.Currency
	if err := row.Scan(&r.ID, &r.MerchantID, &r.Mode, &r.Reference, &r.Status, &r.Amount.Minor, &r.Fee.Minor,
		&r.Net.Minor, &cur, &r.DestPhone, &r.DestIBAN, &r.DestBank, &r.MerchantNote, &r.RejectionReason,
		&r.FailureReason, &r.SubmittedAt, &r.ApprovedAt, &r.CompletedAt, &r.UpdatedAt); err != nil {
		return nil, notFound(op, err)
	}
	r.Amount.Currency, r.Fee.Currency, r.Net.Currency = cur, cur, cur
	r.SubmittedAt, r.UpdatedAt = r.SubmittedAt.UTC(), r.UpdatedAt.UTC()
	r.ApprovedAt, r.CompletedAt = utcPtr(r.ApprovedAt), utcPtr(r.CompletedAt)
	return &r, nil
}

func queryPRs(ctx context.Context, q querier, op, query string, args ...any) ([]*xaalis.PayoutRequest, error) {
	return queryAll(ctx, q, op, scanPR, query, args...)
}

// PayoutRequest returns one of the merchant's payout requests by id or
// reference, in either mode.
func (s *Store) PayoutRequest(ctx context.Context, merchantID, key string) (*xaalis.PayoutRequest, error) {
	return scanPR("read payout request", s.pool.QueryRow(ctx, `SELECT `+prColumns+` FROM payout_requests
		WHERE ($1 = '' OR merchant_id = $1) AND (id = $2 OR reference = $2)`, merchantID, key))
}

// PayoutRequests returns the merchant's latest payout requests in a mode,
// newest first.
func (s *Store) PayoutRequests(ctx context.Context, merchantID string, mode xaalis.Mode, limit int) ([]*xaalis.PayoutRequest, error) {
	return queryPRs(ctx, s.pool, "list payout requests", `SELECT `+prColumns+` FROM payout_requests
		WHERE merchant_id = $1 AND mode = $2 ORDER BY submitted_at DESC, id DESC`+limitSQL(limit), merchantID, mode)
}

// Settlements lists one page of completed payout requests, newest
// completion first, and the total.
func (s *Store) Settlements(ctx context.Context, merchantID string, mode xaalis.Mode, page xaalis.PageRequest) ([]*xaalis.PayoutRequest, int, error) {
	const where = `merchant_id = $1 AND mode = $2 AND status = 'completed'`
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM payout_requests WHERE `+where, merchantID, mode).
		Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count settlements: %w", err)
	}
	tail, args := pageSQL(page, merchantID, mode)
	list, err := queryPRs(ctx, s.pool, "list settlements", `SELECT `+prColumns+` FROM payout_requests WHERE `+where+`
		ORDER BY completed_at DESC, id DESC`+tail, args...)
	if err != nil {
		return nil, 0, err
	}
	return list, total, nil
}

// InsertPayoutRequest stores a new payout request.
func (t *Tx) InsertPayoutRequest(ctx context.Context, r *xaalis.PayoutRequest) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO payout_requests (`+prColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`,
		r.ID, r.MerchantID, r.Mode, r.Reference, r.Status, r.Amount.Minor, r.Fee.Minor, r.Net.Minor, r.Amount.Currency,
		r.DestPhone, r.DestIBAN, r.DestBank, r.MerchantNote, r.RejectionReason, r.FailureReason, r.SubmittedAt,
		r.ApprovedAt, r.CompletedAt, r.UpdatedAt)
	if err != nil {
		return fmt.Errorf("insert payout request: %w", err)
	}
	return nil
}

// PayoutRequestForUpdate reads a payout request and locks its row until
// the transaction ends.
func (t *Tx) PayoutRequestForUpdate(ctx context.Context, id string) (*xaalis.PayoutRequest, error) {
	return scanPR("read payout request", t.tx.QueryRow(ctx, `SELECT `+prColumns+` FROM payout_requests
		WHERE id = $1 FOR UPDATE`, id))
}

// UpdatePayoutRequest writes a payout request's mutable fields.
func (t *Tx) UpdatePayoutRequest(ctx context.Context, r *xaalis.PayoutRequest) error {
	tag, err := t.tx.Exec(ctx, `UPDATE payout_requests SET status = $1, rejection_reason = $2, failure_reason = $3,
		approved_at = $4, completed_at = $5, updated_at = $6 WHERE id = $7`,
		r.Status, r.RejectionReason, r.FailureReason, r.ApprovedAt, r.CompletedAt, r.UpdatedAt, r.ID)
	return oneRow("update payout request", tag, err)
}

// PayoutRequestsSince counts the merchant's payout requests of mode
// submitted at or after since, and returns the oldest one's time. It locks
// the merchant's row first: concurrent submissions of one merchant take
// turns, and each counts the requests the previous ones committed.
func (t *Tx) PayoutRequestsSince(ctx context.Context, merchantID string, mode xaalis.Mode, since time.Time) (int, time.Time, error) {
	var one int
	if err := t.tx.QueryRow(ctx, `SELECT 1 FROM merchants WHERE id = $1 FOR UPDATE`, merchantID).Scan(&one); err != nil {
		return 0, time.Time{}, notFound("lock merchant", err)
	}
	var n int
	var oldest *time.Time
	if err := t.tx.QueryRow(ctx, `SELECT count(*), min(submitted_at) FROM payout_requests
		WHERE merchant_id = $1 AND mode = $2 AND submitted_at >= $3`, merchantID, mode, since).Scan(&n, &oldest); err != nil {
		return 0, time.Time{}, fmt.Errorf("count payout requests: %w", err)
	}
	if oldest == nil {
		return n, time.Time{}, nil
	}
	return n, oldest.UTC(), nil
}
