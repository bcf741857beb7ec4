package sqlite

import (
	"errors"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// A database that cannot write now (its disk full, an I/O error, the file
// read-only or locked by another process past the busy timeout, the store
// closing) answers service_unavailable (503, Retry-After): nothing of the
// command was done, and the client retries with the same Idempotency-Key.

// unavailableRetryAfter is the wait the answer suggests.
const unavailableRetryAfter = 5 * time.Second

// unavailableCode reports a result code that says the database cannot take
// the write now rather than that the statement is wrong.
func unavailableCode(err error) (string, bool) {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return "", false
	}
	switch e.Code() & 0xff { // the primary code of an extended one
	case sqlite3.SQLITE_FULL:
		return "The database's disk is full: nothing was written. Retry after Retry-After seconds with the same Idempotency-Key.", true
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_NOMEM:
		return "The database cannot write now (an I/O error): nothing was written. Retry after Retry-After seconds with the same Idempotency-Key.", true
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return "The database is locked by another process: nothing was written. Retry after Retry-After seconds with the same Idempotency-Key.", true
	}
	return "", false
}

// unavailable turns an error that says the database cannot write now into
// service_unavailable wrapping it; other errors pass unchanged.
func unavailable(err error) error {
	if err == nil {
		return nil
	}
	var e *xaalis.Error
	if errors.As(err, &e) {
		return err
	}
	if errors.Is(err, errClosed) {
		return &xaalis.Error{Code: xaalis.EServiceUnavailable, RetryAfter: time.Second, Cause: err,
			Message: "The server is shutting down: nothing was done. Retry with the same Idempotency-Key."}
	}
	if msg, ok := unavailableCode(err); ok {
		return &xaalis.Error{Code: xaalis.EServiceUnavailable, RetryAfter: unavailableRetryAfter, Cause: err, Message: msg}
	}
	return err
}

// batchFailed is the answer of every command of a batch whose transaction
// failed as a whole (begin, savepoint or commit): none of it is durable.
func batchFailed(err error) error {
	if u := unavailable(err); u != err {
		return u
	}
	return &xaalis.Error{Code: xaalis.EServiceUnavailable, RetryAfter: time.Second, Cause: err,
		Message: "The database could not commit this request: nothing was written. Retry after Retry-After seconds with the same Idempotency-Key."}
}

// writeHealth remembers the writer's last failure for want of disk or
// I/O, for the readiness probe, and the batch it came after: only a later
// batch, committed and made durable, clears it.
type writeHealth struct {
	mu     sync.Mutex
	failed error
	// at is the last batch sent to COMMIT when it failed.
	at uint64
}

// fail records err, which came when batch at was the last sent to COMMIT.
func (h *writeHealth) fail(err error, at uint64) {
	h.mu.Lock()
	h.failed, h.at = err, at
	h.mu.Unlock()
}

// durable clears a failure that came before batch seq, which committed
// and is durable.
func (h *writeHealth) durable(seq uint64) {
	h.mu.Lock()
	if h.failed != nil && seq > h.at {
		h.failed = nil
	}
	h.mu.Unlock()
}

func (h *writeHealth) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed
}
