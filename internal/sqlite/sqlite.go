// Package sqlite is the Store on an embedded SQLite database
// (modernc.org/sqlite, no cgo), configured for money: WAL, synchronous=FULL,
// foreign keys, a busy timeout, and one writer connection beside a pool of
// readers.
package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/xaalis/xaalis/internal/xaalis"
)

//go:embed migration/*.sql
var migrations embed.FS

// Store is the SQLite Store.
type Store struct {
	write *sql.DB // one connection: SQLite has one writer at a time
	read  *sql.DB
}

var _ xaalis.Store = (*Store)(nil)

// ParseURL turns "sqlite://./dir/x.db", "sqlite:///abs/x.db" or a bare
// path into a file path.
func ParseURL(u string) (string, error) {
	const p = "sqlite://"
	if len(u) >= len(p) && u[:len(p)] == p {
		u = u[len(p):]
	} else if len(u) >= 7 && u[:7] == "sqlite:" {
		u = u[7:]
	}
	if u == "" {
		return "", errors.New("sqlite: empty database path")
	}
	return u, nil
}

func dsn(path string, write bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "journal_mode(WAL)")
	if write {
		// BEGIN IMMEDIATE takes the write lock at the start of a transaction,
		// so two processes never deadlock upgrading a read lock.
		q.Set("_txlock", "immediate")
	} else {
		q.Add("_pragma", "query_only(1)")
	}
	return "file:" + path + "?" + q.Encode()
}

// Open opens (creating if need be) the database at path and applies the
// migrations.
func Open(ctx context.Context, path string) (*Store, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create database directory: %w", err)
		}
	}
	w, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, err
	}
	r, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite readers: %w", err)
	}
	n := max(4, runtime.NumCPU()*2)
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	return &Store{write: w, read: r}, nil
}

func migrate(ctx context.Context, db *sql.DB) error {
	sub, err := fs.Sub(migrations, "migration")
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, sub)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// Close closes both pools.
func (s *Store) Close() error {
	return errors.Join(s.read.Close(), s.write.Close())
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	return s.read.QueryRowContext(ctx, `SELECT 1`).Scan(&one)
}

// Pepper returns the installation's key-hashing secret.
func (s *Store) Pepper(ctx context.Context) ([]byte, error) {
	var v []byte
	err := s.read.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = 'key_pepper'`).Scan(&v)
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read pepper: %w", err)
	}
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	// Two processes may race to create it: the first wins, both read it.
	if _, err := s.write.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES ('key_pepper', ?) ON CONFLICT DO NOTHING`, fresh); err != nil {
		return nil, fmt.Errorf("create pepper: %w", err)
	}
	if err := s.write.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = 'key_pepper'`).Scan(&v); err != nil {
		return nil, fmt.Errorf("read pepper: %w", err)
	}
	return v, nil
}

// Update runs fn in one write transaction.
func (s *Store) Update(ctx context.Context, fn func(tx xaalis.Tx) error) error {
	t, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(&Tx{tx: t}); err != nil {
		_ = t.Rollback()
		return err
	}
	if err := t.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Tx is one write transaction.
type Tx struct{ tx *sql.Tx }

var _ xaalis.Tx = (*Tx)(nil)

// querier is what both a pool and a transaction offer.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// micros stores a time as microseconds since the epoch.
func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func nullMicros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func fromNullMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// isUnique reports a UNIQUE or PRIMARY KEY violation.
func isUnique(err error) bool {
	var e *sqlite.Error
	if errors.As(err, &e) {
		c := e.Code()
		return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return xaalis.ErrNotFound
	}
	return err
}

// Pragmas reads the settings the writer connection runs with, so tests
// and `xaalis serve` logs can show the database is configured for money.
func (s *Store) Pragmas(ctx context.Context) map[string]string {
	out := map[string]string{}
	for _, p := range []string{"journal_mode", "synchronous", "foreign_keys", "busy_timeout"} {
		var v string
		if err := s.write.QueryRowContext(ctx, "PRAGMA "+p).Scan(&v); err == nil {
			out[p] = v
		}
	}
	return out
}

// queryAll runs a query and scans every row with scan; a query error is
// wrapped with op when one is given.
func queryAll[T any](ctx context.Context, q querier, op string, scan func(func(...any) error) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		if op != "" {
			err = fmt.Errorf("%s: %w", op, err)
		}
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
