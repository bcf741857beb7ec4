package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xaalis/xaalis/internal/xaalis"
)

const txColumns = `id, merchant_id, mode, type, reference, merchant_ref, status, amount, currency, limit_amount,
	country, provider, route, route_reason, provider_ref, next_action, payer_phone, payer_name, customer_id,
	success_url, failed_url, callback_url, metadata, failure_reason, exchange_rate, settlement_amount,
	settlement_currency, expires_at, reconciled_at, created_at, updated_at, parent_id, fee, fee_currency,
	idempotency_key, description, dispatched_at, key_type, creation_key`

// txColumnList is txColumns, one name an item.
var txColumnList = func() []string {
	var out []string
	for _, c := range strings.Split(txColumns, ",") {
		out = append(out, strings.TrimSpace(c))
	}
	return out
}()

// merchantRefIndex is the unique index of 00002_payments.sql on
// (merchant_id, mode, merchant_ref); a violation names it.
const merchantRefIndex = "transactions_merchant_ref"

func scanTx(op string, row interface{ Scan(...any) error }) (*xaalis.Transaction, error) {
	var t xaalis.Transaction
	var mref, customer, settleCur, parent, idemKey, creationKey *string
	var settle *int64
	err := row.Scan(&t.ID, &t.MerchantID, &t.Mode, &t.Type, &t.Reference, &mref, &t.Status, &t.Amount.Minor,
		&t.Amount.Currency, &t.LimitAmount, &t.Country, &t.Provider, &t.Route, &t.RouteReason, &t.ProviderRef,
		&t.NextAction, &t.PayerPhone, &t.PayerName, &customer, &t.SuccessURL, &t.FailedURL, &t.CallbackURL,
		&t.Metadata, &t.FailureReason, &t.ExchangeRate, &settle, &settleCur, &t.ExpiresAt, &t.ReconciledAt,
		&t.CreatedAt, &t.UpdatedAt, &parent, &t.Fee.Minor, &t.Fee.Currency, &idemKey, &t.Description, &t.DispatchedAt, &t.KeyType,
		&creationKey)
	if err != nil {
		return nil, notFound(op, err)
	}
	if mref != nil {
		t.MerchantRef = *mref
	}
	if customer != nil {
		t.CustomerID = *customer
	}
	if parent != nil {
		t.ParentID = *parent
	}
	if idemKey != nil {
		t.IdempotencyKey = *idemKey
	}
	if creationKey != nil {
		t.CreationKey = *creationKey
	}
	if settle != nil {
		t.SettlementAmount = &xaalis.Amount{Minor: *settle}
		if settleCur != nil {
			t.SettlementAmount.Currency = xaalis.Currency(*settleCur)
		}
	}
	t.ExpiresAt, t.ReconciledAt, t.DispatchedAt = t.ExpiresAt.UTC(), utcPtr(t.ReconciledAt), utcPtr(t.DispatchedAt)
	t.CreatedAt, t.UpdatedAt = t.CreatedAt.UTC(), t.UpdatedAt.UTC()
	return &t, nil
}

// nullString stores an empty string as NULL.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// txArgs are the values of txColumns, in order.
func txArgs(t *xaalis.Transaction) []any {
	var settle *int64
	var settleCur *string
	if t.SettlementAmount != nil {
		minor, cur := t.SettlementAmount.Minor, string(t.SettlementAmount.Currency)
		settle, settleCur = &minor, &cur
	}
	// A nil *NextAction is NULL; pgx encodes any other as JSON.
	return []any{t.ID, t.MerchantID, t.Mode, t.Type, t.Reference, nullString(t.MerchantRef), t.Status,
		t.Amount.Minor, t.Amount.Currency, t.LimitAmount, t.Country, t.Provider, t.Route, t.RouteReason,
		t.ProviderRef, t.NextAction, t.PayerPhone, t.PayerName, nullString(t.CustomerID), t.SuccessURL, t.FailedURL,
		t.CallbackURL, metadata(t.Metadata), t.FailureReason, t.ExchangeRate, settle, settleCur, t.ExpiresAt,
		t.ReconciledAt, t.CreatedAt, t.UpdatedAt, nullString(t.ParentID), t.Fee.Minor, t.Fee.Currency,
		nullString(t.IdempotencyKey), t.Description, t.DispatchedAt, keyTypeOf(t), nullString(t.CreationKey)}
}

func queryTxs(ctx context.Context, q querier, op, query string, args ...any) ([]*xaalis.Transaction, error) {
	return queryAll(ctx, q, op, scanTx, query, args...)
}

// Transaction returns a transaction by id; an empty merchantID matches any
// merchant (internal callers only: the hosted page, background work).
func (s *Store) Transaction(ctx context.Context, merchantID, id string) (*xaalis.Transaction, error) {
	return scanTx("read transaction", s.pool.QueryRow(ctx, `SELECT `+txColumns+` FROM transactions
		WHERE id = $1 AND ($2::text = '' OR merchant_id = $2)`, id, merchantID))
}

// LookupTransactions finds the merchant's transactions by id, reference or
// merchant_ref, in both modes.
//
// Each key is looked up through its own index, a later lookup leaving out
// the rows an earlier one found, and the merchant is checked here: the
// same rows as `merchant_id = $1 AND (id = $2 OR reference = $2 OR
// merchant_ref = $2)`, read by the same plan whatever the table's
// statistics. With that condition and none (a new table, autovacuum yet to
// analyse it), the planner read every transaction of the merchant through
// transactions_list and filtered them: 0.69 ms for a merchant of 1,000
// payments, and status at 4,400 ok/s instead of 7,300. An id or a
// reference is unique across merchants, so their lookups read one row.
func (s *Store) LookupTransactions(ctx context.Context, merchantID, key string) ([]*xaalis.Transaction, error) {
	found, err := queryTxs(ctx, s.pool, "look up transactions", lookupSQL, merchantID, key)
	if err != nil {
		return nil, err
	}
	out := found[:0]
	for _, x := range found {
		if x.MerchantID == merchantID {
			out = append(out, x)
		}
	}
	return out, nil
}

const lookupSQL = `SELECT ` + txColumns + ` FROM transactions WHERE id = $2
	UNION ALL SELECT ` + txColumns + ` FROM transactions WHERE reference = $2 AND id <> $2
	UNION ALL SELECT ` + txColumns + ` FROM transactions
	WHERE merchant_ref = $2 AND merchant_id = $1 AND id <> $2 AND reference <> $2
	ORDER BY created_at, id`

// TransactionByProviderRef finds a transaction by the provider's id.
func (s *Store) TransactionByProviderRef(ctx context.Context, mode xaalis.Mode, provider, ref string) (*xaalis.Transaction, error) {
	return scanTx("read transaction by provider ref", s.pool.QueryRow(ctx, `SELECT `+txColumns+` FROM transactions
		WHERE provider = $1 AND provider_ref = $2 AND mode = $3`, provider, ref, mode))
}

// TransactionByReference finds a provider's transaction by its reference.
func (s *Store) TransactionByReference(ctx context.Context, mode xaalis.Mode, provider, reference string) (*xaalis.Transaction, error) {
	return scanTx("read transaction by reference", s.pool.QueryRow(ctx, `SELECT `+txColumns+` FROM transactions
		WHERE reference = $1 AND provider = $2 AND mode = $3`, reference, provider, mode))
}

// conditions builds a WHERE clause with numbered parameters.
type conditions struct {
	where []string
	args  []any
}

// add appends cond, whose one %d is replaced by v's parameter number.
func (c *conditions) add(cond string, v any) {
	c.args = append(c.args, v)
	c.where = append(c.where, fmt.Sprintf(cond, len(c.args)))
}

func (c *conditions) String() string { return strings.Join(c.where, " AND ") }

// Transactions lists one page of a merchant's transactions, newest first,
// and the total.
func (s *Store) Transactions(ctx context.Context, f xaalis.TxFilter, page xaalis.PageRequest) ([]*xaalis.Transaction, int, error) {
	var c conditions
	c.add("merchant_id = $%d", f.MerchantID)
	c.add("mode = $%d", f.Mode)
	if f.Type != "" {
		c.add("type = $%d", f.Type)
	}
	if f.Status != "" {
		c.add("status = $%d", f.Status)
	}
	if f.Provider != "" {
		c.add("provider = $%d", f.Provider)
	}
	if f.MerchantRef != "" {
		c.add("merchant_ref = $%d", f.MerchantRef)
	}
	if f.From != nil {
		c.add("created_at >= $%d", *f.From)
	}
	if f.To != nil {
		c.add("created_at < $%d", *f.To)
	}
	w := c.String()
	var total int
	if countable(f) {
		// Filters the counts are kept by: a few rows rather than every
		// row of the merchant.
		q := `SELECT coalesce(sum(n), 0) FROM transaction_counts WHERE merchant_id = $1 AND mode = $2
			AND ($3 = '' OR type = $3) AND ($4 = '' OR status = $4)`
		if err := s.pool.QueryRow(ctx, q, f.MerchantID, f.Mode, string(f.Type), string(f.Status)).Scan(&total); err != nil {
			return nil, 0, fmt.Errorf("count transactions: %w", err)
		}
	} else if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM transactions WHERE `+w, c.args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count transactions: %w", err)
	}
	tail, args := pageSQL(page, c.args...)
	list, err := queryTxs(ctx, s.pool, "list transactions", `SELECT `+txColumns+` FROM transactions WHERE `+w+`
		ORDER BY created_at DESC, id DESC`+tail, args...)
	if err != nil {
		return nil, 0, err
	}
	return list, total, nil
}

// DueTransactions returns background work of any merchant. These are plain
// reads: callers lock and re-check each row in a transaction of its own.
// Expired and Reconcile select payments only; Dispatch selects payouts and
// refunds.
func (s *Store) DueTransactions(ctx context.Context, q xaalis.DueQuery) ([]*xaalis.Transaction, error) {
	switch {
	case q.Expired:
		return queryTxs(ctx, s.pool, "due transactions", `SELECT `+txColumns+` FROM transactions
			WHERE type = 'payment' AND status IN ('initiated', 'pending') AND expires_at <= $1
			ORDER BY expires_at`+limitSQL(q.Limit), q.Now)
	case q.Dispatch:
		// The conditions are those of the transactions_dispatch index.
		return queryTxs(ctx, s.pool, "due transactions", `SELECT `+txColumns+` FROM transactions
			WHERE type IN ('payout', 'refund') AND status IN ('initiated', 'pending')
				AND coalesce(dispatched_at, created_at) < $1
			ORDER BY coalesce(dispatched_at, created_at), id`+limitSQL(q.Limit), q.Before)
	case q.LatePoll:
		return queryTxs(ctx, s.pool, "due transactions", `SELECT `+txColumns+` FROM transactions
			WHERE id IN (SELECT transaction_id FROM late_polls WHERE poll_at <= $1 ORDER BY poll_at`+limitSQL(q.Limit)+`)`, q.Now)
	}
	return queryTxs(ctx, s.pool, "due transactions", `SELECT `+txColumns+` FROM transactions
		WHERE type = 'payment' AND status = 'pending' AND provider_ref <> '' AND coalesce(reconciled_at, created_at) < $1
		ORDER BY coalesce(reconciled_at, created_at)`+limitSQL(q.Limit), q.Before)
}

// Volume sums a scope's volume counters from Since's day on.
func (s *Store) Volume(ctx context.Context, q xaalis.VolumeQuery) (int64, error) {
	var sum int64
	scope := q.Scope()
	// sum(bigint) is numeric: cast it back.
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(amount), 0)::bigint FROM volume_counters
		WHERE (scope = $1 AND day >= $2) OR (scope = $3 AND day >= $4)`,
		scope, xaalis.VolumeDay(q.Since), xaalis.HoldScope(scope), q.FirstHoldMinute()).Scan(&sum); err != nil {
		return 0, fmt.Errorf("volume: %w", err)
	}
	return sum, nil
}

// Volumes sums several queries in one statement: one scan reads each
// scope's counters once (volumeRanges) and one aggregate sums every query
// from them. A subquery a query read the merchant's rows twice (its day
// and its month) and started four plans.
func (s *Store) Volumes(ctx context.Context, qs []xaalis.VolumeQuery) ([]int64, error) {
	if len(qs) == 0 {
		return nil, nil
	}
	var args params
	named := make(map[string]string, 2*len(qs))
	scope := func(sc string) string {
		if p, ok := named[sc]; ok {
			return p
		}
		named[sc] = args.add(sc)
		return named[sc]
	}
	var b strings.Builder
	b.WriteString("SELECT ")
	for i, q := range qs {
		if i > 0 {
			b.WriteString(", ")
		}
		// sum(bigint) is numeric: cast it back.
		fmt.Fprintf(&b, `coalesce(sum(amount) FILTER (WHERE (scope = %s AND day >= %s) OR (scope = %s AND day >= %s)), 0)::bigint`,
			scope(q.Scope()), args.add(xaalis.VolumeDay(q.Since)), scope(xaalis.HoldScope(q.Scope())), args.add(q.FirstHoldMinute()))
	}
	b.WriteString(" FROM volume_counters WHERE ")
	for i, r := range volumeRanges(qs) {
		if i > 0 {
			b.WriteString(" OR ")
		}
		fmt.Fprintf(&b, "(scope = %s AND day >= %s)", scope(r.scope), args.add(r.from))
	}
	out := make([]int64, len(qs))
	dst := make([]any, len(qs))
	for i := range out {
		dst[i] = &out[i]
	}
	if err := s.reads.queryRow(ctx, b.String(), args...).Scan(dst...); err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	return out, nil
}

// volumeRange is one scope's counters from a day on (a volume scope) or
// from a minute on (a hold scope, xaalis.HoldScope).
type volumeRange struct {
	scope string
	from  int64
}

// volumeRanges are the counters that qs read: one range a scope, from the
// earliest bound any query of it needs, in the order first met.
func volumeRanges(qs []xaalis.VolumeQuery) []volumeRange {
	out := make([]volumeRange, 0, 2*len(qs))
	at := make(map[string]int, 2*len(qs))
	add := func(scope string, from int64) {
		if i, ok := at[scope]; ok {
			out[i].from = min(out[i].from, from)
			return
		}
		at[scope] = len(out)
		out = append(out, volumeRange{scope, from})
	}
	for _, q := range qs {
		add(q.Scope(), xaalis.VolumeDay(q.Since))
		add(xaalis.HoldScope(q.Scope()), q.FirstHoldMinute())
	}
	return out
}

// AddVolume adds delta to the counters of scopes for one day, at COMMIT:
// the counters of a merchant and of a provider are hot rows, locked for
// the commit only, and in one order by every transaction (txConn.hot).
func (t *Tx) AddVolume(ctx context.Context, scopes []string, day int64, delta int64) error {
	for _, s := range scopes {
		t.tx.addVolume(s, day, delta)
	}
	return nil
}

const customerColumns = `id, merchant_id, mode, phone, name, created_at, updated_at`

func scanCustomer(op string, row interface{ Scan(...any) error }) (*xaalis.Customer, error) {
	var c xaalis.Customer
	if err := row.Scan(&c.ID, &c.MerchantID, &c.Mode, &c.Phone, &c.Name, &c.CreatedAt, &c.UpdatedAt); err != nil {
		return nil, notFound(op, err)
	}
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	return &c, nil
}

// Customer returns one of the merchant's customers.
func (s *Store) Customer(ctx context.Context, merchantID, id string) (*xaalis.Customer, error) {
	return scanCustomer("read customer", s.pool.QueryRow(ctx, `SELECT `+customerColumns+`
		FROM customers WHERE merchant_id = $1 AND id = $2`, merchantID, id))
}

// Events returns an object's events in order.
func (s *Store) Events(ctx context.Context, objectID string) ([]*xaalis.Event, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, merchant_id, mode, type, object_type, object_id, seq, data, created_at
		FROM events WHERE object_id = $1 ORDER BY seq`, objectID)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	var out []*xaalis.Event
	for rows.Next() {
		var e xaalis.Event
		var data string
		if err := rows.Scan(&e.ID, &e.MerchantID, &e.Mode, &e.Type, &e.ObjectType, &e.ObjectID, &e.Seq, &data,
			&e.CreatedAt); err != nil {
			return nil, fmt.Errorf("list events: %w", err)
		}
		e.Data, e.CreatedAt = json.RawMessage(data), e.CreatedAt.UTC()
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, nil
}

// InsertTransaction stores a new transaction. The INSERT is queued with
// the next statement: nothing reads its answer, and its one expected
// failure, a merchant_ref taken by a concurrent transaction (the caller
// read it free, FOR UPDATE, in this transaction), surfaces with that
// statement or the COMMIT as ErrDuplicateMerchantRef (commitRefusal):
// the transaction then fails and Update rolls it back.
func (t *Tx) InsertTransaction(ctx context.Context, x *xaalis.Transaction) error {
	t.tx.queued = append(t.tx.queued, insertTxRows.one("insert transaction", txArgs(x)...))
	t.tx.addCount(countRow{x.MerchantID, string(x.Mode), string(x.Type), string(x.Status)}, 1)
	return nil
}

// insertTxRows inserts transactions, their columns in txArgs' order.
var insertTxRows = func() *valuesRows {
	params := make([]string, len(txColumnList))
	for i := range params {
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	return newValuesRows(`INSERT INTO transactions (`+txColumns+`)`, `(`+strings.Join(params, ", ")+`)`, "")
}()

// TransactionForUpdate reads a transaction and locks its row until the
// transaction ends.
func (t *Tx) TransactionForUpdate(ctx context.Context, id string) (*xaalis.Transaction, error) {
	return scanTx("read transaction", t.tx.QueryRow(ctx, `SELECT `+txColumns+` FROM transactions WHERE id = $1
		FOR UPDATE`, id))
}

// TransactionByMerchantRefForUpdate reads a payment or payout by
// merchant_ref and locks its row.
func (t *Tx) TransactionByMerchantRefForUpdate(ctx context.Context, merchantID string, mode xaalis.Mode, kt xaalis.KeyType, ref string) (*xaalis.Transaction, error) {
	return scanTx("read transaction by merchant_ref", t.tx.QueryRow(ctx, merchantRefSQL, merchantID, mode, kt, ref))
}

const merchantRefSQL = `SELECT ` + txColumns + ` FROM transactions
	WHERE merchant_id = $1 AND mode = $2 AND key_type = $3 AND merchant_ref = $4 FOR UPDATE`

// TransactionByMerchantRefAndPayer sends the merchant_ref's lookup and the
// payer's upsert together: one round trip where they took two, each of
// which a group-commit batch (group.go) waits for in turn. The upsert
// does not depend on the lookup: when the lookup finds a payment, the
// payer is its payer, already a customer, and is only read.
func (t *Tx) TransactionByMerchantRefAndPayer(ctx context.Context, merchantID string, mode xaalis.Mode, kt xaalis.KeyType, ref string, payer *xaalis.Customer) (*xaalis.Transaction, *xaalis.Customer, error) {
	b := &pgx.Batch{}
	b.Queue(merchantRefSQL, merchantID, mode, kt, ref)
	if payer != nil {
		b.Queue(upsertCustomerSQL, payer.ID, payer.MerchantID, payer.Mode, payer.Phone, payer.Name, payer.CreatedAt, payer.UpdatedAt)
	}
	br := t.tx.SendBatch(ctx, b)
	x, err := orNone(scanTx("read transaction by merchant_ref", br.QueryRow()))
	if err != nil {
		br.Close()
		return nil, nil, err
	}
	var c *xaalis.Customer
	if payer != nil {
		if c, err = scanCustomer("upsert customer", br.QueryRow()); err != nil {
			br.Close()
			return nil, nil, err
		}
	}
	if err := br.Close(); err != nil {
		return nil, nil, fmt.Errorf("read transaction by merchant_ref: %w", err)
	}
	return x, c, nil
}

// orNone is a lookup's answer with not_found as nil: no error.
func orNone(x *xaalis.Transaction, err error) (*xaalis.Transaction, error) {
	if errors.Is(err, xaalis.ErrNotFound) {
		return nil, nil
	}
	return x, err
}

// RefundedAmount sums a payment's refunds that are not failed, cancelled
// or expired. Callers lock the payment first, so that concurrent refunds of
// it count each other.
func (t *Tx) RefundedAmount(ctx context.Context, paymentID string) (int64, error) {
	var sum int64
	// sum(bigint) is numeric: cast it back.
	err := t.tx.QueryRow(ctx, `SELECT coalesce(sum(amount), 0)::bigint FROM transactions
		WHERE parent_id = $1 AND type = 'refund' AND status NOT IN ('failed', 'cancelled', 'expired')`, paymentID).Scan(&sum)
	if err != nil {
		return 0, fmt.Errorf("refunded amount: %w", err)
	}
	return sum, nil
}

// SucceededRefundAmount sums a payment's refunds that succeeded.
func (t *Tx) SucceededRefundAmount(ctx context.Context, paymentID string) (int64, error) {
	var sum int64
	// sum(bigint) is numeric: cast it back.
	err := t.tx.QueryRow(ctx, `SELECT coalesce(sum(amount), 0)::bigint FROM transactions
		WHERE parent_id = $1 AND type = 'refund' AND status = 'success'`, paymentID).Scan(&sum)
	if err != nil {
		return 0, fmt.Errorf("succeeded refund amount: %w", err)
	}
	return sum, nil
}

// TransactionByIdempotencyKey finds a payout or refund by the key it was
// created under and locks its row.
func (t *Tx) TransactionByIdempotencyKey(ctx context.Context, merchantID string, mode xaalis.Mode, key string) (*xaalis.Transaction, error) {
	return scanTx("read transaction by idempotency key", t.tx.QueryRow(ctx, idempotencyKeySQL, merchantID, mode, key))
}

// ForgetTransactionKey sets a transaction's idempotency key to none.
func (t *Tx) ForgetTransactionKey(ctx context.Context, id string) error {
	tag, err := t.tx.Exec(ctx, `UPDATE transactions SET idempotency_key = NULL WHERE id = $1`, id)
	return oneRow("forget idempotency key", tag, err)
}

// SetLatePoll sets or, at the zero time, stops a payment's late poll.
func (t *Tx) SetLatePoll(ctx context.Context, id string, at time.Time) error {
	var err error
	if at.IsZero() {
		_, err = t.tx.Exec(ctx, `DELETE FROM late_polls WHERE transaction_id = $1`, id)
	} else {
		_, err = t.tx.Exec(ctx, `INSERT INTO late_polls (transaction_id, poll_at) VALUES ($1, $2)
			ON CONFLICT (transaction_id) DO UPDATE SET poll_at = excluded.poll_at`, id, at)
	}
	if err != nil {
		return fmt.Errorf("set late poll: %w", err)
	}
	return nil
}

const idempotencyKeySQL = `SELECT ` + txColumns + ` FROM transactions
	WHERE merchant_id = $1 AND mode = $2 AND idempotency_key = $3 FOR UPDATE`

// TransactionByIdempotencyKeyAndMerchantRef sends a payout's two lookups
// together: one round trip where they took two, each of which a
// group-commit batch (group.go) waits for in turn. Both rows, when they
// exist, stay locked to the end of the transaction, as each lookup alone
// would leave them.
func (t *Tx) TransactionByIdempotencyKeyAndMerchantRef(ctx context.Context, merchantID string, mode xaalis.Mode, key string, kt xaalis.KeyType, ref string) (byKey, byRef *xaalis.Transaction, err error) {
	b := &pgx.Batch{}
	if key != "" {
		b.Queue(idempotencyKeySQL, merchantID, mode, key)
	}
	b.Queue(merchantRefSQL, merchantID, mode, kt, ref)
	br := t.tx.SendBatch(ctx, b)
	if key != "" {
		if byKey, err = orNone(scanTx("read transaction by idempotency key", br.QueryRow())); err != nil {
			br.Close()
			return nil, nil, err
		}
	}
	if byRef, err = orNone(scanTx("read transaction by merchant_ref", br.QueryRow())); err != nil {
		br.Close()
		return nil, nil, err
	}
	if err := br.Close(); err != nil {
		return nil, nil, fmt.Errorf("read transaction by idempotency key and merchant_ref: %w", err)
	}
	return byKey, byRef, nil
}

// UpdateTransaction writes every mutable field (all but the identity:
// id, merchant, mode, type, reference, parent, idempotency key and
// creation time).
func (t *Tx) UpdateTransaction(ctx context.Context, x *xaalis.Transaction) error {
	args := txArgs(x)
	sets := make([]string, 0, len(txColumnList))
	vals := make([]any, 0, len(txColumnList)+1)
	for i, c := range txColumnList {
		switch c {
		case "id", "merchant_id", "mode", "type", "reference", "created_at", "parent_id", "idempotency_key", "key_type":
			continue
		}
		vals = append(vals, args[i])
		sets = append(sets, fmt.Sprintf("%s = $%d", c, len(vals)))
	}
	vals = append(vals, x.ID)
	// The row as it was (o: the statement's snapshot; callers lock the
	// row first) gives the status the counts move from.
	var old string
	err := t.tx.QueryRow(ctx, fmt.Sprintf(`UPDATE transactions t SET %s FROM transactions o
		WHERE t.id = $%d AND o.id = t.id RETURNING o.status`, strings.Join(sets, ", "), len(vals)), vals...).Scan(&old)
	if errors.Is(err, pgx.ErrNoRows) {
		return xaalis.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("update transaction: %w", err)
	}
	if old != string(x.Status) {
		t.tx.addCount(countRow{x.MerchantID, string(x.Mode), string(x.Type), old}, -1)
		t.tx.addCount(countRow{x.MerchantID, string(x.Mode), string(x.Type), string(x.Status)}, 1)
	}
	return nil
}

// UpsertCustomer finds or creates the customer of a phone in one
// statement. A returning payer's row is only read: an upsert's DO UPDATE
// wrote a new version of the row at every payment, though nothing in it
// changed, and held its lock until the commit, so two group-commit
// batches paying the same two phones in opposite orders could deadlock.
// Only a new phone, or a name for a customer that has none, goes on to
// the insert; a concurrent insert of the same phone waits for this one.
func (t *Tx) UpsertCustomer(ctx context.Context, c *xaalis.Customer) (*xaalis.Customer, error) {
	return scanCustomer("upsert customer", t.tx.QueryRow(ctx, upsertCustomerSQL,
		c.ID, c.MerchantID, c.Mode, c.Phone, c.Name, c.CreatedAt, c.UpdatedAt))
}

// upsertCustomerSQL reads the customer first (found); the insert runs
// only when nothing usable was found, and its DO UPDATE always updates,
// so RETURNING gives the row, new or met, in the same statement.
const upsertCustomerSQL = `WITH found AS (
		SELECT ` + customerColumns + ` FROM customers WHERE merchant_id = $2::text AND mode = $3::text AND phone = $4::text
	), up AS (
		INSERT INTO customers (` + customerColumns + `)
		SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::timestamptz, $7::timestamptz
		WHERE NOT EXISTS (SELECT 1 FROM found WHERE found.name <> '' OR $5::text = '')
		ON CONFLICT (merchant_id, mode, phone) DO UPDATE SET
			name = CASE WHEN customers.name = '' THEN excluded.name ELSE customers.name END,
			updated_at = CASE WHEN customers.name = '' AND excluded.name <> '' THEN excluded.updated_at ELSE customers.updated_at END
		RETURNING ` + customerColumns + `
	)
	SELECT ` + customerColumns + ` FROM up
	UNION ALL SELECT ` + customerColumns + ` FROM found WHERE NOT EXISTS (SELECT 1 FROM up)`

// eventLockClass is the first key of the advisory locks that number an
// object's events (the second is a hash of the object id). Two-key
// advisory locks never collide with the one-key lock of the migrations.
const eventLockClass = 0x7861_6576 // "xaev"

// InsertEvent stores an event after the object's last one. Callers hold the
// object's row lock already; a transaction-scoped advisory lock on the
// object id numbers events correctly even when they do not. It is taken in
// a statement of its own so that, at READ COMMITTED, the insert's snapshot
// sees every event committed by the previous holder.
func (t *Tx) InsertEvent(ctx context.Context, e *xaalis.Event) error {
	if e.First {
		// Nothing else can number an event of an object this transaction
		// created; a wrong First fails on (object_id, seq) with the next
		// statement or the COMMIT.
		e.Seq = 1
		t.tx.queued = append(t.tx.queued, insertFirstEventRows.one("insert event", e.ID, e.MerchantID, e.Mode, e.Type,
			e.ObjectType, e.ObjectID, string(e.Data), e.CreatedAt))
		return nil
	}
	if _, err := t.tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, eventLockClass, e.ObjectID); err != nil {
		return fmt.Errorf("lock events: %w", err)
	}
	err := t.tx.QueryRow(ctx, `INSERT INTO events (id, merchant_id, mode, type, object_type, object_id, seq, data, created_at)
		SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, coalesce(max(seq), 0) + 1, $7::text,
			$8::timestamptz
		FROM events WHERE object_id = $6
		RETURNING seq`, e.ID, e.MerchantID, e.Mode, e.Type, e.ObjectType, e.ObjectID, string(e.Data), e.CreatedAt).Scan(&e.Seq)
	if err != nil {
		return fmt.Errorf("insert event: %w", err)
	}
	return nil
}

// insertFirstEventRows inserts the first events of objects.
var insertFirstEventRows = newValuesRows(`INSERT INTO events (id, merchant_id, mode, type, object_type, object_id, seq, data, created_at)`,
	`($1, $2, $3, $4, $5, $6, 1, $7, $8)`, "")

// NotificationFirstSeen records a provider notification id and reports
// whether it is new. A concurrent insert of the same id waits for the
// first transaction to end, so exactly one committed caller gets true.
func (t *Tx) NotificationFirstSeen(ctx context.Context, provider, eventID string, at time.Time) (bool, error) {
	tag, err := t.tx.Exec(ctx, `INSERT INTO provider_notifications (provider, event_id, created_at)
		VALUES ($1, $2, $3) ON CONFLICT (provider, event_id) DO NOTHING`, provider, eventID, at)
	if err != nil {
		return false, fmt.Errorf("record notification: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// keyTypeOf is the kind of key that created t; records made before the
// distinction, and payouts and refunds, are the secret key's.
func keyTypeOf(t *xaalis.Transaction) xaalis.KeyType {
	if t.KeyType == "" {
		return xaalis.KeySecret
	}
	return t.KeyType
}

// countable reports a filter that transaction_counts answers: merchant,
// mode, type and status only.
func countable(f xaalis.TxFilter) bool {
	return f.Provider == "" && f.MerchantRef == "" && f.From == nil && f.To == nil
}
