package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A batch's commands side by side on one connection.
//
// A group worker ran its batch's commands one after the other, and each
// waited for its own round trips (a payment's merchant_ref and payer, a
// payout's Idempotency-Key and merchant_ref): on this 2-core machine,
// loaded, 0.6 ms each, so that a batch of five spent 3.5 ms in them
// before its 4.5 ms COMMIT, and the worker bounded create-payment. The
// commands of a batch now run at once, each on its own goroutine, and
// their statements go through a batchMux: once every command still
// running waits for an answer, the mux sends all their statements in one
// pipeline, reads every result into memory, and lets them go on. A batch
// of commands each with one round trip then makes one, not one each.
//
// The commands already did not see each other's rows held aside (group.go);
// a statement of one command that runs now may come before or after
// another command's, as between two transactions. Each command keeps its
// own sums of hot rows (its txConn); the batch adds them up in the
// commands' order (absorb), as one command after the other would have.

// muxWait bounds how long the statements waiting in a mux wait for the
// commands still running: a command that waits for something else than
// the database (it should not) delays the others by that much, not for
// ever. (The tests that count round trips lengthen it, group.muxWait: on
// a loaded machine a command can be kept off the CPU that long.)
const muxWait = 2 * time.Millisecond

// batchMux sends the statements of a batch's commands, which run at once,
// in shared round trips on the batch's connection.
type batchMux struct {
	c   *pgxpool.Conn
	ctx context.Context
	// batch is the batch's lock_timeout (txConn.batch).
	batch string
	// io guards the connection and its type map (pgtype.Map is not safe
	// for concurrent use): sending and reading, and the commands' scans.
	io sync.Mutex

	mu sync.Mutex
	// running counts the commands neither waiting for an answer nor done.
	running  int
	pending  []*muxRequest
	flushing bool
	timer    *time.Timer
	begun    bool
	// failed is the first error of a statement: PostgreSQL aborted the
	// transaction, and the batch must run its commands again alone.
	failed error
	// trips counts the round trips.
	trips int
	// gen counts the flushes: a timer started before the last one is
	// stale.
	gen int
	// wait is muxWait, or the store's own (group.muxWait).
	wait time.Duration
}

// muxRequest is one command's statements of one round trip, and their
// results once read.
type muxRequest struct {
	b    *pgx.Batch
	res  *bufResults
	done chan struct{}
}

func newBatchMux(ctx context.Context, c *pgxpool.Conn, commands int, batch string, wait time.Duration) *batchMux {
	if wait <= 0 {
		wait = muxWait
	}
	return &batchMux{c: c, ctx: ctx, running: commands, batch: batch, wait: wait}
}

// send queues b for the next round trip, waits for it, and returns its
// results, read.
func (m *batchMux) send(b *pgx.Batch) pgx.BatchResults {
	r := &muxRequest{b: b, done: make(chan struct{})}
	m.mu.Lock()
	m.pending = append(m.pending, r)
	m.running--
	m.flushLocked(false)
	m.armLocked()
	m.mu.Unlock()
	<-r.done
	return r.res
}

// done marks a command finished.
func (m *batchMux) done() {
	m.mu.Lock()
	m.running--
	m.flushLocked(false)
	m.armLocked()
	m.mu.Unlock()
}

// armLocked starts the timer that sends what is pending after m.wait,
// when something is and a command still runs. A timer started for an
// earlier wait (gen) does nothing.
func (m *batchMux) armLocked() {
	if m.timer != nil || len(m.pending) == 0 || m.running <= 0 {
		return
	}
	gen := m.gen
	m.timer = time.AfterFunc(m.wait, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.gen != gen {
			return
		}
		m.timer = nil
		m.flushLocked(true)
		// A flush in progress re-arms at its end.
		m.armLocked()
	})
}

// flushLocked sends what is pending once no command is running (or when
// forced, by the timer), one round trip at a time. It is called with mu
// held, and releases it during the round trip.
func (m *batchMux) flushLocked(force bool) {
	for (m.running <= 0 || force) && len(m.pending) > 0 && !m.flushing {
		force = false
		reqs := m.pending
		m.pending = nil
		m.flushing = true
		m.gen++
		if m.timer != nil {
			m.timer.Stop()
			m.timer = nil
		}
		m.mu.Unlock()
		m.roundTrip(reqs)
		m.mu.Lock()
		m.flushing = false
		m.running += len(reqs)
		for _, r := range reqs {
			close(r.done)
		}
	}
}

// roundTrip sends the requests' statements in one pipeline (after BEGIN,
// the first time) and reads every result. Once a statement failed, the
// transaction is aborted, or was never begun: later requests get that
// error and nothing is sent, so that no statement runs outside the
// batch's transaction. A panic (of pgx) fails the requests, not the
// process.
func (m *batchMux) roundTrip(reqs []*muxRequest) {
	m.io.Lock()
	defer m.io.Unlock()
	defer func() {
		if p := recover(); p != nil {
			m.fail(fmt.Errorf("a batch's round trip panicked: %v", p))
		}
		for _, r := range reqs {
			if r.res == nil {
				r.res = failedResults(m, r, m.failed)
			}
		}
	}()
	if m.failed != nil {
		return
	}
	all := &pgx.Batch{}
	begin := 0
	if !m.begun {
		begin = queueBegin(all, m.batch)
	}
	for _, r := range reqs {
		all.QueuedQueries = append(all.QueuedQueries, r.b.QueuedQueries...)
	}
	m.trips++
	br := m.c.SendBatch(m.ctx, all)
	if begin > 0 {
		if err := readPrefix(br, begin, nil); err != nil {
			m.fail(err)
			br.Close()
			return
		}
		m.begun = true
	}
	for _, r := range reqs {
		res := &bufResults{mux: m, results: make([]bufResult, len(r.b.QueuedQueries))}
		for i := range res.results {
			res.results[i] = m.read(br)
		}
		r.res = res
	}
	if err := br.Close(); err != nil {
		m.fail(err)
	}
}

// failedResults answers every statement of r with err.
func failedResults(m *batchMux, r *muxRequest, err error) *bufResults {
	res := &bufResults{mux: m, results: make([]bufResult, len(r.b.QueuedQueries))}
	for i := range res.results {
		res.results[i].err = err
	}
	return res
}

// read reads one statement's result into memory.
func (m *batchMux) read(br pgx.BatchResults) bufResult {
	rows, err := br.Query()
	if err != nil {
		m.fail(err)
		return bufResult{err: err}
	}
	var res bufResult
	res.fields = append([]pgconn.FieldDescription(nil), rows.FieldDescriptions()...)
	for rows.Next() {
		raw := rows.RawValues()
		row := make([][]byte, len(raw))
		for i, v := range raw {
			if v != nil {
				row[i] = append(make([]byte, 0, len(v)), v...)
			}
		}
		res.rows = append(res.rows, row)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		m.fail(err)
		return bufResult{err: err}
	}
	res.tag = rows.CommandTag()
	return res
}

// fail records a statement's error: the transaction is aborted.
func (m *batchMux) fail(err error) {
	if m.failed == nil {
		m.failed = err
	}
}

// aborted returns the first statement error, once every command is done.
func (m *batchMux) aborted() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failed
}

// scan decodes a row read into dest, under io: the connection's type map
// is shared with the round trips.
func (m *batchMux) scan(fields []pgconn.FieldDescription, row [][]byte, dest ...any) error {
	m.io.Lock()
	defer m.io.Unlock()
	return pgx.ScanRow(m.c.Conn().TypeMap(), fields, row, dest...)
}

// bufResult is one statement's result, read.
type bufResult struct {
	fields []pgconn.FieldDescription
	rows   [][][]byte
	tag    pgconn.CommandTag
	err    error
}

// bufResults are the results of one request, read, in a pgx.BatchResults.
type bufResults struct {
	mux     *batchMux
	results []bufResult
	next    int
}

func (b *bufResults) take() (bufResult, error) {
	if b.next >= len(b.results) {
		return bufResult{}, errors.New("no result left in the batch")
	}
	r := b.results[b.next]
	b.next++
	return r, r.err
}

func (b *bufResults) Exec() (pgconn.CommandTag, error) {
	r, err := b.take()
	return r.tag, err
}

func (b *bufResults) Query() (pgx.Rows, error) {
	r, err := b.take()
	if err != nil {
		return nil, err
	}
	return &bufRows{mux: b.mux, res: r, at: -1}, nil
}

func (b *bufResults) QueryRow() pgx.Row {
	r, err := b.take()
	if err != nil {
		return errRow{err}
	}
	return bufRow{mux: b.mux, res: r}
}

// Close returns the first error of the results not read, as pgx's does.
func (b *bufResults) Close() error {
	for b.next < len(b.results) {
		if _, err := b.take(); err != nil {
			return err
		}
	}
	return nil
}

func (b *bufResults) Tx() pgx.Tx { return nil }

// bufRow is a QueryRow's row, read.
type bufRow struct {
	mux *batchMux
	res bufResult
}

func (r bufRow) Scan(dest ...any) error {
	if len(r.res.rows) == 0 {
		return pgx.ErrNoRows
	}
	return r.mux.scan(r.res.fields, r.res.rows[0], dest...)
}

// bufRows are a Query's rows, read.
type bufRows struct {
	mux *batchMux
	res bufResult
	at  int
	err error
}

func (r *bufRows) Close()                                       { r.at = len(r.res.rows) }
func (r *bufRows) Err() error                                   { return r.err }
func (r *bufRows) CommandTag() pgconn.CommandTag                { return r.res.tag }
func (r *bufRows) FieldDescriptions() []pgconn.FieldDescription { return r.res.fields }
func (r *bufRows) Conn() *pgx.Conn                              { return nil }
func (r *bufRows) TypeMap() *pgtype.Map                         { return nil }

func (r *bufRows) Next() bool {
	if r.err != nil || r.at+1 >= len(r.res.rows) {
		r.at = len(r.res.rows)
		return false
	}
	r.at++
	return true
}

func (r *bufRows) RawValues() [][]byte {
	if r.at < 0 || r.at >= len(r.res.rows) {
		return nil
	}
	return r.res.rows[r.at]
}

func (r *bufRows) Scan(dest ...any) error {
	row := r.RawValues()
	if row == nil {
		return errors.New("scan without a row")
	}
	if err := r.mux.scan(r.res.fields, row, dest...); err != nil {
		r.err = err
		return err
	}
	return nil
}

func (r *bufRows) Values() ([]any, error) {
	row := r.RawValues()
	if row == nil {
		return nil, errors.New("values without a row")
	}
	r.mux.io.Lock()
	defer r.mux.io.Unlock()
	tm := r.mux.c.Conn().TypeMap()
	out := make([]any, len(row))
	for i, v := range row {
		if v == nil {
			continue
		}
		fd := r.res.fields[i]
		if t, ok := tm.TypeForOID(fd.DataTypeOID); ok {
			x, err := t.Codec.DecodeValue(tm, fd.DataTypeOID, fd.Format, v)
			if err != nil {
				return nil, err
			}
			out[i] = x
			continue
		}
		if fd.Format == pgtype.TextFormatCode {
			out[i] = string(v)
		} else {
			out[i] = append([]byte(nil), v...)
		}
	}
	return out, nil
}
