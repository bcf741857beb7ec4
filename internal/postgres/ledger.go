package postgres

import (
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
// cached balances, in one round trip. Any error aborts the transaction:
// the caller must roll back.
func (t *Tx) PostEntry(ctx context.Context, e *ledger.Entry) error {
	if err := e.Validate(); err != nil {
		return err
	}
	n := len(e.Postings)
	accounts, currencies, amounts := make([]string, n), make([]string, n), make([]int64, n)
	for i, p := range e.Postings {
		accounts[i], currencies[i], amounts[i] = p.Account, p.Currency, p.Amount
	}
	ds := deltas(e.Postings)
	bAccounts, bCurrencies, bAmounts, bNonNeg := make([]string, len(ds)), make([]string, len(ds)), make([]int64, len(ds)),
		make([]bool, len(ds))
	for i, d := range ds {
		bAccounts[i], bCurrencies[i], bAmounts[i], bNonNeg[i] = d.account, d.currency, d.amount, ledger.NonNegative(d.account)
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO ledger_entries (id, mode, merchant_id, kind, ref_type, ref_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, e.ID, e.Mode, nullString(e.MerchantID), e.Kind, e.RefType, e.RefID, e.CreatedAt)
	b.Queue(`INSERT INTO ledger_postings (entry_id, line, account, currency, amount)
		SELECT $1::text, u.line, u.account, u.currency, u.amount
		FROM unnest($2::text[], $3::text[], $4::bigint[]) WITH ORDINALITY AS u (account, currency, amount, line)`,
		e.ID, accounts, currencies, amounts)
	// Create missing rows at zero, lock them all in deltas order, then add
	// every delta in one statement: when the CHECK refuses one row, none is
	// changed. (An upsert would not do: the CHECK judges the row proposed
	// for insertion, the bare delta.)
	b.Queue(`INSERT INTO ledger_balances (account, currency, balance, non_negative)
		SELECT u.account, u.currency, 0, u.non_negative
		FROM unnest($1::text[], $2::text[], $3::boolean[]) WITH ORDINALITY AS u (account, currency, non_negative, n)
		ORDER BY u.n
		ON CONFLICT (account, currency) DO NOTHING`, bAccounts, bCurrencies, bNonNeg)
	b.Queue(`SELECT 1 FROM ledger_balances
		WHERE (account, currency) IN (SELECT * FROM unnest($1::text[], $2::text[]))
		ORDER BY account, currency FOR UPDATE`, bAccounts, bCurrencies)
	b.Queue(`UPDATE ledger_balances AS b SET balance = b.balance + u.amount, updated_at = $4
		FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u (account, currency, amount)
		WHERE b.account = u.account AND b.currency = u.currency`, bAccounts, bCurrencies, bAmounts, e.CreatedAt)
	br := t.tx.SendBatch(ctx, b)
	err := func() error {
		for _, op := range []string{"insert ledger entry", "insert ledger postings", "create balances", "lock balances"} {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("%s: %w", op, err)
			}
		}
		if _, err := br.Exec(); err != nil {
			if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "23514" && pe.ConstraintName == nonNegativeCheck {
				return fmt.Errorf("%w: entry %s (%s)", ledger.ErrNegative, e.ID, e.Kind)
			}
			return fmt.Errorf("update balances: %w", err)
		}
		return nil
	}()
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("post entry: %w", cerr)
	}
	return err
}

// LockBalance returns an account's cached balance, creating it at zero,
// and locks its row until the transaction ends. The insert and the locking
// read go in one round trip; at READ COMMITTED the read sees a row another
// transaction inserted and committed meanwhile, and waits for one that
// holds the lock.
func (t *Tx) LockBalance(ctx context.Context, account string, currency xaalis.Currency) (int64, error) {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO ledger_balances (account, currency, balance, non_negative) VALUES ($1, $2, 0, $3)
		ON CONFLICT (account, currency) DO NOTHING`, account, currency, ledger.NonNegative(account))
	b.Queue(`SELECT balance FROM ledger_balances WHERE account = $1 AND currency = $2 FOR UPDATE`, account, currency)
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
	rows, err := s.pool.Query(ctx, `SELECT account, balance, updated_at FROM ledger_balances
		WHERE currency = $1 AND account = ANY ($2)`, currency, accounts)
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
