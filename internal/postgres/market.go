package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Disputes, marketplace splits, subscriptions and the customers list.

const disputeColumns = `id, merchant_id, mode, reference, transaction_id, amount, currency, ledger_amount,
	ledger_currency, shortfall, reason, status, evidence, merchant_response, due_by, responded_at, closed_at,
	provider_event_id, created_at, updated_at, merchant_ref`

func scanDispute(op string, row interface{ Scan(...any) error }) (*xaalis.Dispute, error) {
	var d xaalis.Dispute
	var event, ref *string
	if err := row.Scan(&d.ID, &d.MerchantID, &d.Mode, &d.Reference, &d.TransactionID, &d.Amount.Minor,
		&d.Amount.Currency, &d.LedgerAmount.Minor, &d.LedgerAmount.Currency, &d.Shortfall, &d.Reason, &d.Status,
		&d.Evidence, &d.MerchantResponse, &d.DueBy, &d.RespondedAt, &d.ClosedAt, &event, &d.CreatedAt,
		&d.UpdatedAt, &ref); err != nil {
		return nil, notFound(op, err)
	}
	if event != nil {
		d.ProviderEventID = *event
	}
	if ref != nil {
		d.MerchantRef = *ref
	}
	d.Evidence = nilIfEmpty(d.Evidence)
	d.DueBy, d.CreatedAt, d.UpdatedAt = d.DueBy.UTC(), d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	d.RespondedAt, d.ClosedAt = utcPtr(d.RespondedAt), utcPtr(d.ClosedAt)
	return &d, nil
}

func queryDisputes(ctx context.Context, q querier, op, query string, args ...any) ([]*xaalis.Dispute, error) {
	return queryAll(ctx, q, op, scanDispute, query, args...)
}

// Dispute returns one of the merchant's disputes by id or reference, in
// either mode.
func (s *Store) Dispute(ctx context.Context, merchantID, key string) (*xaalis.Dispute, error) {
	return scanDispute("read dispute", s.pool.QueryRow(ctx, `SELECT `+disputeColumns+` FROM disputes
		WHERE ($1 = '' OR merchant_id = $1) AND (id = $2 OR reference = $2)`, merchantID, key))
}

// Disputes lists one page of a merchant's disputes in a mode, newest
// first, and the total; status "" is all.
func (s *Store) Disputes(ctx context.Context, merchantID string, mode xaalis.Mode, status xaalis.DisputeStatus, page xaalis.PageRequest) ([]*xaalis.Dispute, int, error) {
	const where = `merchant_id = $1 AND mode = $2 AND ($3::text = '' OR status = $3)`
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM disputes WHERE `+where, merchantID, mode, status).
		Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count disputes: %w", err)
	}
	tail, args := pageSQL(page, merchantID, mode, status)
	list, err := queryDisputes(ctx, s.pool, "list disputes", `SELECT `+disputeColumns+` FROM disputes WHERE `+where+`
		ORDER BY created_at DESC, id DESC`+tail, args...)
	if err != nil {
		return nil, 0, err
	}
	return list, total, nil
}

// DueDisputes returns up to limit disputes of any merchant still
// needs_response whose due_by is at or before now, soonest due first.
func (s *Store) DueDisputes(ctx context.Context, now time.Time, limit int) ([]*xaalis.Dispute, error) {
	return queryDisputes(ctx, s.pool, "due disputes", `SELECT `+disputeColumns+` FROM disputes
		WHERE status = 'needs_response' AND due_by <= $1 ORDER BY due_by, id`+limitSQL(limit), now)
}

// InsertDispute stores a new dispute. A second open dispute of one payment
// violates disputes_open and fails.
func (t *Tx) InsertDispute(ctx context.Context, d *xaalis.Dispute) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO disputes (`+disputeColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)`,
		d.ID, d.MerchantID, d.Mode, d.Reference, d.TransactionID, d.Amount.Minor, d.Amount.Currency,
		d.LedgerAmount.Minor, d.LedgerAmount.Currency, d.Shortfall, d.Reason, d.Status, nonNil(d.Evidence),
		d.MerchantResponse, d.DueBy, d.RespondedAt, d.ClosedAt, nullString(d.ProviderEventID), d.CreatedAt,
		d.UpdatedAt, nullString(d.MerchantRef))
	if err != nil {
		return fmt.Errorf("insert dispute: %w", err)
	}
	return nil
}

// DisputeForUpdate reads a dispute and locks its row until the
// transaction ends.
func (t *Tx) DisputeForUpdate(ctx context.Context, id string) (*xaalis.Dispute, error) {
	return scanDispute("read dispute", t.tx.QueryRow(ctx, `SELECT `+disputeColumns+` FROM disputes
		WHERE id = $1 FOR UPDATE`, id))
}

// UpdateDispute writes a dispute's mutable fields.
func (t *Tx) UpdateDispute(ctx context.Context, d *xaalis.Dispute) error {
	tag, err := t.tx.Exec(ctx, `UPDATE disputes SET status = $1, evidence = $2, merchant_response = $3,
		shortfall = $4, responded_at = $5, closed_at = $6, updated_at = $7 WHERE id = $8`,
		d.Status, nonNil(d.Evidence), d.MerchantResponse, d.Shortfall, d.RespondedAt, d.ClosedAt, d.UpdatedAt, d.ID)
	return oneRow("update dispute", tag, err)
}

// OpenDisputeOf returns a payment's dispute still needs_response or
// under_review (disputes_open allows at most one), locked: the caller
// usually changes it next.
func (t *Tx) OpenDisputeOf(ctx context.Context, transactionID string) (*xaalis.Dispute, error) {
	return scanDispute("read open dispute", t.tx.QueryRow(ctx, `SELECT `+disputeColumns+` FROM disputes
		WHERE transaction_id = $1 AND status IN ('needs_response', 'under_review') FOR UPDATE`, transactionID))
}

// DisputeByProviderEvent finds the dispute a provider notification opened.
func (t *Tx) DisputeByProviderEvent(ctx context.Context, eventID string) (*xaalis.Dispute, error) {
	return scanDispute("read dispute by provider event", t.tx.QueryRow(ctx, `SELECT `+disputeColumns+` FROM disputes
		WHERE provider_event_id = $1`, eventID))
}

const splitColumns = `id, payment_id, merchant_id, mode, beneficiary_id, amount, currency, ledger_amount,
	ledger_currency, description, credited_at, created_at`

func querySplits(ctx context.Context, q querier, paymentID, lock string) ([]*xaalis.SplitItem, error) {
	const op = "list split items"
	rows, err := q.Query(ctx, `SELECT `+splitColumns+` FROM split_items
		WHERE payment_id = $1 ORDER BY created_at, id`+lock, paymentID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer rows.Close()
	var out []*xaalis.SplitItem
	for rows.Next() {
		var s xaalis.SplitItem
		if err := rows.Scan(&s.ID, &s.PaymentID, &s.MerchantID, &s.Mode, &s.BeneficiaryID, &s.Amount.Minor,
			&s.Amount.Currency, &s.LedgerAmount.Minor, &s.LedgerAmount.Currency, &s.Description, &s.CreditedAt,
			&s.CreatedAt); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		s.CreditedAt, s.CreatedAt = utcPtr(s.CreditedAt), s.CreatedAt.UTC()
		out = append(out, &s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

// Splits returns a payment's split items, oldest first.
func (s *Store) Splits(ctx context.Context, paymentID string) ([]*xaalis.SplitItem, error) {
	return querySplits(ctx, s.pool, paymentID, "")
}

// InsertSplitItem stores a new split item.
func (t *Tx) InsertSplitItem(ctx context.Context, s *xaalis.SplitItem) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO split_items (`+splitColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		s.ID, s.PaymentID, s.MerchantID, s.Mode, s.BeneficiaryID, s.Amount.Minor, s.Amount.Currency,
		s.LedgerAmount.Minor, s.LedgerAmount.Currency, s.Description, s.CreditedAt, s.CreatedAt)
	if err != nil {
		return fmt.Errorf("insert split item: %w", err)
	}
	return nil
}

// SplitItemsForUpdate returns a payment's split items, oldest first, and
// locks their rows until the transaction ends.
func (t *Tx) SplitItemsForUpdate(ctx context.Context, paymentID string) ([]*xaalis.SplitItem, error) {
	return querySplits(ctx, t.tx, paymentID, ` FOR UPDATE`)
}

// MarkSplitCredited records when an item reached its beneficiary.
func (t *Tx) MarkSplitCredited(ctx context.Context, id string, at time.Time) error {
	tag, err := t.tx.Exec(ctx, `UPDATE split_items SET credited_at = $1 WHERE id = $2`, at, id)
	return oneRow("mark split credited", tag, err)
}

const subscriptionColumns = `id, merchant_id, mode, plan_id, customer_id, status, provider, cancel_at_period_end,
	current_period_start, current_period_end, next_action_at, failed_attempts, latest_payment_id, cancelled_at,
	metadata, created_at, updated_at`

func scanSubscription(op string, row interface{ Scan(...any) error }) (*xaalis.Subscription, error) {
	var s xaalis.Subscription
	var latest *string
	if err := row.Scan(&s.ID, &s.MerchantID, &s.Mode, &s.PlanID, &s.CustomerID, &s.Status, &s.Provider,
		&s.CancelAtPeriodEnd, &s.CurrentPeriodStart, &s.CurrentPeriodEnd, &s.NextActionAt, &s.FailedAttempts,
		&latest, &s.CancelledAt, &s.Metadata, &s.CreatedAt, &s.UpdatedAt); err != nil {
		return nil, notFound(op, err)
	}
	if latest != nil {
		s.LatestPaymentID = *latest
	}
	s.CurrentPeriodStart, s.CurrentPeriodEnd = s.CurrentPeriodStart.UTC(), s.CurrentPeriodEnd.UTC()
	s.NextActionAt, s.CancelledAt = s.NextActionAt.UTC(), utcPtr(s.CancelledAt)
	s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	return &s, nil
}

func querySubscriptions(ctx context.Context, q querier, op, query string, args ...any) ([]*xaalis.Subscription, error) {
	return queryAll(ctx, q, op, scanSubscription, query, args...)
}

// Subscription returns one of the merchant's subscriptions, in either mode.
func (s *Store) Subscription(ctx context.Context, merchantID, id string) (*xaalis.Subscription, error) {
	return scanSubscription("read subscription", s.pool.QueryRow(ctx, `SELECT `+subscriptionColumns+`
		FROM subscriptions WHERE merchant_id = $1 AND id = $2`, merchantID, id))
}

// Subscriptions lists one page of a merchant's subscriptions in a mode,
// newest first, and the total; status "" is all.
func (s *Store) Subscriptions(ctx context.Context, merchantID string, mode xaalis.Mode, status xaalis.SubscriptionStatus, page xaalis.PageRequest) ([]*xaalis.Subscription, int, error) {
	const where = `merchant_id = $1 AND mode = $2 AND ($3::text = '' OR status = $3)`
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM subscriptions WHERE `+where, merchantID, mode, status).
		Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count subscriptions: %w", err)
	}
	tail, args := pageSQL(page, merchantID, mode, status)
	list, err := querySubscriptions(ctx, s.pool, "list subscriptions", `SELECT `+subscriptionColumns+`
		FROM subscriptions WHERE `+where+` ORDER BY created_at DESC, id DESC`+tail, args...)
	if err != nil {
		return nil, 0, err
	}
	return list, total, nil
}

// DueSubscriptions returns up to limit active subscriptions of any
// merchant whose next_action_at is at or before now, oldest first.
func (s *Store) DueSubscriptions(ctx context.Context, now time.Time, limit int) ([]*xaalis.Subscription, error) {
	return querySubscriptions(ctx, s.pool, "due subscriptions", `SELECT `+subscriptionColumns+` FROM subscriptions
		WHERE status = 'active' AND next_action_at <= $1 ORDER BY next_action_at, id`+limitSQL(limit), now)
}

// InsertSubscription stores a new subscription.
func (t *Tx) InsertSubscription(ctx context.Context, s *xaalis.Subscription) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO subscriptions (`+subscriptionColumns+`, creation_key)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
		s.ID, s.MerchantID, s.Mode, s.PlanID, s.CustomerID, s.Status, s.Provider, s.CancelAtPeriodEnd,
		s.CurrentPeriodStart, s.CurrentPeriodEnd, s.NextActionAt, s.FailedAttempts, nullString(s.LatestPaymentID),
		s.CancelledAt, metadata(s.Metadata), s.CreatedAt, s.UpdatedAt, nullString(s.CreationKey))
	if err != nil {
		return fmt.Errorf("insert subscription: %w", err)
	}
	return nil
}

// SubscriptionByCreationKey finds the subscription a request created under
// its Idempotency-Key, and locks it.
func (t *Tx) SubscriptionByCreationKey(ctx context.Context, merchantID string, mode xaalis.Mode, key string) (*xaalis.Subscription, error) {
	return scanSubscription("read subscription by creation key", t.tx.QueryRow(ctx, `SELECT `+subscriptionColumns+`
		FROM subscriptions WHERE merchant_id = $1 AND mode = $2 AND creation_key = $3 FOR UPDATE`, merchantID, mode, key))
}

// SubscriptionForUpdate reads a subscription and locks its row until the
// transaction ends.
func (t *Tx) SubscriptionForUpdate(ctx context.Context, id string) (*xaalis.Subscription, error) {
	return scanSubscription("read subscription", t.tx.QueryRow(ctx, `SELECT `+subscriptionColumns+`
		FROM subscriptions WHERE id = $1 FOR UPDATE`, id))
}

// UpdateSubscription writes every mutable field: all but the identity (id,
// merchant, mode, customer and creation time).
func (t *Tx) UpdateSubscription(ctx context.Context, s *xaalis.Subscription) error {
	tag, err := t.tx.Exec(ctx, `UPDATE subscriptions SET plan_id = $1, status = $2, provider = $3,
		cancel_at_period_end = $4, current_period_start = $5, current_period_end = $6, next_action_at = $7,
		failed_attempts = $8, latest_payment_id = $9, cancelled_at = $10, metadata = $11, updated_at = $12
		WHERE id = $13`,
		s.PlanID, s.Status, s.Provider, s.CancelAtPeriodEnd, s.CurrentPeriodStart, s.CurrentPeriodEnd,
		s.NextActionAt, s.FailedAttempts, nullString(s.LatestPaymentID), s.CancelledAt, metadata(s.Metadata),
		s.UpdatedAt, s.ID)
	return oneRow("update subscription", tag, err)
}

// Customers lists one page of a merchant's customers in a mode, newest
// first, and the total.
func (s *Store) Customers(ctx context.Context, f xaalis.CustomerFilter, page xaalis.PageRequest) ([]*xaalis.Customer, int, error) {
	const where = `merchant_id = $1 AND mode = $2`
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM customers WHERE `+where, f.MerchantID, f.Mode).
		Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count customers: %w", err)
	}
	const op = "list customers"
	tail, args := pageSQL(page, f.MerchantID, f.Mode)
	rows, err := s.pool.Query(ctx, `SELECT `+customerColumns+` FROM customers WHERE `+where+`
		ORDER BY created_at DESC, id DESC`+tail, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", op, err)
	}
	defer rows.Close()
	var out []*xaalis.Customer
	for rows.Next() {
		c, err := scanCustomer(op, rows)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", op, err)
	}
	return out, total, nil
}

// CustomerForUpdate reads one of the merchant's customers and locks its
// row until the transaction ends.
func (t *Tx) CustomerForUpdate(ctx context.Context, merchantID, id string) (*xaalis.Customer, error) {
	return scanCustomer("read customer", t.tx.QueryRow(ctx, `SELECT `+customerColumns+` FROM customers
		WHERE merchant_id = $1 AND id = $2 FOR UPDATE`, merchantID, id))
}

// PlanByID returns a plan of any merchant, read in the transaction.
func (t *Tx) PlanByID(ctx context.Context, id string) (*xaalis.Plan, error) {
	return scanPlan("read plan", t.tx.QueryRow(ctx, `SELECT `+planColumns+` FROM plans WHERE id = $1`, id))
}
