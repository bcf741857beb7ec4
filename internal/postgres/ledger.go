package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/xaalis/xaalis/internal/ledger"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// nonNegativeCheck is the CHECK constraint of 00003_money.sql that refuses
// a negative balance on a non-negative account; a violation names it.
const nonNegativeCheck = "ledger_balances_non_negative"

// balanceDelta is what one entry adds to one cached balance.
type balanceDelta struct {
	account, currency string
	amount            int64
}

// deltas sums an entry's postings per account and currency: a debit to
// check is the entry's net change of the account. (The rows are locked
// in one order at commit, balanceStatements.)
func deltas(ps []ledger.Posting) []balanceDelta {
	var out []balanceDelta
	for _, p := range ps {
		i := slices.IndexFunc(out, func(d balanceDelta) bool { return d.account == p.Account && d.currency == p.Currency })
		if i < 0 {
			out = append(out, balanceDelta{p.Account, p.Currency, p.Amount})
		} else {
			out[i].amount += p.Amount
		}
	}
	return out
}

// PostEntry writes a journal entry and its postings and adds them to the
// cached balances. Its rows go with the next statement; its balance
// changes are summed with the transaction's others and written at COMMIT,
// in the same round trip (a merchant's balance is a hot row: locked for
// the commit only). A debit that may be refused is checked there too:
// a debit of a merchant's available money in an entry that does not
// allow debt locks every shard of that balance and raises when the
// balance it would leave is below zero (the transaction's commit then
// fails with insufficient_balance); a debit of an account that may never
// go below zero is refused by the row's CHECK (ledger.ErrNegative).
func (t *Tx) PostEntry(ctx context.Context, e *ledger.Entry) error {
	if err := e.Validate(); err != nil {
		return err
	}
	n := len(e.Postings)
	accounts, currencies, amounts := make([]string, n), make([]string, n), make([]int64, n)
	for i, p := range e.Postings {
		accounts[i], currencies[i], amounts[i] = p.Account, p.Currency, p.Amount
	}
	// One statement for the entry and its postings: the postings' foreign
	// key is checked at the statement's end, when the entry is there.
	rows := []queued{{op: "insert ledger entry", sql: insertEntrySQL, rows: entryRows{},
		args: []any{e.ID, e.Mode, nullString(e.MerchantID), e.Kind, e.RefType, e.RefID, e.CreatedAt, accounts, currencies, amounts}}}
	if t.tx.addEntry(e, deltas(e.Postings)) {
		// An entry with a checked debit is written after its check has
		// locked the balance: entries that lower a merchant's available
		// money are numbered (ledger_entries.seq) in the order they took
		// effect, as every other debit of it, which locks it first.
		rows[0].rows = nil // written in its place, after its check, never merged
		t.tx.checkedRows = append(t.tx.checkedRows, rows...)
		return nil
	}
	t.tx.queued = append(t.tx.queued, rows...)
	return nil
}

// insertEntrySQL inserts an entry and its postings, PostEntry's
// arguments in order.
var insertEntrySQL = `WITH e AS (` + entryValues.sql(1) + `)
	INSERT INTO ledger_postings (entry_id, line, account, currency, amount)
	SELECT $1::text, u.line, u.account, u.currency, u.amount
	FROM unnest($8::text[], $9::text[], $10::bigint[]) WITH ORDINALITY AS u (account, currency, amount, line)`

// entryRows merges the entries of a batch (group.go): the entries in one
// multi-row VALUES, all their postings in one unnest.
type entryRows struct{}

var entryValues = newValuesRows(`INSERT INTO ledger_entries (id, mode, merchant_id, kind, ref_type, ref_id, created_at)`,
	`($1, $2, $3, $4, $5, $6, $7)`, "")

func (entryRows) merged(rows [][]any) (string, []any) {
	args := make([]any, 0, len(rows)*7+5)
	var ids, accounts, currencies []string
	var lines []int32
	var amounts []int64
	for _, r := range rows {
		args = append(args, r[:7]...)
		as, cs, ms := r[7].([]string), r[8].([]string), r[9].([]int64)
		for i := range as {
			ids, lines = append(ids, r[0].(string)), append(lines, int32(i+1))
		}
		accounts, currencies, amounts = append(accounts, as...), append(currencies, cs...), append(amounts, ms...)
	}
	args = append(args, ids, lines, accounts, currencies, amounts)
	return entriesSQL(len(rows)), args
}

var entryTexts sync.Map // n -> string

// entriesSQL inserts n entries, then their postings from five arrays.
func entriesSQL(n int) string {
	if s, ok := entryTexts.Load(n); ok {
		return s.(string)
	}
	p := func(k int) string { return "$" + strconv.Itoa(n*7+k) }
	s := `WITH e AS (` + entryValues.sql(n) + `)
	INSERT INTO ledger_postings (entry_id, line, account, currency, amount)
	SELECT u.entry_id, u.line, u.account, u.currency, u.amount
	FROM unnest(` + p(1) + `::text[], ` + p(2) + `::int[], ` + p(3) + `::text[], ` + p(4) + `::text[], ` + p(5) + `::bigint[])
		AS u (entry_id, line, account, currency, amount)`
	entryTexts.Store(n, s)
	return s
}

// balanceCheck is a debit of a merchant's available money, checked at
// COMMIT (or when the balance changes are written earlier, ahead of a
// LockBalance): the balance it leaves is the balance of the moment plus
// prefix, the transaction's change to the account up to and including
// the debit since its changes were last written.
type balanceCheck struct {
	prefix int64
	amount int64 // the debit, > 0
}

// addEntry adds an entry's balance changes to those written at COMMIT,
// and the checks of its debits that may be refused; it reports whether
// the entry has one.
func (t *txConn) addEntry(e *ledger.Entry, ds []balanceDelta) (checked bool) {
	if t.deltas == nil {
		t.deltas = map[balanceKey]int64{}
	}
	for _, d := range ds {
		k := balanceKey{d.account, d.currency}
		t.deltas[k] += d.amount
		if e.DebitChecked(d.account, d.amount) {
			if t.checks == nil {
				t.checks = map[balanceKey][]balanceCheck{}
			}
			t.checks[k] = append(t.checks[k], balanceCheck{prefix: t.deltas[k], amount: -d.amount})
			checked = true
		}
	}
	if e.CreatedAt.After(t.deltasAt) {
		t.deltasAt = e.CreatedAt
	}
	return checked
}

// flushDeltas queues the summed balance changes and their checks now,
// ahead of a statement that reads or locks balances.
func (t *txConn) flushDeltas() {
	t.queued = append(t.queued, t.balanceStatements()...)
}

// balanceStatements are the statements that write the summed balance
// changes and make their checks, in (account, currency) order, so that two
// transactions never wait for each other's balance rows in opposite
// orders; it forgets the sums. Changes that need no check go in one
// upsert per run of accounts: a credit to the transaction's shard, a
// debit of a merchant's available money (a debt an entry allows) to shard
// 0, so that a check that locks the shards it sees misses no debit. An
// account with a check, or a debit of an account with a floor, is
// written alone to shard 0: its row created at zero if missing (an
// upsert would not do: the CHECK judges the row proposed for insertion,
// the bare delta), every shard locked and the check made, then the sum
// added.
func (t *txConn) balanceStatements() []queued {
	if len(t.deltas) == 0 && len(t.checkedRows) == 0 {
		return nil
	}
	keys := sortedKeys(t.deltas, func(a, b balanceKey) int {
		return cmp.Or(cmp.Compare(a.account, b.account), cmp.Compare(a.currency, b.currency))
	})
	var out []queued
	var run []balanceKey
	flush := func() {
		if len(run) > 0 {
			out = append(out, t.balanceUpsert(run))
			run = nil
		}
	}
	for _, k := range keys {
		d, cs, floor := t.deltas[k], t.checks[k], ledger.NonNegative(k.account)
		if len(cs) == 0 && (!floor || d >= 0) {
			run = append(run, k)
			continue
		}
		flush()
		out = append(out, queued{op: "create balance", sql: `INSERT INTO ledger_balances (account, currency, shard, balance, non_negative)
			VALUES ($1, $2, 0, 0, $3) ON CONFLICT (account, currency, shard) DO NOTHING`, args: []any{k.account, k.currency, floor}})
		if len(cs) > 0 {
			least := cs[0].prefix
			for _, c := range cs[1:] {
				least = min(least, c.prefix)
			}
			if t.checked == nil {
				t.checked = map[balanceKey][]balanceCheck{}
			}
			t.checked[k] = cs
			out = append(out, queued{op: "check balance", sql: `SELECT CASE WHEN b.base + $3 < 0
					THEN xaalis_raise('` + overdrawnCode + `', b.base::text || ' ' || $1 || ' ' || $2) ELSE 0 END
				FROM (SELECT coalesce(sum(balance), 0)::bigint AS base FROM (SELECT balance FROM ledger_balances
					WHERE account = $1 AND currency = $2 ORDER BY shard FOR UPDATE) AS s) AS b`,
				args: []any{k.account, k.currency, least}})
		}
		out = append(out, queued{op: "update balance", sql: `UPDATE ledger_balances SET balance = balance + $3, updated_at = $4
			WHERE account = $1 AND currency = $2 AND shard = 0`, args: []any{k.account, k.currency, d, t.deltasAt}})
	}
	flush()
	out = append(out, t.checkedRows...)
	t.deltas, t.checks, t.checkedRows = nil, nil, nil
	return out
}

// overdrawn is the insufficient_balance of a check that raised: the
// first debit of the account that the balance of the moment could not
// cover.
func (t *txConn) overdrawn(pe *pgconn.PgError) error {
	cause := fmt.Errorf("%w: %s", ledger.ErrNegative, pe.Message)
	f := strings.Fields(pe.Message)
	if len(f) != 3 {
		return cause
	}
	base, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return cause
	}
	for _, c := range t.checked[balanceKey{f[1], f[2]}] {
		if base+c.prefix < 0 {
			e := xaalis.InsufficientBalance(xaalis.Currency(f[2]), base+c.prefix+c.amount, c.amount)
			e.Cause = cause
			return e
		}
	}
	return cause
}

// ChecksAtCommit reports that PostEntry's checks are made at COMMIT
// (xaalis.CommitChecks).
func (t *Tx) ChecksAtCommit() bool { return true }

// balanceUpsert adds the summed changes of keys, none of which needs a
// check, rows in keys' order.
func (t *txConn) balanceUpsert(keys []balanceKey) queued {
	var args params
	sql := t.balanceUpsertSQL(keys, &args)
	return queued{op: "update balances", sql: sql, args: args}
}

// balanceUpsertSQL is balanceUpsert's statement, its parameters added
// to args.
func (t *txConn) balanceUpsertSQL(keys []balanceKey, args *params) string {
	arg := args.add
	n := len(keys)
	accounts, currencies, amounts := make([]string, n), make([]string, n), make([]int64, n)
	floor, zero := make([]bool, n), make([]bool, n)
	for i, k := range keys {
		d := t.deltas[k]
		accounts[i], currencies[i], amounts[i] = k.account, k.currency, d
		floor[i] = ledger.NonNegative(k.account)
		// An account with a floor stays whole (shard 0).
		zero[i] = floor[i] || (ledger.MayOwe(k.account) && d < 0)
	}
	return `INSERT INTO ledger_balances (account, currency, shard, balance, non_negative, updated_at)
		SELECT u.account, u.currency, CASE WHEN u.zero THEN 0 ELSE ` + arg(t.shard) + `::smallint END, u.amount, u.floor, ` +
		arg(t.deltasAt) + `::timestamptz
		FROM unnest(` + arg(accounts) + `::text[], ` + arg(currencies) + `::text[], ` + arg(amounts) + `::bigint[], ` +
		arg(floor) + `::boolean[], ` + arg(zero) + `::boolean[])
			WITH ORDINALITY AS u (account, currency, amount, floor, zero, n)
		ORDER BY u.n
		ON CONFLICT (account, currency, shard) DO UPDATE SET balance = ledger_balances.balance + excluded.balance,
			updated_at = excluded.updated_at`
}

// plainBalances returns the accounts of the summed balance changes, in
// order, when every one of them is a plain upsert (no check, no debit of
// an account with a floor, no entry written after a check): then one
// balanceUpsert writes them all.
func (t *txConn) plainBalances() ([]balanceKey, bool) {
	if len(t.deltas) == 0 || len(t.checkedRows) > 0 {
		return nil, false
	}
	keys := sortedKeys(t.deltas, func(a, b balanceKey) int {
		return cmp.Or(cmp.Compare(a.account, b.account), cmp.Compare(a.currency, b.currency))
	})
	for _, k := range keys {
		if len(t.checks[k]) > 0 || (ledger.NonNegative(k.account) && t.deltas[k] < 0) {
			return nil, false
		}
	}
	return keys, true
}

// LockBalance returns an account's cached balance, creating it at zero,
// and locks its row until the transaction ends. The insert and the locking
// read go in one round trip; at READ COMMITTED the read sees a row another
// transaction inserted and committed meanwhile, and waits for one that
// holds the lock.
func (t *Tx) LockBalance(ctx context.Context, account string, currency xaalis.Currency) (int64, error) {
	// The transaction's earlier changes first: the balance read includes
	// them.
	t.tx.flushDeltas()
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO ledger_balances (account, currency, shard, balance, non_negative) VALUES ($1, $2, 0, 0, $3)
		ON CONFLICT (account, currency, shard) DO NOTHING`, account, currency, ledger.NonNegative(account))
	// Every shard, locked: the sum holds until the transaction ends.
	b.Queue(`SELECT sum(balance)::bigint FROM (SELECT balance FROM ledger_balances
		WHERE account = $1 AND currency = $2 ORDER BY shard FOR UPDATE) AS s`, account, currency)
	br := t.tx.SendBatch(ctx, b)
	var bal int64
	err := func() error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("create balance: %w", err)
		}
		if err := br.QueryRow().Scan(&bal); err != nil {
			return fmt.Errorf("lock balance: %w", err)
		}
		return nil
	}()
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("lock balance: %w", cerr)
	}
	return bal, err
}

// Balances reads the cached balances of accounts in one query.
func (s *Store) Balances(ctx context.Context, accounts []string, currency xaalis.Currency) (map[string]int64, time.Time, error) {
	out := make(map[string]int64, len(accounts))
	var newest time.Time
	if len(accounts) == 0 {
		return out, newest, nil
	}
	for _, a := range accounts {
		out[a] = 0
	}
	rows, err := s.pool.Query(ctx, `SELECT account, sum(balance)::bigint, max(updated_at) FROM ledger_balances
		WHERE currency = $1 AND account = ANY ($2) GROUP BY account`, currency, accounts)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read balances: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a string
		var b int64
		var at *time.Time
		if err := rows.Scan(&a, &b, &at); err != nil {
			return nil, time.Time{}, fmt.Errorf("read balances: %w", err)
		}
		out[a] = b
		if at != nil && at.After(newest) {
			newest = at.UTC()
		}
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, fmt.Errorf("read balances: %w", err)
	}
	return out, newest, nil
}

// CheckLedger finds entries that do not sum to zero, cached balances that
// differ from the sum of their postings and cached counts of transactions
// that differ from the rows.
func (s *Store) CheckLedger(ctx context.Context) ([]ledger.Problem, error) {
	var out []ledger.Problem
	rows, err := s.pool.Query(ctx, `SELECT entry_id, currency, sum(amount)::bigint FROM ledger_postings
		GROUP BY entry_id, currency HAVING sum(amount) <> 0`)
	if err != nil {
		return nil, fmt.Errorf("check entries: %w", err)
	}
	for rows.Next() {
		p := ledger.Problem{Kind: "unbalanced_entry"}
		if err := rows.Scan(&p.EntryID, &p.Currency, &p.Posted); err != nil {
			rows.Close()
			return nil, fmt.Errorf("check entries: %w", err)
		}
		out = append(out, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("check entries: %w", err)
	}
	// Both sides of the comparison in one pass: an account with postings
	// and no cached row, or a cached row without postings, still shows.
	rows, err = s.pool.Query(ctx, `SELECT account, currency, sum(cached)::bigint, sum(posted)::bigint FROM (
			SELECT account, currency, balance AS cached, 0::bigint AS posted FROM ledger_balances
			UNION ALL
			SELECT account, currency, 0, amount FROM ledger_postings
		) AS a GROUP BY account, currency HAVING sum(cached) <> sum(posted)`)
	if err != nil {
		return nil, fmt.Errorf("check balances: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		p := ledger.Problem{Kind: "balance_mismatch"}
		if err := rows.Scan(&p.Account, &p.Currency, &p.Cached, &p.Posted); err != nil {
			return nil, fmt.Errorf("check balances: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("check balances: %w", err)
	}
	counts, err := s.checkCounts(ctx)
	if err != nil {
		return nil, err
	}
	out = append(out, counts...)
	ledger.Sort(out)
	return out, nil
}

// Entries returns the entries of a record with their postings, in
// insertion order.
func (s *Store) Entries(ctx context.Context, refID string) ([]*ledger.Entry, error) {
	rows, err := s.pool.Query(ctx, `SELECT e.id, e.mode, e.merchant_id, e.kind, e.ref_type, e.ref_id, e.created_at,
			p.account, p.currency, p.amount
		FROM ledger_entries e JOIN ledger_postings p ON p.entry_id = e.id
		WHERE e.ref_id = $1 ORDER BY e.seq, p.line`, refID)
	if err != nil {
		return nil, fmt.Errorf("list entries: %w", err)
	}
	defer rows.Close()
	var out []*ledger.Entry
	for rows.Next() {
		var e ledger.Entry
		var merchant *string
		var p ledger.Posting
		if err := rows.Scan(&e.ID, &e.Mode, &merchant, &e.Kind, &e.RefType, &e.RefID, &e.CreatedAt,
			&p.Account, &p.Currency, &p.Amount); err != nil {
			return nil, fmt.Errorf("list entries: %w", err)
		}
		if n := len(out); n == 0 || out[n-1].ID != e.ID {
			if merchant != nil {
				e.MerchantID = *merchant
			}
			e.CreatedAt = e.CreatedAt.UTC()
			out = append(out, &e)
		}
		last := out[len(out)-1]
		last.Postings = append(last.Postings, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list entries: %w", err)
	}
	return out, nil
}

// checkCounts compares the cached counts of transactions (the lists'
// total_count, summed over their shards) with the rows, in one statement:
// one snapshot.
func (s *Store) checkCounts(ctx context.Context) ([]ledger.Problem, error) {
	return queryAll(ctx, s.pool, "check transaction counts", func(op string, r interface{ Scan(...any) error }) (ledger.Problem, error) {
		p := ledger.Problem{Kind: ledger.CountMismatch}
		var merchant, mode, typ, status string
		if err := r.Scan(&merchant, &mode, &typ, &status, &p.Cached, &p.Posted); err != nil {
			return p, fmt.Errorf("%s: %w", op, err)
		}
		p.Counted = merchant + " " + mode + " " + typ + " " + status
		return p, nil
	}, `SELECT merchant_id, mode, type, status, sum(cached)::bigint, sum(counted)::bigint FROM (
			SELECT merchant_id, mode, type, status, n AS cached, 0::bigint AS counted FROM transaction_counts
			UNION ALL
			SELECT merchant_id, mode, type, status, 0, count(*) FROM transactions GROUP BY merchant_id, mode, type, status
		) AS c GROUP BY merchant_id, mode, type, status HAVING sum(cached) <> sum(counted)`)
}
