package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/xaalis/xaalis/internal/ledger"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// nonNegativeCheck is the CHECK constraint of 00003_money.sql that refuses
// a negative balance on a non-negative account; a violation names it.
const nonNegativeCheck = "ledger_balances_non_negative"

// isNonNegativeViolation reports a violation of nonNegativeCheck.
func isNonNegativeViolation(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code() == sqlite3.SQLITE_CONSTRAINT_CHECK &&
		strings.Contains(e.Error(), nonNegativeCheck)
}

// balanceDelta is what one entry adds to one cached balance.
type balanceDelta struct {
	account, currency string
	amount            int64
}

// deltas sums an entry's postings per account and currency, sorted so
// that concurrent entries touch balance rows in one order.
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
	slices.SortFunc(out, func(a, b balanceDelta) int {
		if c := strings.Compare(a.account, b.account); c != 0 {
			return c
		}
		return strings.Compare(a.currency, b.currency)
	})
	return out
}

// PostEntry writes a journal entry and its postings and adds them to the
// cached balances. On any error nothing of the entry stays written, though
// the caller still rolls back. An entry that no balance can refuse (no
// debit of a non-negative account, no debit of a merchant's available
// money without AllowDebt: payments, most status changes) leaves its
// balance changes to the writer batch, which sums its committed commands'
// and writes them once before its COMMIT: every payment of a merchant
// adds to the same rows. An entry that may be refused, or LockBalance,
// first writes every change still summed (flushBalances), then reads the
// balances as they stand.
func (t *Tx) PostEntry(ctx context.Context, e *ledger.Entry) error {
	if err := e.Validate(); err != nil {
		return err
	}
	ds := deltas(e.Postings)
	if !mayRefuse(e, ds) {
		if err := t.insertEntry(ctx, e); err != nil {
			return err
		}
		if t.balances == nil {
			t.balances = balanceBatch{}
		}
		for _, d := range ds {
			t.balances.add(balanceKey{d.account, d.currency}, d.amount, micros(e.CreatedAt))
		}
		return nil
	}
	if err := t.flushBalances(ctx); err != nil {
		return err
	}
	// The balances first, in one UPDATE of the rows that exist (every
	// account but an entry's first): when the CHECK refuses one row, the
	// statement changes none, and the entry is not written either. The
	// accounts that have no row yet are then inserted holding their delta,
	// a row that the CHECK judges whole. (An upsert of every account would
	// not do: on a conflict the CHECK judges the row proposed for
	// insertion, the bare delta, not the sum.)
	args := make([]any, 0, 1+3*len(ds))
	args = append(args, micros(e.CreatedAt))
	for _, d := range ds {
		args = append(args, d.account, d.currency, d.amount)
	}
	// The new balances come back: a merchant's available may end below
	// zero only through an entry that allows debt (ledger.MayOwe).
	rows, err := t.tx.QueryContext(ctx, `UPDATE ledger_balances SET balance = balance + d.column3, updated_at = ?
		FROM (VALUES `+values(len(ds), 3, "")+`) AS d
		WHERE ledger_balances.account = d.column1 AND ledger_balances.currency = d.column2
		RETURNING ledger_balances.account, ledger_balances.currency, ledger_balances.balance`, args...)
	var after []balanceRow
	if err == nil {
		after, err = scanBalances(rows, len(ds))
	}
	// updated: the UPDATE changed the rows. When it failed (its CHECK
	// refused a row), SQLite undid the whole statement: nothing to take
	// back.
	updated := err == nil
	if err == nil && len(after) < len(ds) {
		after, err = t.createBalances(ctx, e, ds, after)
	}
	if err == nil {
		err = checkOverdraft(e, ds, after)
	}
	if isNonNegativeViolation(err) {
		err = fmt.Errorf("%w: entry %s (%s)", ledger.ErrNegative, e.ID, e.Kind)
	}
	if errors.Is(err, ledger.ErrNegative) {
		if !updated {
			return err
		}
		// The UPDATE changed the balances before the refusal (an insert
		// or the overdraft check refused): take the deltas back, so that
		// a caller that goes on after the refusal finds the balances as
		// they were (no entry was written; a row created holds zero).
		if _, uerr := t.tx.ExecContext(ctx, `UPDATE ledger_balances SET balance = balance - d.column3
			FROM (VALUES `+values(len(ds), 3, "")+`) AS d
			WHERE ledger_balances.account = d.column1 AND ledger_balances.currency = d.column2`, args[1:]...); uerr != nil {
			return fmt.Errorf("undo balances: %w", uerr)
		}
		return err
	}
	if err != nil {
		return fmt.Errorf("update balances: %w", err)
	}
	return t.insertEntry(ctx, e)
}

// insertEntry writes an entry and its postings.
func (t *Tx) insertEntry(ctx context.Context, e *ledger.Entry) error {
	if _, err := t.tx.ExecContext(ctx, `INSERT INTO ledger_entries (id, mode, merchant_id, kind, ref_type, ref_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, e.ID, e.Mode, nullString(e.MerchantID), e.Kind, e.RefType, e.RefID,
		micros(e.CreatedAt)); err != nil {
		return fmt.Errorf("insert ledger entry: %w", err)
	}
	args := make([]any, 0, 5*len(e.Postings))
	for i, p := range e.Postings {
		args = append(args, e.ID, i+1, p.Account, p.Currency, p.Amount)
	}
	if _, err := t.tx.ExecContext(ctx, `INSERT INTO ledger_postings (entry_id, line, account, currency, amount)
		VALUES `+values(len(e.Postings), 5, ""), args...); err != nil {
		return fmt.Errorf("insert ledger postings: %w", err)
	}
	return nil
}

// mayRefuse reports whether a balance may refuse an entry: it debits a
// non-negative account, or a merchant's available money without
// AllowDebt.
func mayRefuse(e *ledger.Entry, ds []balanceDelta) bool {
	for _, d := range ds {
		if (d.amount < 0 && ledger.NonNegative(d.account)) || e.DebitChecked(d.account, d.amount) {
			return true
		}
	}
	return false
}

// balanceKey is one cached balance row.
type balanceKey struct {
	account, currency string
}

// balanceChange is what entries add to one cached balance, and the newest
// entry's time (micros), the row's updated_at.
type balanceChange struct {
	amount, at int64
}

// balanceBatch sums the balance changes of entries that no balance can
// refuse (PostEntry): a command's, then its writer batch's committed
// commands'. Only credits of a non-negative account are summed, so a
// row created holding a sum passes its CHECK.
type balanceBatch map[balanceKey]balanceChange

func (b balanceBatch) add(k balanceKey, amount, at int64) {
	c := b[k]
	c.amount += amount
	c.at = max(c.at, at)
	b[k] = c
}

// merge adds o's changes to b.
func (b balanceBatch) merge(o balanceBatch) {
	for k, c := range o {
		b.add(k, c.amount, c.at)
	}
}

// write writes b's changes in (account, currency) order, in statements of
// up to 100 rows, creating the rows that are missing, and empties b.
func (b balanceBatch) write(ctx context.Context, q querier) error {
	keys := make([]balanceKey, 0, len(b))
	for k := range b {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y balanceKey) int {
		if c := strings.Compare(x.account, y.account); c != 0 {
			return c
		}
		return strings.Compare(x.currency, y.currency)
	})
	for chunk := range slices.Chunk(keys, 100) {
		args := make([]any, 0, 5*len(chunk))
		for _, k := range chunk {
			c := b[k]
			args = append(args, k.account, k.currency, boolInt(ledger.NonNegative(k.account)), c.amount, c.at)
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO ledger_balances (account, currency, non_negative, balance, updated_at)
			VALUES `+values(len(chunk), 5, "")+`
			ON CONFLICT (account, currency) DO UPDATE SET balance = balance + excluded.balance,
				updated_at = max(coalesce(updated_at, 0), excluded.updated_at)`, args...); err != nil {
			return fmt.Errorf("write balances: %w", err)
		}
	}
	clear(b)
	return nil
}

// flushBalances writes the balance changes still summed, the batch's and
// the command's, ahead of a statement that reads balances. The batch's
// are kept in flushed: if the command rolls back to its savepoint, their
// write goes with it, and the writer gives them back to the batch.
func (t *Tx) flushBalances(ctx context.Context) error {
	if len(t.balances) == 0 && len(t.batch) == 0 {
		return nil
	}
	all := balanceBatch{}
	all.merge(t.batch)
	all.merge(t.balances)
	if err := all.write(ctx, t.tx); err != nil {
		return err
	}
	if t.flushed == nil {
		t.flushed = balanceBatch{}
	}
	t.flushed.merge(t.batch)
	clear(t.batch)
	clear(t.balances)
	return nil
}

// balanceRow is a cached balance after an entry's deltas.
type balanceRow struct {
	account, currency string
	balance           int64
}

// scanBalances reads the rows an UPDATE … RETURNING account, currency,
// balance gave back.
func scanBalances(rows *sql.Rows, n int) ([]balanceRow, error) {
	defer rows.Close()
	out := make([]balanceRow, 0, n)
	for rows.Next() {
		var b balanceRow
		if err := rows.Scan(&b.account, &b.currency, &b.balance); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// createBalances inserts the balance rows of an entry's accounts that have
// none yet, each holding its delta, and returns after with them added.
// The transaction holds SQLite's one write lock: no other writer can have
// created them since the UPDATE missed them.
func (t *Tx) createBalances(ctx context.Context, e *ledger.Entry, ds []balanceDelta, after []balanceRow) ([]balanceRow, error) {
	args := make([]any, 0, 5*(len(ds)-len(after)))
	n := 0
	for _, d := range ds {
		if slices.ContainsFunc(after, func(b balanceRow) bool { return b.account == d.account && b.currency == d.currency }) {
			continue
		}
		args = append(args, d.account, d.currency, boolInt(ledger.NonNegative(d.account)), d.amount, micros(e.CreatedAt))
		after = append(after, balanceRow{d.account, d.currency, d.amount})
		n++
	}
	if _, err := t.tx.ExecContext(ctx, `INSERT INTO ledger_balances (account, currency, non_negative, balance, updated_at)
		VALUES `+values(n, 5, ""), args...); err != nil {
		return nil, fmt.Errorf("create balances: %w", err)
	}
	return after, nil
}

// checkOverdraft refuses (ledger.ErrNegative) an entry whose debit leaves
// a merchant's available below zero, after holding the accounts' new
// balances, when the entry does not allow debt.
func checkOverdraft(e *ledger.Entry, ds []balanceDelta, after []balanceRow) error {
	for _, b := range after {
		for _, d := range ds {
			if d.account == b.account && d.currency == b.currency && e.Overdrawn(b.account, d.amount, b.balance) {
				return fmt.Errorf("%w: entry %s (%s) takes %s to %d %s", ledger.ErrNegative, e.ID, e.Kind, b.account, b.balance, b.currency)
			}
		}
	}
	return nil
}

// values makes n parenthesised groups of k placeholders, each followed by
// extra.
func values(n, k int, extra string) string {
	group := "(?" + strings.Repeat(", ?", k-1) + extra + ")"
	return group + strings.Repeat(", "+group, n-1)
}

// LockBalance returns an account's cached balance, creating it at zero.
// The write transaction holds SQLite's single write lock already.
func (t *Tx) LockBalance(ctx context.Context, account string, currency xaalis.Currency) (int64, error) {
	if err := t.flushBalances(ctx); err != nil {
		return 0, err
	}
	if _, err := t.tx.ExecContext(ctx, `INSERT INTO ledger_balances (account, currency, balance, non_negative)
		VALUES (?, ?, 0, ?) ON CONFLICT DO NOTHING`, account, currency, boolInt(ledger.NonNegative(account))); err != nil {
		return 0, fmt.Errorf("create balance: %w", err)
	}
	var b int64
	if err := t.tx.QueryRowContext(ctx, `SELECT balance FROM ledger_balances WHERE account = ? AND currency = ?`,
		account, currency).Scan(&b); err != nil {
		return 0, fmt.Errorf("read balance: %w", err)
	}
	return b, nil
}

// Balances reads the cached balances of accounts in one query.
func (s *Store) Balances(ctx context.Context, accounts []string, currency xaalis.Currency) (map[string]int64, time.Time, error) {
	out := make(map[string]int64, len(accounts))
	var newest time.Time
	if len(accounts) == 0 {
		return out, newest, nil
	}
	args := []any{currency}
	for _, a := range accounts {
		out[a] = 0
		args = append(args, a)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT account, balance, updated_at FROM ledger_balances
		WHERE currency = ? AND account IN (?`+strings.Repeat(", ?", len(accounts)-1)+`)`, args...)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read balances: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a string
		var b int64
		var at sql.NullInt64
		if err := rows.Scan(&a, &b, &at); err != nil {
			return nil, time.Time{}, fmt.Errorf("read balances: %w", err)
		}
		out[a] = b
		if at.Valid && fromMicros(at.Int64).After(newest) {
			newest = fromMicros(at.Int64)
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
	rows, err := s.read.QueryContext(ctx, `SELECT entry_id, currency, sum(amount) FROM ledger_postings
		GROUP BY entry_id, currency HAVING sum(amount) <> 0`)
	if err != nil {
		return nil, fmt.Errorf("check entries: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		p := ledger.Problem{Kind: "unbalanced_entry"}
		if err := rows.Scan(&p.EntryID, &p.Currency, &p.Posted); err != nil {
			return nil, fmt.Errorf("check entries: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("check entries: %w", err)
	}
	rows.Close()
	// Both sides of the comparison in one pass: an account with postings
	// and no cached row, or a cached row without postings, still shows.
	rows, err = s.read.QueryContext(ctx, `SELECT account, currency, sum(cached), sum(posted) FROM (
			SELECT account, currency, balance AS cached, 0 AS posted FROM ledger_balances
			UNION ALL
			SELECT account, currency, 0, amount FROM ledger_postings
		) GROUP BY account, currency HAVING sum(cached) <> sum(posted)`)
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
	counts, err := checkCounts(ctx, s.read)
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
	rows, err := s.read.QueryContext(ctx, `SELECT e.id, e.mode, e.merchant_id, e.kind, e.ref_type, e.ref_id, e.created_at,
			p.account, p.currency, p.amount
		FROM ledger_entries e JOIN ledger_postings p ON p.entry_id = e.id
		WHERE e.ref_id = ? ORDER BY e.rowid, p.line`, refID)
	if err != nil {
		return nil, fmt.Errorf("list entries: %w", err)
	}
	defer rows.Close()
	var out []*ledger.Entry
	for rows.Next() {
		var e ledger.Entry
		var merchant sql.NullString
		var created int64
		var p ledger.Posting
		if err := rows.Scan(&e.ID, &e.Mode, &merchant, &e.Kind, &e.RefType, &e.RefID, &created,
			&p.Account, &p.Currency, &p.Amount); err != nil {
			return nil, fmt.Errorf("list entries: %w", err)
		}
		if n := len(out); n == 0 || out[n-1].ID != e.ID {
			e.MerchantID, e.CreatedAt = merchant.String, fromMicros(created)
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
// total_count) with the rows, in one statement: one snapshot.
func checkCounts(ctx context.Context, q querier) ([]ledger.Problem, error) {
	return queryAll(ctx, q, "check transaction counts", func(sc func(...any) error) (ledger.Problem, error) {
		p := ledger.Problem{Kind: ledger.CountMismatch}
		var merchant, mode, typ, status string
		if err := sc(&merchant, &mode, &typ, &status, &p.Cached, &p.Posted); err != nil {
			return p, fmt.Errorf("check transaction counts: %w", err)
		}
		p.Counted = merchant + " " + mode + " " + typ + " " + status
		return p, nil
	}, `SELECT merchant_id, mode, type, status, sum(cached), sum(counted) FROM (
			SELECT merchant_id, mode, type, status, n AS cached, 0 AS counted FROM transaction_counts
			UNION ALL
			SELECT merchant_id, mode, type, status, 0, count(*) FROM transactions GROUP BY merchant_id, mode, type, status
		) GROUP BY merchant_id, mode, type, status HAVING sum(cached) <> sum(counted)`)
}
