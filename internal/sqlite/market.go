package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Disputes, marketplace splits, subscriptions and the customers list. The
// write transaction holds SQLite's single write lock, so the ...ForUpdate
// reads need no lock of their own.

const disputeColumns = `id, merchant_id, mode, reference, transaction_id, amount, currency, ledger_amount,
	ledger_currency, shortfall, reason, status, evidence, merchant_response, due_by, responded_at, closed_at,
	provider_event_id, created_at, updated_at, merchant_ref`

func scanDispute(sc func(...any) error) (*xaalis.Dispute, error) {
	var d xaalis.Dispute
	var evidence string
	var event, ref sql.NullString
	var due, created, updated int64
	var responded, closed sql.NullInt64
	if err := sc(&d.ID, &d.MerchantID, &d.Mode, &d.Reference, &d.TransactionID, &d.Amount.Minor, &d.Amount.Currency,
		&d.LedgerAmount.Minor, &d.LedgerAmount.Currency, &d.Shortfall, &d.Reason, &d.Status, &evidence,
		&d.MerchantResponse, &due, &responded, &closed, &event, &created, &updated, &ref); err != nil {
		return nil, notFound(err)
	}
	d.MerchantRef = ref.String
	if err := json.Unmarshal([]byte(evidence), &d.Evidence); err != nil {
		return nil, fmt.Errorf("dispute evidence: %w", err)
	}
	if len(d.Evidence) == 0 {
		d.Evidence = nil // as the PostgreSQL store reads an empty array
	}
	d.ProviderEventID = event.String
	d.DueBy, d.CreatedAt, d.UpdatedAt = fromMicros(due), fromMicros(created), fromMicros(updated)
	d.RespondedAt, d.ClosedAt = fromNullMicros(responded), fromNullMicros(closed)
	return &d, nil
}

func queryDisputes(ctx context.Context, q querier, query string, args ...any) ([]*xaalis.Dispute, error) {
	return queryAll(ctx, q, "", scanDispute, query, args...)
}

// evidenceJSON stores a dispute's evidence as a JSON array, [] for none.
func evidenceJSON(ev []string) (string, error) {
	if ev == nil {
		ev = []string{}
	}
	b, err := json.Marshal(ev)
	return string(b), err
}

// Dispute returns one of the merchant's disputes by id or reference, in
// either mode.
func (s *Store) Dispute(ctx context.Context, merchantID, key string) (*xaalis.Dispute, error) {
	if merchantID == "" {
		return scanDispute(s.read.QueryRowContext(ctx, `SELECT `+disputeColumns+` FROM disputes
			WHERE id = ? OR reference = ?`, key, key).Scan)
	}
	return scanDispute(s.read.QueryRowContext(ctx, lookupDisputeQuery, merchantID, key, key).Scan)
}

const lookupDisputeQuery = `SELECT ` + disputeColumns + ` FROM disputes WHERE ` + byKey + `(id = ? OR reference = ?)`

// Disputes lists one page of a merchant's disputes in a mode, newest
// first, and the total; status "" is all.
func (s *Store) Disputes(ctx context.Context, merchantID string, mode xaalis.Mode, status xaalis.DisputeStatus, page xaalis.PageRequest) ([]*xaalis.Dispute, int, error) {
	where, args := `merchant_id = ? AND mode = ?`, []any{merchantID, mode}
	if status != "" {
		where += ` AND status = ?`
		args = append(args, status)
	}
	var total int
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM disputes WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count disputes: %w", err)
	}
	list, err := queryDisputes(ctx, s.read, `SELECT `+disputeColumns+` FROM disputes WHERE `+where+`
		ORDER BY created_at DESC, id DESC LIMIT +? OFFSET ?`, append(args, page.PerPage, page.Offset())...)
	if err != nil {
		return nil, 0, fmt.Errorf("list disputes: %w", err)
	}
	return list, total, nil
}

// DueDisputes returns up to limit disputes of any merchant still
// needs_response whose due_by is at or before now, soonest due first.
func (s *Store) DueDisputes(ctx context.Context, now time.Time, limit int) ([]*xaalis.Dispute, error) {
	list, err := queryDisputes(ctx, s.read, `SELECT `+disputeColumns+` FROM disputes
		WHERE status = 'needs_response' AND due_by <= ? ORDER BY due_by, id LIMIT +?`, micros(now), limit)
	if err != nil {
		return nil, fmt.Errorf("due disputes: %w", err)
	}
	return list, nil
}

// InsertDispute stores a new dispute. A second open dispute of one payment
// violates disputes_open and fails.
func (t *Tx) InsertDispute(ctx context.Context, d *xaalis.Dispute) error {
	ev, err := evidenceJSON(d.Evidence)
	if err != nil {
		return err
	}
	_, err = t.tx.ExecContext(ctx, `INSERT INTO disputes (`+disputeColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.ID, d.MerchantID, d.Mode, d.Reference, d.TransactionID, d.Amount.Minor, d.Amount.Currency,
		d.LedgerAmount.Minor, d.LedgerAmount.Currency, d.Shortfall, d.Reason, d.Status, ev, d.MerchantResponse,
		micros(d.DueBy), nullMicros(d.RespondedAt), nullMicros(d.ClosedAt), nullString(d.ProviderEventID),
		micros(d.CreatedAt), micros(d.UpdatedAt), nullString(d.MerchantRef))
	if err != nil {
		return fmt.Errorf("insert dispute: %w", err)
	}
	return nil
}

// DisputeForUpdate reads a dispute inside the write transaction.
func (t *Tx) DisputeForUpdate(ctx context.Context, id string) (*xaalis.Dispute, error) {
	return scanDispute(t.tx.QueryRowContext(ctx, `SELECT `+disputeColumns+` FROM disputes WHERE id = ?`, id).Scan)
}

// UpdateDispute writes a dispute's mutable fields.
func (t *Tx) UpdateDispute(ctx context.Context, d *xaalis.Dispute) error {
	ev, err := evidenceJSON(d.Evidence)
	if err != nil {
		return err
	}
	res, err := t.tx.ExecContext(ctx, `UPDATE disputes SET status = ?, evidence = ?, merchant_response = ?,
		shortfall = ?, responded_at = ?, closed_at = ?, updated_at = ? WHERE id = ?`,
		d.Status, ev, d.MerchantResponse, d.Shortfall, nullMicros(d.RespondedAt), nullMicros(d.ClosedAt),
		micros(d.UpdatedAt), d.ID)
	if err != nil {
		return fmt.Errorf("update dispute: %w", err)
	}
	return oneRow(res)
}

// OpenDisputeOf returns a payment's dispute still needs_response or
// under_review; disputes_open allows at most one.
func (t *Tx) OpenDisputeOf(ctx context.Context, transactionID string) (*xaalis.Dispute, error) {
	return scanDispute(t.tx.QueryRowContext(ctx, `SELECT `+disputeColumns+` FROM disputes
		WHERE transaction_id = ? AND status IN ('needs_response', 'under_review')`, transactionID).Scan)
}

// DisputeByProviderEvent finds the dispute a provider notification opened.
func (t *Tx) DisputeByProviderEvent(ctx context.Context, eventID string) (*xaalis.Dispute, error) {
	return scanDispute(t.tx.QueryRowContext(ctx, `SELECT `+disputeColumns+` FROM disputes
		WHERE provider_event_id = ?`, eventID).Scan)
}

const splitColumns = `id, payment_id, merchant_id, mode, beneficiary_id, amount, currency, ledger_amount,
	ledger_currency, description, credited_at, created_at`

func querySplits(ctx context.Context, q querier, paymentID string) ([]*xaalis.SplitItem, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+splitColumns+` FROM split_items
		WHERE payment_id = ? ORDER BY created_at, id`, paymentID)
	if err != nil {
		return nil, fmt.Errorf("list split items: %w", err)
	}
	defer rows.Close()
	var out []*xaalis.SplitItem
	for rows.Next() {
		var s xaalis.SplitItem
		var credited sql.NullInt64
		var created int64
		if err := rows.Scan(&s.ID, &s.PaymentID, &s.MerchantID, &s.Mode, &s.BeneficiaryID, &s.Amount.Minor,
			&s.Amount.Currency, &s.LedgerAmount.Minor, &s.LedgerAmount.Currency, &s.Description, &credited,
			&created); err != nil {
			return nil, fmt.Errorf("list split items: %w", err)
		}
		s.CreditedAt, s.CreatedAt = fromNullMicros(credited), fromMicros(created)
		out = append(out, &s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list split items: %w", err)
	}
	return out, nil
}

// Splits returns a payment's split items, oldest first.
func (s *Store) Splits(ctx context.Context, paymentID string) ([]*xaalis.SplitItem, error) {
	return querySplits(ctx, s.read, paymentID)
}

// InsertSplitItem stores a new split item.
func (t *Tx) InsertSplitItem(ctx context.Context, s *xaalis.SplitItem) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO split_items (`+splitColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.ID, s.PaymentID, s.MerchantID, s.Mode, s.BeneficiaryID, s.Amount.Minor, s.Amount.Currency,
		s.LedgerAmount.Minor, s.LedgerAmount.Currency, s.Description, nullMicros(s.CreditedAt), micros(s.CreatedAt))
	if err != nil {
		return fmt.Errorf("insert split item: %w", err)
	}
	return nil
}

// SplitItemsForUpdate returns a payment's split items, oldest first,
// inside the write transaction.
func (t *Tx) SplitItemsForUpdate(ctx context.Context, paymentID string) ([]*xaalis.SplitItem, error) {
	return querySplits(ctx, t.tx, paymentID)
}

// MarkSplitCredited records when an item reached its beneficiary.
func (t *Tx) MarkSplitCredited(ctx context.Context, id string, at time.Time) error {
	res, err := t.tx.ExecContext(ctx, `UPDATE split_items SET credited_at = ? WHERE id = ?`, micros(at), id)
	if err != nil {
		return fmt.Errorf("mark split credited: %w", err)
	}
	return oneRow(res)
}

const subscriptionColumns = `id, merchant_id, mode, plan_id, customer_id, status, provider, cancel_at_period_end,
	current_period_start, current_period_end, next_action_at, failed_attempts, latest_payment_id, cancelled_at,
	metadata, created_at, updated_at`

func scanSubscription(sc func(...any) error) (*xaalis.Subscription, error) {
	var s xaalis.Subscription
	var cancelAtEnd int
	var latest sql.NullString
	var md string
	var start, end, next, created, updated int64
	var cancelled sql.NullInt64
	if err := sc(&s.ID, &s.MerchantID, &s.Mode, &s.PlanID, &s.CustomerID, &s.Status, &s.Provider, &cancelAtEnd,
		&start, &end, &next, &s.FailedAttempts, &latest, &cancelled, &md, &created, &updated); err != nil {
		return nil, notFound(err)
	}
	if err := json.Unmarshal([]byte(md), &s.Metadata); err != nil {
		return nil, fmt.Errorf("subscription metadata: %w", err)
	}
	s.CancelAtPeriodEnd, s.LatestPaymentID = cancelAtEnd == 1, latest.String
	s.CurrentPeriodStart, s.CurrentPeriodEnd, s.NextActionAt = fromMicros(start), fromMicros(end), fromMicros(next)
	s.CancelledAt, s.CreatedAt, s.UpdatedAt = fromNullMicros(cancelled), fromMicros(created), fromMicros(updated)
	return &s, nil
}

func querySubscriptions(ctx context.Context, q querier, query string, args ...any) ([]*xaalis.Subscription, error) {
	return queryAll(ctx, q, "", scanSubscription, query, args...)
}

// Subscription returns one of the merchant's subscriptions, in either mode.
func (s *Store) Subscription(ctx context.Context, merchantID, id string) (*xaalis.Subscription, error) {
	return scanSubscription(s.read.QueryRowContext(ctx, `SELECT `+subscriptionColumns+` FROM subscriptions
		WHERE merchant_id = ? AND id = ?`, merchantID, id).Scan)
}

// Subscriptions lists one page of a merchant's subscriptions in a mode,
// newest first, and the total; status "" is all.
func (s *Store) Subscriptions(ctx context.Context, merchantID string, mode xaalis.Mode, status xaalis.SubscriptionStatus, page xaalis.PageRequest) ([]*xaalis.Subscription, int, error) {
	where, args := `merchant_id = ? AND mode = ?`, []any{merchantID, mode}
	if status != "" {
		// CAST: subscriptions_due's WHERE compares status with a literal
		// (txListWhere).
		where += ` AND status = CAST(? AS TEXT)`
		args = append(args, status)
	}
	var total int
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM subscriptions WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count subscriptions: %w", err)
	}
	list, err := querySubscriptions(ctx, s.read, `SELECT `+subscriptionColumns+` FROM subscriptions WHERE `+where+`
		ORDER BY created_at DESC, id DESC LIMIT +? OFFSET ?`, append(args, page.PerPage, page.Offset())...)
	if err != nil {
		return nil, 0, fmt.Errorf("list subscriptions: %w", err)
	}
	return list, total, nil
}

// DueSubscriptions returns up to limit active subscriptions of any
// merchant whose next_action_at is at or before now, oldest first.
func (s *Store) DueSubscriptions(ctx context.Context, now time.Time, limit int) ([]*xaalis.Subscription, error) {
	list, err := querySubscriptions(ctx, s.read, `SELECT `+subscriptionColumns+` FROM subscriptions
		WHERE status = 'active' AND next_action_at <= ? ORDER BY next_action_at, id LIMIT +?`, micros(now), limit)
	if err != nil {
		return nil, fmt.Errorf("due subscriptions: %w", err)
	}
	return list, nil
}

// subscriptionArgs are the values of subscriptionColumns, in order.
func subscriptionArgs(s *xaalis.Subscription) ([]any, error) {
	md, err := metadataJSON(s.Metadata)
	if err != nil {
		return nil, err
	}
	return []any{s.ID, s.MerchantID, s.Mode, s.PlanID, s.CustomerID, s.Status, s.Provider,
		boolInt(s.CancelAtPeriodEnd), micros(s.CurrentPeriodStart), micros(s.CurrentPeriodEnd),
		micros(s.NextActionAt), s.FailedAttempts, nullString(s.LatestPaymentID), nullMicros(s.CancelledAt), md,
		micros(s.CreatedAt), micros(s.UpdatedAt)}, nil
}

// InsertSubscription stores a new subscription.
func (t *Tx) InsertSubscription(ctx context.Context, s *xaalis.Subscription) error {
	args, err := subscriptionArgs(s)
	if err != nil {
		return err
	}
	_, err = t.tx.ExecContext(ctx, `INSERT INTO subscriptions (`+subscriptionColumns+`, creation_key)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, append(args, nullString(s.CreationKey))...)
	if err != nil {
		return fmt.Errorf("insert subscription: %w", err)
	}
	return nil
}

// SubscriptionByCreationKey finds the subscription a request created under
// its Idempotency-Key, in the write transaction.
func (t *Tx) SubscriptionByCreationKey(ctx context.Context, merchantID string, mode xaalis.Mode, key string) (*xaalis.Subscription, error) {
	return scanSubscription(t.tx.QueryRowContext(ctx, `SELECT `+subscriptionColumns+` FROM subscriptions
		WHERE merchant_id = ? AND mode = ? AND creation_key = ?`, merchantID, mode, key).Scan)
}

// SubscriptionForUpdate reads a subscription inside the write transaction.
func (t *Tx) SubscriptionForUpdate(ctx context.Context, id string) (*xaalis.Subscription, error) {
	return scanSubscription(t.tx.QueryRowContext(ctx, `SELECT `+subscriptionColumns+` FROM subscriptions
		WHERE id = ?`, id).Scan)
}

// UpdateSubscription writes every mutable field: all but the identity (id,
// merchant, mode, customer and creation time).
func (t *Tx) UpdateSubscription(ctx context.Context, s *xaalis.Subscription) error {
	md, err := metadataJSON(s.Metadata)
	if err != nil {
		return err
	}
	res, err := t.tx.ExecContext(ctx, `UPDATE subscriptions SET plan_id = ?, status = ?, provider = ?,
		cancel_at_period_end = ?, current_period_start = ?, current_period_end = ?, next_action_at = ?,
		failed_attempts = ?, latest_payment_id = ?, cancelled_at = ?, metadata = ?, updated_at = ? WHERE id = ?`,
		s.PlanID, s.Status, s.Provider, boolInt(s.CancelAtPeriodEnd), micros(s.CurrentPeriodStart),
		micros(s.CurrentPeriodEnd), micros(s.NextActionAt), s.FailedAttempts, nullString(s.LatestPaymentID),
		nullMicros(s.CancelledAt), md, micros(s.UpdatedAt), s.ID)
	if err != nil {
		return fmt.Errorf("update subscription: %w", err)
	}
	return oneRow(res)
}

const customerColumns = `id, merchant_id, mode, phone, name, created_at, updated_at`

// Customers lists one page of a merchant's customers in a mode, newest
// first, and the total.
func (s *Store) Customers(ctx context.Context, f xaalis.CustomerFilter, page xaalis.PageRequest) ([]*xaalis.Customer, int, error) {
	const where = `merchant_id = ? AND mode = ?`
	var total int
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM customers WHERE `+where, f.MerchantID, f.Mode).
		Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count customers: %w", err)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+customerColumns+` FROM customers WHERE `+where+`
		ORDER BY created_at DESC, id DESC LIMIT +? OFFSET ?`, f.MerchantID, f.Mode, page.PerPage, page.Offset())
	if err != nil {
		return nil, 0, fmt.Errorf("list customers: %w", err)
	}
	defer rows.Close()
	var out []*xaalis.Customer
	for rows.Next() {
		c, err := scanCustomer(rows.Scan)
		if err != nil {
			return nil, 0, fmt.Errorf("list customers: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list customers: %w", err)
	}
	return out, total, nil
}

// CustomerForUpdate reads one of the merchant's customers inside the write
// transaction.
func (t *Tx) CustomerForUpdate(ctx context.Context, merchantID, id string) (*xaalis.Customer, error) {
	return scanCustomer(t.tx.QueryRowContext(ctx, `SELECT `+customerColumns+` FROM customers
		WHERE merchant_id = ? AND id = ?`, merchantID, id).Scan)
}

// PlanByID returns a plan of any merchant.
func (t *Tx) PlanByID(ctx context.Context, id string) (*xaalis.Plan, error) {
	return scanPlan(t.tx.QueryRowContext(ctx, `SELECT `+planColumns+` FROM plans WHERE id = ?`, id).Scan)
}
