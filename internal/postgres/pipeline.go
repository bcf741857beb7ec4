package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A write transaction's round trips, and how long it holds hot rows.
//
// Every payment of a merchant adds to the same few rows: its balance,
// the provider's and the platform's, the day's volume counters, the
// idempotency quota of the hour. A row updated early in a transaction
// stays locked until its COMMIT, so the payments of one merchant would
// take turns for the whole of each other's transactions. The updates of
// those rows are therefore queued (later) and sent at the end, with the
// COMMIT, in one round trip: a hot row is then locked for about the
// commit's own fsync. The same pipelining sends BEGIN with the
// transaction's first statement, and anything queued with the next
// statement that needs an answer.

// queued is a statement sent later, in order, with the next one. Nothing
// reads its answer but its error: a statement whose result must stop the
// transaction raises (xaalis_raise), since the COMMIT may follow it in
// the same round trip.
type queued struct {
	sql  string
	args []any
	// op names the statement in errors.
	op string
	// rows, when set, is the kind of the rows the statement inserts: a
	// batch writes those of all its commands in one statement (group.go).
	rows rowsStatement
}

// txConn is a write transaction on one connection of the pool. It offers
// what pgx.Tx offers the store (Exec, QueryRow, Query, SendBatch), sending
// BEGIN and the queued statements ahead of each in the same round trip.
type txConn struct {
	c     *pgxpool.Conn
	begun bool
	// batch, for a batch's transaction (group.go), is its lock_timeout:
	// BEGIN is followed by the batch's settings (queueBegin).
	batch  string
	queued []queued
	// The hot rows' changes, written at COMMIT (hot): the idempotency
	// quota's count, the volume and stat counters, and the balance
	// changes of entries whose debits need no check, summed per account
	// (ledger.go).
	quota    []quotaCount
	volumes  map[volumeKey]int64
	stats    map[statRow]statSum
	counts   map[countRow]int64
	deltas   map[balanceKey]int64
	deltasAt time.Time
	// checks are the debits of deltas to check when they are written;
	// checked, those sent, to tell an insufficient balance's figures.
	checks, checked map[balanceKey][]balanceCheck
	// checkedRows are the rows of entries with a check, written after it.
	checkedRows []queued
	// shard is the shard of the split hot rows (migration 00013) this
	// transaction adds to.
	shard int16
	// mux, for a command of a batch that runs beside the others
	// (groupmux.go), sends its statements with theirs; the batch's
	// transaction has begun.
	mux *batchMux
}

// params are a statement's parameters, numbered as they are added.
type params []any

// add appends v and returns its placeholder ($n).
func (p *params) add(v any) string {
	*p = append(*p, v)
	return "$" + strconv.Itoa(len(*p))
}

// quotaCount is the new Idempotency-Keys' count (n) against their
// merchant's quota, added at COMMIT: one key's, or those of a batch's
// commands (group.go).
type quotaCount struct {
	merchant, mode, keyType string
	start                   time.Time
	limit                   int64
	shard                   int16
	n                       int64
}

// addQuota counts q.n more keys against q's quota.
func (t *txConn) addQuota(q quotaCount) {
	for i, o := range t.quota {
		if o.merchant == q.merchant && o.mode == q.mode && o.keyType == q.keyType && o.start.Equal(q.start) && o.shard == q.shard {
			t.quota[i].n += q.n
			t.quota[i].limit = min(o.limit, q.limit)
			return
		}
	}
	t.quota = append(t.quota, q)
}

// hotShards is how many shards a split hot row has: transactions that add
// to one row at once mostly add to different shards, and PostgreSQL
// flushes their commits together.
const hotShards = 16

// later queues a statement whose answer nothing waits for: it goes with
// the next statement sent, or with the COMMIT.
func (t *txConn) later(op, sql string, args ...any) {
	t.queued = append(t.queued, queued{sql: sql, args: args, op: op})
}

// prefix moves BEGIN (if not sent yet) and the queued statements into b,
// and returns how many of b's statements begin the transaction, and the
// queued ones.
func (t *txConn) prefix(b *pgx.Batch) (begin int, q []queued) {
	if !t.begun {
		begin = queueBegin(b, t.batch)
		t.begun = true
	}
	q, t.queued = t.queued, nil
	for _, s := range q {
		b.Queue(s.sql, s.args...)
	}
	return begin, q
}

// genericPlans puts the statements that follow, to the transaction's end,
// on their generic plans: a batch's (queueBegin) and a read pipeline's
// with merged reads (readpipe.go).
const genericPlans = `set_config('plan_cache_mode', 'force_generic_plan', true)`

// queueBegin queues BEGIN and, for a batch (batch, its lock_timeout, not
// ""), the batch's settings, and returns how many statements it queued.
// A batch's settings last to its end (set_config's is_local):
//   - lock_timeout (batchLockTimeout);
//   - plan_cache_mode force_generic_plan: PostgreSQL plans a prepared
//     statement anew at each call when its generic plan's estimate is
//     dearer than the custom plans', as with the fan-out's (the rows of
//     unnest of a parameter are 10 to a generic plan, the array's length to
//     a custom one), for the same plan: its planning cost about 0.3 ms a
//     batch, twice its execution. A batch's statements are point lookups
//     and inserts, whose plans do not depend on the values.
func queueBegin(b *pgx.Batch, batch string) int {
	b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
	if batch == "" {
		return 1
	}
	b.Queue(`SELECT set_config('lock_timeout', $1, true), `+genericPlans, batch)
	return 2
}

// readPrefix reads the results of what prefix queued, and returns the
// first error.
func readPrefix(br pgx.BatchResults, begin int, q []queued) error {
	for range begin {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
	}
	for _, s := range q {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("%s: %w", s.op, err)
		}
	}
	return nil
}

// pending reports whether a statement must go ahead of the next one, or
// the next one must go through the batch's mux.
func (t *txConn) pending() bool { return !t.begun || len(t.queued) > 0 || t.mux != nil }

// send sends b on the connection, or with the other commands' statements
// through the batch's mux.
func (t *txConn) send(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.mux != nil {
		return t.mux.send(b)
	}
	return t.c.SendBatch(ctx, b)
}

func (t *txConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if !t.pending() {
		return t.c.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	begin, q := t.prefix(b)
	b.Queue(sql, args...)
	br := t.send(ctx, b)
	err := readPrefix(br, begin, q)
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (t *txConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if !t.pending() {
		return t.c.QueryRow(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	begin, q := t.prefix(b)
	b.Queue(sql, args...)
	br := t.send(ctx, b)
	if err := readPrefix(br, begin, q); err != nil {
		br.Close()
		return errRow{err}
	}
	return batchRow{row: br.QueryRow(), br: br}
}

func (t *txConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if !t.pending() {
		return t.c.Query(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	begin, q := t.prefix(b)
	b.Queue(sql, args...)
	br := t.send(ctx, b)
	if err := readPrefix(br, begin, q); err != nil {
		br.Close()
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return batchRows{Rows: rows, br: br}, nil
}

// SendBatch sends b after BEGIN and the queued statements; the caller
// reads b's own results, as from pgx.
func (t *txConn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if !t.pending() {
		return t.c.SendBatch(ctx, b)
	}
	all := &pgx.Batch{}
	begin, q := t.prefix(all)
	all.QueuedQueries = append(all.QueuedQueries, b.QueuedQueries...)
	br := t.send(ctx, all)
	if err := readPrefix(br, begin, q); err != nil {
		br.Close()
		return errBatch{err}
	}
	return br
}

// commit sends the queued statements, then tail (statements that must
// come last: the notification), then COMMIT, in one round trip. A
// transaction that sent nothing commits nothing.
func (t *txConn) commit(ctx context.Context, tail ...queued) error {
	t.queued = append(append(t.queued, t.hot()...), tail...)
	if !t.begun && len(t.queued) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	begin, q := t.prefix(b)
	b.Queue(`COMMIT`)
	br := t.c.SendBatch(ctx, b)
	err := readPrefix(br, begin, q)
	committed := false
	if err == nil {
		var tag pgconn.CommandTag
		if tag, err = br.Exec(); err == nil && tag.String() != "COMMIT" {
			// PostgreSQL answers COMMIT in a failed transaction with ROLLBACK.
			err = errRolledBack
		}
		if err != nil {
			err = fmt.Errorf("commit: %w", err)
		}
		committed = err == nil
	}
	if cerr := br.Close(); err == nil && cerr != nil && !committed {
		err = fmt.Errorf("commit: %w", cerr)
	}
	// Once PostgreSQL answered COMMIT, the transaction is committed: an
	// error of the connection after it (a server shutting down) does not
	// undo it, and the pool finds the connection broken at its next use.
	return err
}

// errRolledBack is a COMMIT that PostgreSQL answered with ROLLBACK.
var errRolledBack = errors.New("the transaction was rolled back")

// rollback ends a transaction that failed. When it cannot, the connection
// is closed rather than returned to the pool in a transaction.
func (t *txConn) rollback(ctx context.Context) {
	t.queued, t.quota, t.volumes, t.stats, t.counts, t.deltas, t.checks, t.checkedRows = nil, nil, nil, nil, nil, nil, nil, nil
	if !t.begun || t.c.Conn().PgConn().TxStatus() == 'I' {
		return // nothing began, or it ended (a COMMIT that failed rolls back)
	}
	t.begun = false
	if _, err := t.c.Exec(context.WithoutCancel(ctx), `ROLLBACK`); err != nil {
		_ = t.c.Conn().Close(context.WithoutCancel(ctx))
	}
}

// errRow is a row whose query failed before it ran.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// batchRow is the last result of a batch; reading it ends the batch.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil && cerr != nil && !errors.Is(cerr, pgx.ErrNoRows) {
		err = cerr
	}
	return err
}

// batchRows are the last result of a batch; closing them ends the batch.
type batchRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r batchRows) Close() {
	r.Rows.Close()
	_ = r.br.Close()
}

// errBatch answers err for every result.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow{b.err} }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }

// balanceKey is one account's balance in one currency.
type balanceKey struct{ account, currency string }

// sortedKeys returns the keys of m in compare's order: every transaction
// writes the hot rows in one fixed order, so that two never wait for each
// other's rows in opposite orders.
func sortedKeys[K comparable, V any](m map[K]V, compare func(a, b K) int) []K {
	return slices.SortedFunc(maps.Keys(m), compare)
}

// The hot rows a transaction adds to, summed and written at its COMMIT in
// one fixed order (quota, volume counters, stat counters, balances), so
// that two transactions never wait for each other's rows in opposite
// orders.

type volumeKey struct {
	scope string
	day   int64
}

type statRow struct {
	day         int64
	metric, key string
	shard       int
}

type statSum struct{ count, amount int64 }

// countRow is a count of transaction_counts (migration 00014).
type countRow struct{ merchant, mode, typ, status string }

// addCount adds delta to a transaction count at commit.
func (t *txConn) addCount(r countRow, delta int64) {
	if t.counts == nil {
		t.counts = map[countRow]int64{}
	}
	t.counts[r] += delta
}

// addVolume adds delta to a volume counter at commit.
func (t *txConn) addVolume(scope string, day, delta int64) {
	if t.volumes == nil {
		t.volumes = map[volumeKey]int64{}
	}
	t.volumes[volumeKey{scope, day}] += delta
}

// addStat adds to a stat counter at commit.
func (t *txConn) addStat(r statRow, count, amount int64) {
	if t.stats == nil {
		t.stats = map[statRow]statSum{}
	}
	s := t.stats[r]
	s.count += count
	s.amount += amount
	t.stats[r] = s
}

// hot returns the statements that write the summed hot rows, in the
// fixed order, and forgets the sums. The quota, the counters (volume,
// stats, counts) and the balance changes that need no check go in one
// statement, each table's upsert a data-modifying CTE that the final
// SELECT reads in that order: one statement's executor start-up instead
// of five.
func (t *txConn) hot() []queued {
	var out []queued
	var ctes, reads []string
	var args params
	arg := args.add
	// The quotas first (one, but for a batch of several merchants' commands
	// or windows), in their fixed order.
	slices.SortFunc(t.quota, func(a, b quotaCount) int {
		return cmp.Or(cmp.Compare(a.merchant, b.merchant), cmp.Compare(a.mode, b.mode), cmp.Compare(a.keyType, b.keyType),
			a.start.Compare(b.start), cmp.Compare(a.shard, b.shard))
	})
	for _, q := range t.quota {
		// Past the limit the statement raises quotaExceededCode: the
		// transaction rolls back, answered as ClaimQuotaExceeded.
		m, mode, kt, start, shard, n := arg(q.merchant), arg(q.mode), arg(q.keyType), arg(q.start), arg(q.shard), arg(q.n)
		c := fmt.Sprintf("c%d", len(ctes))
		ctes = append(ctes, `INSERT INTO idempotency_quota (merchant_id, mode, key_type, window_start, shard, count)
			VALUES (`+m+`, `+mode+`, `+kt+`, `+start+`, `+shard+`::smallint, `+n+`::bigint)
			ON CONFLICT (merchant_id, mode, key_type, window_start, shard)
			DO UPDATE SET count = idempotency_quota.count + excluded.count RETURNING count`)
		reads = append(reads, `CASE WHEN (SELECT count FROM `+c+`) + coalesce((SELECT sum(count) FROM idempotency_quota
				WHERE merchant_id = `+m+` AND mode = `+mode+` AND key_type = `+kt+` AND window_start = `+start+
			` AND shard <> `+shard+`), 0) > `+arg(q.limit)+`::bigint
			THEN xaalis_raise('`+quotaExceededCode+`', 'idempotency quota exceeded') ELSE 0 END`)
	}
	t.quota = nil
	if len(t.volumes) > 0 {
		keys := sortedKeys(t.volumes, func(a, b volumeKey) int {
			return cmp.Or(cmp.Compare(a.scope, b.scope), cmp.Compare(a.day, b.day))
		})
		scopes, days, amounts := make([]string, len(keys)), make([]int64, len(keys)), make([]int64, len(keys))
		for i, k := range keys {
			scopes[i], days[i], amounts[i] = k.scope, k.day, t.volumes[k]
		}
		ctes = append(ctes, `INSERT INTO volume_counters (scope, day, shard, amount)
			SELECT s, d, `+arg(t.shard)+`::smallint, a FROM unnest(`+arg(scopes)+`::text[], `+arg(days)+`::bigint[], `+
			arg(amounts)+`::bigint[]) WITH ORDINALITY AS u (s, d, a, n) ORDER BY u.n
			ON CONFLICT (scope, day, shard) DO UPDATE SET amount = volume_counters.amount + excluded.amount RETURNING 1`)
		t.volumes = nil
	}
	if len(t.stats) > 0 {
		keys := sortedKeys(t.stats, func(a, b statRow) int {
			return cmp.Or(cmp.Compare(a.day, b.day), cmp.Compare(a.metric, b.metric), cmp.Compare(a.key, b.key),
				cmp.Compare(a.shard, b.shard))
		})
		n := len(keys)
		days, metrics, ks, shards, counts, amounts := make([]int64, n), make([]string, n), make([]string, n), make([]int32, n),
			make([]int64, n), make([]int64, n)
		for i, k := range keys {
			s := t.stats[k]
			days[i], metrics[i], ks[i], shards[i], counts[i], amounts[i] = k.day, k.metric, k.key, int32(k.shard), s.count, s.amount
		}
		ctes = append(ctes, `INSERT INTO stat_counters (day, metric, key, shard, count, amount)
			SELECT d, m, k, s, c, a FROM unnest(`+arg(days)+`::bigint[], `+arg(metrics)+`::text[], `+arg(ks)+`::text[], `+
			arg(shards)+`::int[], `+arg(counts)+`::bigint[], `+arg(amounts)+`::bigint[])
				WITH ORDINALITY AS u (d, m, k, s, c, a, n) ORDER BY u.n
			ON CONFLICT (day, metric, key, shard)
			DO UPDATE SET count = stat_counters.count + excluded.count, amount = stat_counters.amount + excluded.amount
			RETURNING 1`)
		t.stats = nil
	}
	if len(t.counts) > 0 {
		keys := slices.DeleteFunc(sortedKeys(t.counts, func(a, b countRow) int {
			return cmp.Or(cmp.Compare(a.merchant, b.merchant), cmp.Compare(a.mode, b.mode), cmp.Compare(a.typ, b.typ),
				cmp.Compare(a.status, b.status))
		}), func(k countRow) bool { return t.counts[k] == 0 })
		if n := len(keys); n > 0 {
			ms, modes, types, statuses, ns := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
			for i, k := range keys {
				ms[i], modes[i], types[i], statuses[i], ns[i] = k.merchant, k.mode, k.typ, k.status, t.counts[k]
			}
			ctes = append(ctes, `INSERT INTO transaction_counts (merchant_id, mode, type, status, shard, n)
				SELECT m, o, y, s, `+arg(t.shard)+`::smallint, c FROM unnest(`+arg(ms)+`::text[], `+arg(modes)+`::text[], `+
				arg(types)+`::text[], `+arg(statuses)+`::text[], `+arg(ns)+`::bigint[])
					WITH ORDINALITY AS u (m, o, y, s, c, n) ORDER BY u.n
				ON CONFLICT (merchant_id, mode, type, status, shard) DO UPDATE SET n = transaction_counts.n + excluded.n
				RETURNING 1`)
		}
		t.counts = nil
	}
	// The balances, last, when they need no check (a payment's credits).
	if keys, ok := t.plainBalances(); ok {
		ctes = append(ctes, t.balanceUpsertSQL(keys, &args)+" RETURNING 1")
		t.deltas, t.checks = nil, nil
	}
	if len(ctes) > 0 {
		// The SELECT reads each CTE in turn, which runs it to its end:
		// the tables are written in this order in every transaction.
		var with []string
		for i, c := range ctes {
			with = append(with, fmt.Sprintf("c%d AS (%s)", i, c))
			if i >= len(reads) {
				reads = append(reads, fmt.Sprintf("(SELECT count(*) FROM c%d)", i))
			}
		}
		out = append(out, queued{op: "add counters", sql: "WITH " + strings.Join(with, ",\n") + "\nSELECT " +
			strings.Join(reads, ", "), args: args})
	}
	return append(out, t.balanceStatements()...)
}

// absorb adds the sums that a command of a batch kept (f, its own
// txConn) to the batch's, as if its statements had followed those of the
// commands absorbed before it: its balance checks count from the
// batch's changes so far.
func (t *txConn) absorb(f *txConn) {
	for _, q := range f.quota {
		t.addQuota(q)
	}
	for k, v := range f.volumes {
		t.addVolume(k.scope, k.day, v)
	}
	for k, v := range f.stats {
		t.addStat(k, v.count, v.amount)
	}
	for k, v := range f.counts {
		t.addCount(k, v)
	}
	if len(f.deltas) > 0 && t.deltas == nil {
		t.deltas = map[balanceKey]int64{}
	}
	for k, d := range f.deltas {
		base := t.deltas[k]
		for _, c := range f.checks[k] {
			if t.checks == nil {
				t.checks = map[balanceKey][]balanceCheck{}
			}
			t.checks[k] = append(t.checks[k], balanceCheck{prefix: base + c.prefix, amount: c.amount})
		}
		t.deltas[k] = base + d
	}
	for k, cs := range f.checked {
		if t.checked == nil {
			t.checked = map[balanceKey][]balanceCheck{}
		}
		t.checked[k] = append(t.checked[k], cs...)
	}
	if f.deltasAt.After(t.deltasAt) {
		t.deltasAt = f.deltasAt
	}
	t.checkedRows = append(t.checkedRows, f.checkedRows...)
}
