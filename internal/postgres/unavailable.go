package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// A database that cannot be reached, or that is shutting down, restarting
// or out of space, answers service_unavailable (503, Retry-After): the
// client retries with the same Idempotency-Key. A transaction cut off
// before its commit did nothing; one cut off during its commit may have
// committed, and then the retry finds the key's stored answer and replays
// it, so nothing is ever run twice.

// unavailableRetryAfter is the wait the answer suggests: a restart of
// PostgreSQL takes a few seconds.
const unavailableRetryAfter = 2 * time.Second

// unavailable turns an error that says the database is away into
// service_unavailable wrapping it; other errors pass unchanged.
func unavailable(err error) error {
	if err == nil || !isUnavailable(err) {
		return err
	}
	var e *xaalis.Error
	if errors.As(err, &e) {
		return err // already answered
	}
	return &xaalis.Error{Code: xaalis.EServiceUnavailable, RetryAfter: unavailableRetryAfter, Cause: err,
		Message: "The database is unreachable or restarting; retry after Retry-After seconds with the same Idempotency-Key."}
}

// isUnavailable reports an error of the connection rather than of the
// statement: refused or lost connections, a server shutting down or
// starting, too many connections, a full disk, an I/O error.
func isUnavailable(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		// Whatever refused the connection (the server down, starting, or
		// not accepting connections to this database now).
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"): // connection exception
			return true
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // admin or crash shutdown, cannot connect now
			return true
		case pe.Code == "55000" && strings.Contains(pe.Message, "not currently accepting connections"):
			return true
		case pe.Code == "53300", pe.Code == "53100", pe.Code == "58030": // too many connections, disk full, I/O error
			return true
		}
		return false
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false // the caller's own end
	}
	// pgx's errors for a closed connection or pool have no exported type.
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "closed pool") ||
		strings.Contains(msg, "conn busy") || strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset")
}

// db is the pool, answering connection failures as service_unavailable on
// every read (Update does the same for writes).
type db struct{ *pgxpool.Pool }

func (d *db) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := d.Pool.Exec(ctx, sql, args...)
	return tag, unavailable(err)
}

func (d *db) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := d.Pool.Query(ctx, sql, args...)
	if err != nil {
		return rows, unavailable(err)
	}
	return mappedRows{rows}, nil
}

func (d *db) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return mappedRow{d.Pool.QueryRow(ctx, sql, args...)}
}

func (d *db) Ping(ctx context.Context) error { return unavailable(d.Pool.Ping(ctx)) }

func (d *db) BeginTx(ctx context.Context, o pgx.TxOptions) (pgx.Tx, error) {
	t, err := d.Pool.BeginTx(ctx, o)
	return t, unavailable(err)
}

type mappedRow struct{ pgx.Row }

func (r mappedRow) Scan(dest ...any) error { return unavailable(r.Row.Scan(dest...)) }

type mappedRows struct{ pgx.Rows }

func (r mappedRows) Err() error { return unavailable(r.Rows.Err()) }

func (r mappedRows) Scan(dest ...any) error { return unavailable(r.Rows.Scan(dest...)) }
