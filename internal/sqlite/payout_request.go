package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

const prColumns = `id, merchant_id, mode, reference, status, amount, fee, net, currency, dest_phone, dest_iban,
	dest_bank, merchant_note, rejection_reason, failure_reason, submitted_at, approved_at, completed_at, updated_at`

// scanPR reads prColumns. Amount, fee and net share the row's currency.
func scanPR(sc func(...any) error) (*xaalis.PayoutRequest, error) {
	var r xaalis.PayoutRequest
	var cur xaalis.Currency
	var submitted, updated int64
	var approved, completed sql.NullInt64
	if err := sc(&r.ID, &r.MerchantID, &r.Mode, &r.Reference, &r.Status, &r.Amount.Minor, &r.Fee.Minor, &r.Net.Minor,
		&cur, &r.DestPhone, &r.DestIBAN, &r.DestBank, &r.MerchantNote, &r.RejectionReason, &r.FailureReason,
		&submitted, &approved, &completed, &updated); err != nil {
		return nil, notFound(err)
	}
	r.Amount.Currency, r.Fee.Currency, r.Net.Currency = cur, cur, cur
	r.SubmittedAt, r.UpdatedAt = fromMicros(submitted), fromMicros(updated)
	r.ApprovedAt, r.CompletedAt = fromNullMicros(approved), fromNullMicros(completed)
	return &r, nil
}

func queryPRs(ctx context.Context, q querier, query string, args ...any) ([]*xaalis.PayoutRequest, error) {
	return queryAll(ctx, q, "", scanPR, query, args...)
}

// PayoutRequest returns one of the merchant's payout requests by id or
// reference, in either mode.
func (s *Store) PayoutRequest(ctx context.Context, merchantID, key string) (*xaalis.PayoutRequest, error) {
	if merchantID == "" {
		return scanPR(s.read.QueryRowContext(ctx, `SELECT `+prColumns+` FROM payout_requests
			WHERE id = ? OR reference = ?`, key, key).Scan)
	}
	return scanPR(s.read.QueryRowContext(ctx, lookupPayoutRequestQuery, merchantID, key, key).Scan)
}

const lookupPayoutRequestQuery = `SELECT ` + prColumns + ` FROM payout_requests WHERE ` + byKey + `(id = ? OR reference = ?)`

// PayoutRequests returns the merchant's latest payout requests in a mode,
// newest first.
func (s *Store) PayoutRequests(ctx context.Context, merchantID string, mode xaalis.Mode, limit int) ([]*xaalis.PayoutRequest, error) {
	list, err := queryPRs(ctx, s.read, `SELECT `+prColumns+` FROM payout_requests
		WHERE merchant_id = ? AND mode = ? ORDER BY submitted_at DESC, id DESC LIMIT +?`, merchantID, mode, limit)
	if err != nil {
		return nil, fmt.Errorf("list payout requests: %w", err)
	}
	return list, nil
}

// Settlements lists one page of completed payout requests, newest
// completion first, and the total.
func (s *Store) Settlements(ctx context.Context, merchantID string, mode xaalis.Mode, page xaalis.PageRequest) ([]*xaalis.PayoutRequest, int, error) {
	const where = `merchant_id = ? AND mode = ? AND status = 'completed'`
	var total int
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM payout_requests WHERE `+where, merchantID, mode).
		Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count settlements: %w", err)
	}
	list, err := queryPRs(ctx, s.read, `SELECT `+prColumns+` FROM payout_requests WHERE `+where+`
		ORDER BY completed_at DESC, id DESC LIMIT +? OFFSET ?`, merchantID, mode, page.PerPage, page.Offset())
	if err != nil {
		return nil, 0, fmt.Errorf("list settlements: %w", err)
	}
	return list, total, nil
}

// InsertPayoutRequest stores a new payout request.
func (t *Tx) InsertPayoutRequest(ctx context.Context, r *xaalis.PayoutRequest) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO payout_requests (`+prColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.MerchantID, r.Mode, r.Reference, r.Status, r.Amount.Minor, r.Fee.Minor, r.Net.Minor, r.Amount.Currency,
		r.DestPhone, r.DestIBAN, r.DestBank, r.MerchantNote, r.RejectionReason, r.FailureReason, micros(r.SubmittedAt),
		nullMicros(r.ApprovedAt), nullMicros(r.CompletedAt), micros(r.UpdatedAt))
	if err != nil {
		return fmt.Errorf("insert payout request: %w", err)
	}
	return nil
}

// PayoutRequestForUpdate reads a payout request inside the write
// transaction.
func (t *Tx) PayoutRequestForUpdate(ctx context.Context, id string) (*xaalis.PayoutRequest, error) {
	return scanPR(t.tx.QueryRowContext(ctx, `SELECT `+prColumns+` FROM payout_requests WHERE id = ?`, id).Scan)
}

// UpdatePayoutRequest writes a payout request's mutable fields.
func (t *Tx) UpdatePayoutRequest(ctx context.Context, r *xaalis.PayoutRequest) error {
	res, err := t.tx.ExecContext(ctx, `UPDATE payout_requests SET status = ?, rejection_reason = ?, failure_reason = ?,
		approved_at = ?, completed_at = ?, updated_at = ? WHERE id = ?`,
		r.Status, r.RejectionReason, r.FailureReason, nullMicros(r.ApprovedAt), nullMicros(r.CompletedAt),
		micros(r.UpdatedAt), r.ID)
	if err != nil {
		return fmt.Errorf("update payout request: %w", err)
	}
	return oneRow(res)
}

// PayoutRequestsSince counts the merchant's payout requests of mode
// submitted at or after since, and returns the oldest one's time. The
// write transaction already excludes every other writer.
func (t *Tx) PayoutRequestsSince(ctx context.Context, merchantID string, mode xaalis.Mode, since time.Time) (int, time.Time, error) {
	var one int
	if err := t.tx.QueryRowContext(ctx, `SELECT 1 FROM merchants WHERE id = ?`, merchantID).Scan(&one); err != nil {
		return 0, time.Time{}, notFound(err)
	}
	var n int
	var oldest sql.NullInt64
	if err := t.tx.QueryRowContext(ctx, `SELECT count(*), min(submitted_at) FROM payout_requests
		WHERE merchant_id = ? AND mode = ? AND submitted_at >= ?`, merchantID, mode, micros(since)).Scan(&n, &oldest); err != nil {
		return 0, time.Time{}, fmt.Errorf("count payout requests: %w", err)
	}
	if !oldest.Valid {
		return n, time.Time{}, nil
	}
	return n, fromMicros(oldest.Int64), nil
}
