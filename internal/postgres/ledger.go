package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// deltas sums an entry's postings per account and currency, sorted so
// that concurrent entries lock balance rows in one order (no deadlock
// between two entries touching the same accounts).
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
// cached balances. An entry none of whose debits can be refused (credits,
// debits of accounts without a floor, debts an entry allows) is queued:
// its rows go with the next statement, and its balance changes, summed
// with the transaction's others, at COMMIT (a merchant's balance is a hot
// row: locked for the commit only). An entry with a debit to check is
// written now, its balances locked, added and checked in one round trip.
// Any error aborts the transaction: the caller must roll back.
func (t *Tx) PostEntry(ctx context.Context, e *ledger.Entry) error {
	if err := e.Validate(); err != nil {
		return err
	}
	n := len(e.Postings)
	accounts, currencies, amounts := make([]string, n), make([]string, n), make([]int64, n)
	for i, p := range e.Postings {
		accounts[i], currencies[i], amounts[i] = p.Account, p.Currency, p.Amount
	}
	t.tx.later("insert ledger entry", `INSERT INTO ledger_entries (id, mode, merchant_id, kind, ref_type, ref_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, e.ID, e.Mode, nullString(e.MerchantID), e.Kind, e.RefType, e.RefID, e.CreatedAt)
	t.tx.later("insert ledger postings", `INSERT INTO ledger_postings (entry_id, line, account, currency, amount)
		SELECT $1::text, u.line, u.account, u.currency, u.amount
		FROM unnest($2::text[], $3::text[], $4::bigint[]) WITH ORDINALITY AS u (account, currency, amount, line)`,
		e.ID, accounts, currencies, amounts)
	ds := deltas(e.Postings)
	if !needsCheck(e, ds) {
		t.tx.addDeltas(ds, e.CreatedAt)
		return nil
	}
	// The transaction's earlier changes first, so that the check sees
	// them.
	t.tx.flushDeltas()
	bAccounts, bCurrencies, bAmounts, bNonNeg := make([]string, len(ds)), make([]string, len(ds)), make([]int64, len(ds)),
		make([]bool, len(ds))
	for i, d := range ds {
		bAccounts[i], bCurrencies[i], bAmounts[i], bNonNeg[i] = d.account, d.currency, d.amount, ledger.NonNegative(d.account)
	}
	b := &pgx.Batch{}
	// Create missing rows at zero, lock every shard of them in deltas
	// order, then add every delta to shard 0 in one statement: when the
	// CHECK refuses one row, none is changed. (An upsert would not do: the
	// CHECK judges the row proposed for insertion, the bare delta.) An
	// account that may not go below zero has shard 0 only.
	b.Queue(`INSERT INTO ledger_balances (account, currency, shard, balance, non_negative)
		SELECT u.account, u.currency, 0, 0, u.non_negative
		FROM unnest($1::text[], $2::text[], $3::boolean[]) WITH ORDINALITY AS u (account, currency, non_negative, n)
		ORDER BY u.n
		ON CONFLICT (account, currency, shard) DO NOTHING`, bAccounts, bCurrencies, bNonNeg)
	b.Queue(`SELECT 1 FROM ledger_balances
		WHERE (account, currency) IN (SELECT * FROM unnest($1::text[], $2::text[]))
		ORDER BY account, currency, shard FOR UPDATE`, bAccounts, bCurrencies)
	b.Queue(`UPDATE ledger_balances AS b SET balance = b.balance + u.amount, updated_at = $4
		FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u (account, currency, amount)
		WHERE b.account = u.account AND b.currency = u.currency AND b.shard = 0`, bAccounts, bCurrencies, bAmounts, e.CreatedAt)
	// The new balances, every shard locked above: a merchant's available
	// may end below zero only through an entry that allows debt
	// (ledger.MayOwe).
	b.Queue(`SELECT account, currency, sum(balance)::bigint FROM ledger_balances
		WHERE (account, currency) IN (SELECT * FROM unnest($1::text[], $2::text[]))
		GROUP BY account, currency`, bAccounts, bCurrencies)
	br := t.tx.SendBatch(ctx, b)
	err := func() error {
		for _, op := range []string{"create balances", "lock balances", "update balances"} {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("%s: %w", op, err)
			}
		}
		rows, err := br.Query()
		if err == nil {
			err = func() error {
				defer rows.Close()
				for rows.Next() {
					var acc, cur string
					var bal int64
					if err := rows.Scan(&acc, &cur, &bal); err != nil {
						return err
					}
					for _, d := range ds {
						if d.account == acc && d.currency == cur && e.Overdrawn(acc, d.amount, bal) {
							return fmt.Errorf("%w: entry %s (%s) takes %s to %d %s", ledger.ErrNegative, e.ID, e.Kind, acc, bal, cur)
						}
					}
				}
				return rows.Err()
			}()
		}
		if err != nil && !errors.Is(err, ledger.ErrNegative) {
			return fmt.Errorf("read balances: %w", err)
		}
		return err
	}()
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "23514" && pe.ConstraintName == nonNegativeCheck {
		err = fmt.Errorf("%w: entry %s (%s)", ledger.ErrNegative, e.ID, e.Kind)
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("post entry: %w", cerr)
	}
	return err
}

// needsCheck reports whether one of an entry's debits may be refused: a
// debit of an account that may not go below zero, or of a merchant's
// available money in an entry that does not allow debt.
func needsCheck(e *ledger.Entry, ds []balanceDelta) bool {
	for _, d := range ds {
		if d.amount < 0 && (ledger.NonNegative(d.account) || (ledger.MayOwe(d.account) && !e.AllowDebt)) {
			return true
		}
	}
	return false
}

// addDeltas adds an entry's balance changes to those written at COMMIT.
func (t *txConn) addDeltas(ds []balanceDelta, at time.Time) {
	if t.deltas == nil {
		t.deltas = map[balanceKey]int64{}
	}
	for _, d := range ds {
		t.deltas[balanceKey{d.account, d.currency}] += d.amount
	}
	if at.After(t.deltasAt) {
		t.deltasAt = at
	}
}

// flushDeltas queues the summed balance changes now, ahead of a statement
// that reads or checks balances.
func (t *txConn) flushDeltas() {
	if q := t.balanceUpsert(); q != nil {
		t.queued = append(t.queued, *q)
	}
}

// balanceUpsert is the statement that adds the summed balance changes,
// rows in (account, currency) order, or nil when there are none. None of
// them is a debit a floor could refuse (needsCheck), so an upsert is
// right: the CHECK of a new row judges a delta of zero or more.
func (t *txConn) balanceUpsert() *queued {
	if len(t.deltas) == 0 {
		return nil
	}
	keys := sortedKeys(t.deltas, func(a, b balanceKey) int {
		return cmp.Or(cmp.Compare(a.account, b.account), cmp.Compare(a.currency, b.currency))
	})
	accounts, currencies, amounts, nonNeg := make([]string, len(keys)), make([]string, len(keys)), make([]int64, len(keys)),
		make([]bool, len(keys))
	for i, k := range keys {
		accounts[i], currencies[i], amounts[i], nonNeg[i] = k.account, k.currency, t.deltas[k], ledger.NonNegative(k.account)
	}
	t.deltas = nil
	// The transaction's shard of each account; an account with a floor
	// stays whole (shard 0).
	return &queued{op: "update balances", sql: `INSERT INTO ledger_balances (account, currency, shard, balance, non_negative, updated_at)
		SELECT u.account, u.currency, CASE WHEN u.non_negative THEN 0 ELSE $6 END, u.amount, u.non_negative, $5
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::boolean[]) WITH ORDINALITY AS u (account, currency, amount, non_negative, n)
		ORDER BY u.n
		ON CONFLICT (account, currency, shard) DO UPDATE SET balance = ledger_balances.balance + excluded.balance,
			updated_at = excluded.updated_at`, args: []any{accounts, currencies, amounts, nonNeg, t.deltasAt, t.shard}}
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

// CheckLedger finds entries that do not sum to zero and cached balances
// that differ from the sum of their postings.
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
