package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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

func scanTx(sc func(...any) error) (*xaalis.Transaction, error) {
	var t xaalis.Transaction
	var mref, next, customer, settleCur, parent, idemKey, creationKey sql.NullString
	var settle, reconciled, dispatched sql.NullInt64
	var md string
	var expires, created, updated int64
	err := sc(&t.ID, &t.MerchantID, &t.Mode, &t.Type, &t.Reference, &mref, &t.Status, &t.Amount.Minor,
		&t.Amount.Currency, &t.LimitAmount, &t.Country, &t.Provider, &t.Route, &t.RouteReason, &t.ProviderRef,
		&next, &t.PayerPhone, &t.PayerName, &customer, &t.SuccessURL, &t.FailedURL, &t.CallbackURL, &md,
		&t.FailureReason, &t.ExchangeRate, &settle, &settleCur, &expires, &reconciled, &created, &updated,
		&parent, &t.Fee.Minor, &t.Fee.Currency, &idemKey, &t.Description, &dispatched, &t.KeyType, &creationKey)
	if err != nil {
		return nil, notFound(err)
	}
	t.MerchantRef, t.CustomerID = mref.String, customer.String
	t.ParentID, t.IdempotencyKey, t.DispatchedAt = parent.String, idemKey.String, fromNullMicros(dispatched)
	t.CreationKey = creationKey.String
	if next.Valid {
		t.NextAction = new(xaalis.NextAction)
		if err := json.Unmarshal([]byte(next.String), t.NextAction); err != nil {
			return nil, fmt.Errorf("next_action: %w", err)
		}
	}
	if err := json.Unmarshal([]byte(md), &t.Metadata); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	if settle.Valid {
		t.SettlementAmount = &xaalis.Amount{Minor: settle.Int64, Currency: xaalis.Currency(settleCur.String)}
	}
	t.ExpiresAt, t.ReconciledAt = fromMicros(expires), fromNullMicros(reconciled)
	t.CreatedAt, t.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &t, nil
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// txArgs are the values of txColumns, in order.
func txArgs(t *xaalis.Transaction) ([]any, error) {
	var next any
	if t.NextAction != nil {
		b, err := json.Marshal(t.NextAction)
		if err != nil {
			return nil, err
		}
		next = string(b)
	}
	md, err := metadataJSON(t.Metadata)
	if err != nil {
		return nil, err
	}
	var settle, settleCur any
	if t.SettlementAmount != nil {
		settle, settleCur = t.SettlementAmount.Minor, string(t.SettlementAmount.Currency)
	}
	return []any{t.ID, t.MerchantID, t.Mode, t.Type, t.Reference, nullString(t.MerchantRef), t.Status,
		t.Amount.Minor, t.Amount.Currency, t.LimitAmount, t.Country, t.Provider, t.Route, t.RouteReason,
		t.ProviderRef, next, t.PayerPhone, t.PayerName, nullString(t.CustomerID), t.SuccessURL, t.FailedURL,
		t.CallbackURL, md, t.FailureReason, t.ExchangeRate, settle, settleCur, micros(t.ExpiresAt),
		nullMicros(t.ReconciledAt), micros(t.CreatedAt), micros(t.UpdatedAt), nullString(t.ParentID), t.Fee.Minor,
		t.Fee.Currency, nullString(t.IdempotencyKey), t.Description, nullMicros(t.DispatchedAt), keyTypeOf(t),
		nullString(t.CreationKey)}, nil
}

func queryTxs(ctx context.Context, q querier, query string, args ...any) ([]*xaalis.Transaction, error) {
	return queryAll(ctx, q, "", scanTx, query, args...)
}

// Transaction returns a transaction by id; an empty merchantID matches any
// merchant (internal callers only: the hosted page, background work).
func (s *Store) Transaction(ctx context.Context, merchantID, id string) (*xaalis.Transaction, error) {
	return scanTx(s.read.QueryRowContext(ctx, `SELECT `+txColumns+` FROM transactions
		WHERE id = ? AND (? = '' OR merchant_id = ?)`, id, merchantID, merchantID).Scan)
}

// LookupTransactions finds transactions by id, reference or merchant_ref.
func (s *Store) LookupTransactions(ctx context.Context, merchantID, key string) ([]*xaalis.Transaction, error) {
	return queryTxs(ctx, s.point, lookupTxQuery, merchantID, key, key, key)
}

// byKey is the condition of a lookup of a merchant's record by id or
// reference (and more). "+merchant_id" keeps SQLite from searching the
// merchant's index and reading every record of the merchant (without
// statistics it preferred that to the keys' own indexes: a status call
// read all of a merchant's payments); the keys' indexes find the rows.
const byKey = `+merchant_id = ? AND `

const lookupTxQuery = `SELECT ` + txColumns + ` FROM transactions
		WHERE ` + byKey + `(id = ? OR reference = ? OR merchant_ref = ?) ORDER BY created_at`

// TransactionByProviderRef finds a transaction by the provider's id.
func (s *Store) TransactionByProviderRef(ctx context.Context, mode xaalis.Mode, provider, ref string) (*xaalis.Transaction, error) {
	return scanTx(s.read.QueryRowContext(ctx, `SELECT `+txColumns+` FROM transactions
		WHERE provider = ? AND provider_ref = ? AND mode = ?`, provider, ref, mode).Scan)
}

// TransactionByReference finds a provider's transaction by its reference.
func (s *Store) TransactionByReference(ctx context.Context, mode xaalis.Mode, provider, reference string) (*xaalis.Transaction, error) {
	return scanTx(s.read.QueryRowContext(ctx, `SELECT `+txColumns+` FROM transactions
		WHERE reference = ? AND provider = ? AND mode = ?`, reference, provider, mode).Scan)
}

// Transactions lists one page of a merchant's transactions.
func (s *Store) Transactions(ctx context.Context, f xaalis.TxFilter, page xaalis.PageRequest) ([]*xaalis.Transaction, int, error) {
	w, args := txListWhere(f)
	var total int
	if countable(f) {
		// Filters the counts are kept by (migration 00014): a few rows
		// rather than every row of the merchant, a point read. The page
		// itself keeps the request's end: an OFFSET may skip many rows.
		if err := s.point.QueryRowContext(ctx, `SELECT coalesce(sum(n), 0) FROM transaction_counts
			WHERE merchant_id = ? AND mode = ? AND (? = '' OR type = ?) AND (? = '' OR status = ?)`,
			f.MerchantID, f.Mode, string(f.Type), string(f.Type), string(f.Status), string(f.Status)).Scan(&total); err != nil {
			return nil, 0, fmt.Errorf("count transactions: %w", err)
		}
	} else if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM transactions WHERE `+w, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count transactions: %w", err)
	}
	list, err := queryTxs(ctx, s.read, `SELECT `+txColumns+` FROM transactions WHERE `+w+`
		ORDER BY created_at DESC, id DESC LIMIT +? OFFSET ?`, append(args, page.PerPage, page.Offset())...)
	if err != nil {
		return nil, 0, fmt.Errorf("list transactions: %w", err)
	}
	return list, total, nil
}

// DueTransactions returns background work. Expired and Reconcile select
// payments only; Dispatch selects payouts and refunds.
func (s *Store) DueTransactions(ctx context.Context, q xaalis.DueQuery) ([]*xaalis.Transaction, error) {
	switch {
	case q.Expired:
		return queryTxs(ctx, s.read, `SELECT `+txColumns+` FROM transactions
			WHERE type = 'payment' AND status IN ('initiated', 'pending') AND expires_at <= ?
			ORDER BY expires_at LIMIT +?`, micros(q.Now), q.Limit)
	case q.Dispatch:
		// The conditions are those of the transactions_dispatch index.
		return queryTxs(ctx, s.read, `SELECT `+txColumns+` FROM transactions
			WHERE type IN ('payout', 'refund') AND status IN ('initiated', 'pending')
				AND coalesce(dispatched_at, created_at) < ?
			ORDER BY coalesce(dispatched_at, created_at), id LIMIT +?`, micros(q.Before), q.Limit)
	case q.LatePoll:
		return queryTxs(ctx, s.read, `SELECT `+txColumns+` FROM transactions
			WHERE id IN (SELECT transaction_id FROM late_polls WHERE poll_at <= ? ORDER BY poll_at LIMIT +?)`,
			micros(q.Now), q.Limit)
	}
	return queryTxs(ctx, s.read, `SELECT `+txColumns+` FROM transactions
		WHERE type = 'payment' AND status = 'pending' AND provider_ref <> '' AND coalesce(reconciled_at, created_at) < ?
		ORDER BY coalesce(reconciled_at, created_at) LIMIT +?`, micros(q.Before), q.Limit)
}

// volumeSum is one scope's volume: its counters (scope, first day) plus
// its hold counters (hold scope, first minute). Two sums, not one with an
// OR: SQLite answers the OR with a MULTI-INDEX OR, which builds an
// ephemeral table to drop duplicates that two distinct scopes cannot have:
// the read cost a payment about a third more CPU (83/104 against 67/63 µs
// in two alternated pairs).
const volumeSum = `((SELECT coalesce(sum(amount), 0) FROM volume_counters WHERE scope = ? AND day >= ?)
	+ (SELECT coalesce(sum(amount), 0) FROM volume_counters WHERE scope = ? AND day >= ?))`

// volumesSQLs are Volumes' statements for up to len(volumesSQLs) queries,
// built once: a payment's limits read three or four.
var volumesSQLs = func() (out [8]string) {
	for i := range out {
		out[i] = `SELECT ` + volumeSum + strings.Repeat(", "+volumeSum, i)
	}
	return out
}()

// volumesSQL is the statement that sums n volume queries (n > 0).
func volumesSQL(n int) string {
	if n <= len(volumesSQLs) {
		return volumesSQLs[n-1]
	}
	return `SELECT ` + volumeSum + strings.Repeat(", "+volumeSum, n-1)
}

// Volume sums a scope's volume counters from Since's day on, and its hold
// counters from the first minute still holding room.
func (s *Store) Volume(ctx context.Context, q xaalis.VolumeQuery) (int64, error) {
	var sum int64
	scope := q.Scope()
	if err := s.point.QueryRowContext(ctx, `SELECT `+volumeSum,
		scope, xaalis.VolumeDay(q.Since), xaalis.HoldScope(scope), q.FirstHoldMinute()).Scan(&sum); err != nil {
		return 0, fmt.Errorf("volume counters: %w", err)
	}
	return sum, nil
}

// Volumes sums several scopes in one statement.
func (s *Store) Volumes(ctx context.Context, qs []xaalis.VolumeQuery) ([]int64, error) {
	if len(qs) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 4*len(qs))
	out := make([]int64, len(qs))
	dst := make([]any, len(qs))
	for i, q := range qs {
		args = append(args, q.Scope(), xaalis.VolumeDay(q.Since), xaalis.HoldScope(q.Scope()), q.FirstHoldMinute())
		dst[i] = &out[i]
	}
	if err := s.point.QueryRowContext(ctx, volumesSQL(len(qs)), args...).Scan(dst...); err != nil {
		return nil, fmt.Errorf("volume counters: %w", err)
	}
	return out, nil
}

// AddVolume adds delta to the counters of scopes for one day. The deltas
// of a writer batch's commands that commit are summed and written together
// before its COMMIT: every payment of a merchant adds to the same rows, and
// nothing reads them inside a write transaction (the limits read them
// before it).
func (t *Tx) AddVolume(ctx context.Context, scopes []string, day int64, delta int64) error {
	for _, sc := range scopes {
		t.volumes[volumeKey{sc, day}] += delta
	}
	return nil
}

// volumeKey is one volume counter row.
type volumeKey struct {
	scope string
	day   int64
}

// volumeBatch sums the volume deltas of commands.
type volumeBatch map[volumeKey]int64

// merge adds o's deltas to b.
func (b volumeBatch) merge(o volumeBatch) {
	for k, d := range o {
		b[k] += d
	}
}

// write writes b's deltas, in statements of up to 100 rows in the order
// of their keys, and empties b. A delta that sums to zero writes nothing.
func (b volumeBatch) write(ctx context.Context, q querier) error {
	keys := make([]volumeKey, 0, len(b))
	for k, d := range b {
		if d != 0 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(x, y volumeKey) int {
		if c := strings.Compare(x.scope, y.scope); c != 0 {
			return c
		}
		return cmp.Compare(x.day, y.day)
	})
	for len(keys) > 0 {
		n := min(len(keys), 100)
		args := make([]any, 0, 3*n)
		for _, k := range keys[:n] {
			args = append(args, k.scope, k.day, b[k])
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO volume_counters (scope, day, amount) VALUES `+values(n, 3, "")+`
			ON CONFLICT (scope, day) DO UPDATE SET amount = amount + excluded.amount`, args...); err != nil {
			return fmt.Errorf("add volumes: %w", err)
		}
		keys = keys[n:]
	}
	clear(b)
	return nil
}

// Customer returns one of the merchant's customers.
func (s *Store) Customer(ctx context.Context, merchantID, id string) (*xaalis.Customer, error) {
	return scanCustomer(s.read.QueryRowContext(ctx, `SELECT id, merchant_id, mode, phone, name, created_at, updated_at
		FROM customers WHERE merchant_id = ? AND id = ?`, merchantID, id).Scan)
}

func scanCustomer(sc func(...any) error) (*xaalis.Customer, error) {
	var c xaalis.Customer
	var created, updated int64
	if err := sc(&c.ID, &c.MerchantID, &c.Mode, &c.Phone, &c.Name, &created, &updated); err != nil {
		return nil, notFound(err)
	}
	c.CreatedAt, c.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &c, nil
}

// Events returns an object's events in order.
func (s *Store) Events(ctx context.Context, objectID string) ([]*xaalis.Event, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT id, merchant_id, mode, type, object_type, object_id, seq, data, created_at
		FROM events WHERE object_id = ? ORDER BY seq`, objectID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*xaalis.Event
	for rows.Next() {
		var e xaalis.Event
		var data string
		var created int64
		if err := rows.Scan(&e.ID, &e.MerchantID, &e.Mode, &e.Type, &e.ObjectType, &e.ObjectID, &e.Seq, &data, &created); err != nil {
			return nil, err
		}
		e.Data, e.CreatedAt = json.RawMessage(data), fromMicros(created)
		out = append(out, &e)
	}
	return out, rows.Err()
}

// InsertTransaction stores a new transaction.
func (t *Tx) InsertTransaction(ctx context.Context, x *xaalis.Transaction) error {
	args, err := txArgs(x)
	if err != nil {
		return err
	}
	_, err = t.tx.ExecContext(ctx, `INSERT INTO transactions (`+txColumns+`) VALUES (?`+strings.Repeat(", ?", len(args)-1)+`)`, args...)
	if isUnique(err) && strings.Contains(err.Error(), "merchant_ref") {
		return xaalis.ErrDuplicateMerchantRef
	}
	return err
}

// txListWhere is the condition of a list of a merchant's transactions
// under f, and its arguments.
//
// A bound value the planner reads makes SQLite prepare the statement again
// at every new binding, a parse and a plan at each call of a statement
// otherwise prepared once per connection (TestReadsPrepareOnce): an
// equality whose column a partial index's WHERE compares with a literal
// (transactions_reconcile's type = 'payment' AND status = 'pending': the
// planner checks whether the value is that literal) and a bound LIMIT
// (planned with its value). So those equalities compare with CAST(? AS
// TEXT), an expression the planner does not read, still an index's
// equality, and every LIMIT is +?. The list of payments was parsed and
// planned at each request: 13-18 % of the list scenario's CPU.
func txListWhere(f xaalis.TxFilter) (string, []any) {
	where := []string{"merchant_id = ?", "mode = ?"}
	args := []any{f.MerchantID, f.Mode}
	add := func(cond string, v any) { where = append(where, cond); args = append(args, v) }
	if f.Type != "" {
		// With a merchant_ref, "+type" keeps SQLite on the merchant_ref
		// index (a row or two) rather than transactions_list, whose
		// (merchant_id, mode, type) prefix it would otherwise prefer
		// and read every record of that type.
		if f.MerchantRef != "" {
			add("+type = ?", f.Type)
		} else {
			add("type = CAST(? AS TEXT)", f.Type)
		}
	}
	if f.Status != "" {
		add("status = CAST(? AS TEXT)", f.Status)
	}
	if f.Provider != "" {
		add("provider = ?", f.Provider)
	}
	if f.MerchantRef != "" {
		add("merchant_ref = ?", f.MerchantRef)
	}
	if f.From != nil {
		add("created_at >= ?", micros(*f.From))
	}
	if f.To != nil {
		add("created_at < ?", micros(*f.To))
	}
	return strings.Join(where, " AND "), args
}

// TransactionForUpdate reads a transaction inside the write transaction.
func (t *Tx) TransactionForUpdate(ctx context.Context, id string) (*xaalis.Transaction, error) {
	return scanTx(t.tx.QueryRowContext(ctx, `SELECT `+txColumns+` FROM transactions WHERE id = ?`, id).Scan)
}

// TransactionByMerchantRefForUpdate reads a payment or payout by merchant_ref.
func (t *Tx) TransactionByMerchantRefForUpdate(ctx context.Context, merchantID string, mode xaalis.Mode, kt xaalis.KeyType, ref string) (*xaalis.Transaction, error) {
	return t.probeTx(ctx, `SELECT rowid FROM transactions
		WHERE merchant_id = ? AND mode = ? AND key_type = ? AND merchant_ref = ?`, merchantID, mode, kt, ref)
}

// TransactionByMerchantRefAndPayer reads a payment or payout by
// merchant_ref (nil when there is none), then upserts the payer when
// given. The writer is in process: there is no round trip to save.
func (t *Tx) TransactionByMerchantRefAndPayer(ctx context.Context, merchantID string, mode xaalis.Mode, kt xaalis.KeyType, ref string, payer *xaalis.Customer) (*xaalis.Transaction, *xaalis.Customer, error) {
	x, err := orNone(t.TransactionByMerchantRefForUpdate(ctx, merchantID, mode, kt, ref))
	if err != nil {
		return nil, nil, err
	}
	if payer == nil {
		return x, nil, nil
	}
	c, err := t.UpsertCustomer(ctx, payer)
	if err != nil {
		return nil, nil, err
	}
	return x, c, nil
}

// probeTx reads the transaction whose rowid the query probe finds, or
// answers not_found. Every payment and payout looks for a record that
// almost never exists (its merchant_ref, its Idempotency-Key), inside the
// writer's batch: a query of one column, answered from the unique index
// alone, costs the driver one column name where a query of the whole row
// costs 38 (strings it makes anew at every query, about 5 KB a payment).
// The row itself is read only when there is one.
func (t *Tx) probeTx(ctx context.Context, probe string, args ...any) (*xaalis.Transaction, error) {
	var rowid int64
	if err := t.tx.QueryRowContext(ctx, probe, args...).Scan(&rowid); err != nil {
		return nil, notFound(err)
	}
	return scanTx(t.tx.QueryRowContext(ctx, `SELECT `+txColumns+` FROM transactions WHERE rowid = ?`, rowid).Scan)
}

// RefundedAmount sums a payment's refunds that are not failed, cancelled
// or expired.
func (t *Tx) RefundedAmount(ctx context.Context, paymentID string) (int64, error) {
	var sum int64
	err := t.tx.QueryRowContext(ctx, `SELECT coalesce(sum(amount), 0) FROM transactions
		WHERE parent_id = ? AND type = 'refund' AND status NOT IN ('failed', 'cancelled', 'expired')`, paymentID).Scan(&sum)
	if err != nil {
		return 0, fmt.Errorf("refunded amount: %w", err)
	}
	return sum, nil
}

// SucceededRefundAmount sums a payment's refunds that succeeded.
func (t *Tx) SucceededRefundAmount(ctx context.Context, paymentID string) (int64, error) {
	var sum int64
	err := t.tx.QueryRowContext(ctx, `SELECT coalesce(sum(amount), 0) FROM transactions
		WHERE parent_id = ? AND type = 'refund' AND status = 'success'`, paymentID).Scan(&sum)
	if err != nil {
		return 0, fmt.Errorf("succeeded refund amount: %w", err)
	}
	return sum, nil
}

// TransactionByIdempotencyKey finds a payout or refund by the key it was
// created under, inside the write transaction.
func (t *Tx) TransactionByIdempotencyKey(ctx context.Context, merchantID string, mode xaalis.Mode, key string) (*xaalis.Transaction, error) {
	return t.probeTx(ctx, `SELECT rowid FROM transactions
		WHERE merchant_id = ? AND mode = ? AND idempotency_key = ?`, merchantID, mode, key)
}

// ForgetTransactionKey sets a transaction's idempotency key to none.
func (t *Tx) ForgetTransactionKey(ctx context.Context, id string) error {
	res, err := t.tx.ExecContext(ctx, `UPDATE transactions SET idempotency_key = NULL WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("forget idempotency key: %w", err)
	}
	return oneRow(res)
}

// SetLatePoll sets or, at the zero time, stops a payment's late poll.
func (t *Tx) SetLatePoll(ctx context.Context, id string, at time.Time) error {
	var err error
	if at.IsZero() {
		_, err = t.tx.ExecContext(ctx, `DELETE FROM late_polls WHERE transaction_id = ?`, id)
	} else {
		_, err = t.tx.ExecContext(ctx, `INSERT INTO late_polls (transaction_id, poll_at) VALUES (?, ?)
			ON CONFLICT (transaction_id) DO UPDATE SET poll_at = excluded.poll_at`, id, micros(at))
	}
	if err != nil {
		return fmt.Errorf("set late poll: %w", err)
	}
	return nil
}

// TransactionByIdempotencyKeyAndMerchantRef reads a payout's two lookups,
// each nil when there is none. The writer is in process: there is no
// round trip to save.
func (t *Tx) TransactionByIdempotencyKeyAndMerchantRef(ctx context.Context, merchantID string, mode xaalis.Mode, key string, kt xaalis.KeyType, ref string) (byKey, byRef *xaalis.Transaction, err error) {
	if key != "" {
		if byKey, err = orNone(t.TransactionByIdempotencyKey(ctx, merchantID, mode, key)); err != nil {
			return nil, nil, err
		}
	}
	if byRef, err = orNone(t.TransactionByMerchantRefForUpdate(ctx, merchantID, mode, kt, ref)); err != nil {
		return nil, nil, err
	}
	return byKey, byRef, nil
}

// orNone is a lookup's answer with not_found as nil: no error.
func orNone(x *xaalis.Transaction, err error) (*xaalis.Transaction, error) {
	if errors.Is(err, xaalis.ErrNotFound) {
		return nil, nil
	}
	return x, err
}

// UpdateTransaction writes every mutable field (all but the identity:
// id, merchant, mode, type, reference, parent, idempotency key and
// creation time).
func (t *Tx) UpdateTransaction(ctx context.Context, x *xaalis.Transaction) error {
	args, err := txArgs(x)
	if err != nil {
		return err
	}
	sets := make([]string, 0, len(txColumnList))
	vals := make([]any, 0, len(txColumnList))
	for i, c := range txColumnList {
		switch c {
		case "id", "merchant_id", "mode", "type", "reference", "created_at", "parent_id", "idempotency_key", "key_type":
			continue
		}
		sets = append(sets, c+" = ?")
		vals = append(vals, args[i])
	}
	res, err := t.tx.ExecContext(ctx, `UPDATE transactions SET `+strings.Join(sets, ", ")+` WHERE id = ?`, append(vals, x.ID)...)
	if err != nil {
		return err
	}
	return oneRow(res)
}

// UpsertCustomer finds or creates the customer of a phone. A returning
// payer's row is only read: an upsert's DO UPDATE rewrote the row, a
// page dirtied at a random place of the table for every payment of a
// known phone, though nothing in it changed. Only a new phone, or a name
// for a customer that has none, goes on to the upsert.
func (t *Tx) UpsertCustomer(ctx context.Context, c *xaalis.Customer) (*xaalis.Customer, error) {
	found, err := scanCustomer(t.tx.QueryRowContext(ctx, `SELECT `+customerColumns+`
		FROM customers WHERE merchant_id = ? AND mode = ? AND phone = ?`, c.MerchantID, c.Mode, c.Phone).Scan)
	switch {
	case err == nil && (found.Name != "" || c.Name == ""):
		return found, nil
	case err != nil && !errors.Is(err, xaalis.ErrNotFound):
		return nil, fmt.Errorf("read customer: %w", err)
	}
	// The upsert always updates (the name, when missing), so RETURNING
	// gives the row, new or found, in one statement.
	return scanCustomer(t.tx.QueryRowContext(ctx, `INSERT INTO customers (`+customerColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (merchant_id, mode, phone) DO UPDATE SET
			name = CASE WHEN customers.name = '' THEN excluded.name ELSE customers.name END,
			updated_at = CASE WHEN customers.name = '' AND excluded.name <> '' THEN excluded.updated_at ELSE customers.updated_at END
		RETURNING `+customerColumns,
		c.ID, c.MerchantID, c.Mode, c.Phone, c.Name, micros(c.CreatedAt), micros(c.UpdatedAt)).Scan)
}

// InsertEvent stores an event after the object's last one.
func (t *Tx) InsertEvent(ctx context.Context, e *xaalis.Event) error {
	if e.First {
		// The object's first event (xaalis.Event.First): seq 1; a wrong
		// First fails on (object_id, seq).
		e.Seq = 1
		_, err := t.tx.ExecContext(ctx, `INSERT INTO events (id, merchant_id, mode, type, object_type, object_id, seq, data,
			created_at, stream_pos) VALUES (?, ?, ?, ?, ?, ?, 1, CAST(? AS TEXT), ?, (SELECT coalesce(max(stream_pos), 0) + 1 FROM events))`,
			e.ID, e.MerchantID, e.Mode, e.Type, e.ObjectType, e.ObjectID, eventData(e.Data), micros(e.CreatedAt))
		return err
	}
	// One statement numbers the event after its object's last (seq) and
	// after every event committed (stream_pos: one writer at a time, so the
	// commit order), and inserts it.
	return t.tx.QueryRowContext(ctx, `INSERT INTO events (id, merchant_id, mode, type, object_type, object_id, seq, data,
		created_at, stream_pos) VALUES (?, ?, ?, ?, ?, ?,
		(SELECT coalesce(max(seq), 0) + 1 FROM events WHERE object_id = ?), CAST(? AS TEXT), ?,
		(SELECT coalesce(max(stream_pos), 0) + 1 FROM events)) RETURNING seq`, e.ID, e.MerchantID, e.Mode, e.Type,
		e.ObjectType, e.ObjectID, e.ObjectID, eventData(e.Data), micros(e.CreatedAt)).Scan(&e.Seq)
}

// eventData is an event's JSON as the insert binds it: as bytes, which
// the statement casts to the TEXT its STRICT column takes, so that the
// driver copies them once into SQLite's memory rather than after a
// conversion to a string of its own (a copy of each event, about 1.3 KB
// a payment, for the garbage collector). Never nil: nil bytes bind NULL.
func eventData(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// NotificationFirstSeen records a provider notification id.
func (t *Tx) NotificationFirstSeen(ctx context.Context, provider, eventID string, at time.Time) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `INSERT INTO provider_notifications (provider, event_id, created_at)
		VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, provider, eventID, micros(at))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
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
