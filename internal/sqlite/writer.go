package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Group commit. SQLite has one writer at a time. So one goroutine owns
// the writer connection and runs every write transaction of the store: it
// takes all the commands queued while the previous batch was committing,
// runs each in a SAVEPOINT of one transaction (a command that fails rolls
// back to its savepoint and no further), and commits them together. The
// COMMIT writes the batch's WAL frames without waiting for the disk; the
// syncer (syncer.go) then fdatasyncs the WAL while the writer runs the
// next batch, and releases the batch's answers: no answer leaves before
// its batch is durable; a failed COMMIT or fdatasync fails every command
// of the batch. A batch closes when the queue is empty or at maxBatch
// commands; no timer waits for more, so a lone command commits at once.
// Before it closes a batch on an empty queue, the writer yields its CPU
// once (run), so that requests already runnable queue their commands in
// time to join it.

const (
	// maxBatch bounds one transaction: a long batch delays its first
	// command's answer.
	maxBatch = 256
	// queueSize bounds the commands waiting for the writer; past it Update
	// answers service_unavailable rather than let latency grow unbounded.
	queueSize = 4096
)

// job is one command waiting for the writer.
type job struct {
	ctx context.Context
	fn  func(xaalis.Tx) error
	// raw, instead of fn: runs on the writer connection between batches,
	// outside any transaction (connection pragmas, checkpoints).
	raw  func(querier) error
	err  error
	done chan struct{}
}

var jobPool = sync.Pool{New: func() any { return &job{done: make(chan struct{}, 1)} }}

// writer owns the writer connection. It drives transactions with plain
// BEGIN IMMEDIATE / COMMIT on one *sql.Conn, so that the statements it
// prepares once stay bound to that connection and run without a
// re-preparation per transaction.
type writer struct {
	conn  *sql.Conn
	stmts *stmtCache
	queue chan *job
	stop  chan struct{}
	exit  chan struct{}
	// sy makes the batches durable and releases their answers; it runs
	// the wake-ups a batch's commands asked for once it is durable.
	sy *syncer
	// box gives the commands' Tx the store's SecretBox.
	box func() xaalis.SecretBox

	closed atomic.Bool
	// Figures for the benchmarks: batches committed and commands in them.
	batches, commands atomic.Int64
	// health is the last transaction's failure for want of disk or I/O,
	// cleared by the next commit: the readiness probe reads it.
	health writeHealth
}

func newWriter(ctx context.Context, db *sql.DB, path string, onDurable func(xaalis.Wakeup), box func() xaalis.SecretBox) (*writer, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("writer connection: %w", err)
	}
	// The COMMIT no longer waits for the disk: the syncer fdatasyncs the
	// WAL before any answer. Set on this connection only, after the
	// migrations (committed FULL): a connection opened again would come
	// back FULL, the DSN's, and lose nothing.
	if _, err := conn.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
		conn.Close()
		return nil, fmt.Errorf("writer connection: %w", err)
	}
	w := &writer{conn: conn, stmts: newStmtCache(conn), queue: make(chan *job, queueSize), stop: make(chan struct{}),
		exit: make(chan struct{}), box: box}
	w.sy = newSyncer(path, onDurable, &w.health)
	go w.run()
	return w, nil
}

// errClosed is the answer of a store that is closing.
var errClosed = errors.New("sqlite: the store is closed")

// do queues fn and waits for its batch to be durable.
func (w *writer) do(ctx context.Context, fn func(xaalis.Tx) error) error {
	if w.closed.Load() {
		return unavailable(errClosed)
	}
	if err := w.sy.failed(); err != nil {
		return err
	}
	j := jobPool.Get().(*job)
	j.ctx, j.fn, j.raw, j.err = ctx, fn, nil, nil
	return w.wait(j)
}

// direct runs fn on the writer connection between batches, outside any
// transaction: for what SQLite refuses inside one (a checkpoint) or what
// sets the connection (pragmas).
func (w *writer) direct(ctx context.Context, fn func(querier) error) error {
	if w.closed.Load() {
		return errClosed
	}
	j := jobPool.Get().(*job)
	j.ctx, j.fn, j.raw, j.err = ctx, nil, fn, nil
	return w.wait(j)
}

// wait queues j and waits for it to be done.
func (w *writer) wait(j *job) error {
	select {
	case w.queue <- j:
	default:
		jobPool.Put(j)
		e := xaalis.Errorf(xaalis.EServiceUnavailable, "The database has more writes queued than it takes; retry after Retry-After seconds.")
		e.RetryAfter = time.Second
		return e
	}
	<-j.done
	err := j.err
	j.ctx, j.fn, j.raw = nil, nil, nil
	jobPool.Put(j)
	return unavailable(err)
}

func (w *writer) close() {
	if w.closed.Swap(true) {
		return
	}
	close(w.stop)
	<-w.exit
	w.sy.close()
	w.stmts.close()
	w.conn.Close()
}

func (w *writer) run() {
	defer close(w.exit)
	// A CPU profile tells the writer's time from the rest of the server's
	// (go tool pprof -tagfocus=xaalis=sqlite-writer): the writer is the
	// one goroutine every command waits for.
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("xaalis", "sqlite-writer")))
	batch := make([]*job, 0, maxBatch)
	var next *job // a job taken while filling a batch it cannot join
	for {
		first := next
		next = nil
		if first == nil {
			select {
			case first = <-w.queue:
			case <-w.stop:
				// Finish what was queued before the store closed.
				for {
					select {
					case j := <-w.queue:
						w.runAlone(j)
					default:
						return
					}
				}
			}
		}
		if first.raw != nil {
			w.runAlone(first)
			continue
		}
		batch = append(batch[:0], first)
		yielded := false
	fill:
		for len(batch) < maxBatch {
			select {
			case j := <-w.queue:
				if j.raw != nil {
					next = j
					break fill
				}
				batch = append(batch, j)
			default:
				if !yielded {
					// The queue looks empty: let the goroutines that wait
					// for a CPU run first, once. On a machine of few CPUs
					// the writer holds one most of the time, and requests
					// about to queue their commands are often among those
					// waiting: they join this batch instead of the next,
					// and share its COMMIT, the pages every command of a
					// batch writes (about 40 WAL frames a commit against
					// 11 a command more, for a payment) and its fsync.
					// create-payment at 16 concurrent: 2.6 → 3.9-4.2
					// commands a commit, 26 → 22 frames and 418 → 389 µs
					// of CPU a payment. It is no timer: with nothing else
					// runnable Gosched returns at once, and a lone command
					// commits as soon as before (TestWriterYieldsOnce).
					yielded = true
					runtime.Gosched()
					continue fill
				}
				break fill
			}
		}
		w.commit(batch)
	}
}

// runAlone runs one job: a raw one on the connection, a command in a
// transaction of its own. A raw job may commit (the bench's bulk seed), so
// its answer too waits for an fsync; it clears no failure of the
// readiness probe.
func (w *writer) runAlone(j *job) {
	if j.raw == nil {
		w.commit([]*job{j})
		return
	}
	seq := w.sy.next()
	j.err = func() (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("panic on the writer connection: %v\n%s", v, debug.Stack())
			}
		}()
		return j.raw(connq{c: w.stmts, detach: true})
	}()
	w.sy.add(seq, []*job{j}, 0, false)
}

// commit runs a batch in one transaction and releases every answer once
// it is durable (or failed).
func (w *writer) commit(batch []*job) {
	var wake xaalis.Wakeup
	var seq uint64 // the batch's number, once sent to COMMIT
	committed := false
	q := connq{c: w.stmts, detach: true}
	box := w.box()
	ctx := context.Background()
	exec := func(stmt string) error {
		_, err := q.ExecContext(ctx, stmt)
		return err
	}
	// The stat and volume counters, the quota counts and the balance
	// changes no balance can refuse (PostEntry) of the batch's committed
	// commands, written once: most commands add to the same few rows.
	stats, volumes, quota, balances := statBatch{}, volumeBatch{}, newQuotaBatch(), balanceBatch{}
	// keep adds what a command that commits asked for to the batch's.
	keep := func(tx *Tx) {
		wake |= tx.wake
		stats.merge(tx.stats)
		volumes.merge(tx.volumes)
		quota.merge(tx.claims)
		balances.merge(tx.balances)
	}
	err := func() error {
		if err := exec(`BEGIN IMMEDIATE`); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		one := len(batch) == 1
		for _, j := range batch {
			if err := j.ctx.Err(); err != nil {
				j.err = err
				continue
			}
			tx := &Tx{tx: q, box: box, stats: statBatch{}, volumes: volumeBatch{}, quota: quota, batch: balances}
			if one {
				// A lone command is the transaction: no savepoint.
				if j.err = runJob(j, tx); j.err != nil {
					if _, bad := unavailableCode(j.err); bad {
						w.health.fail(j.err, w.sy.last())
					}
					if err := exec(`ROLLBACK`); err != nil {
						// SQLite already rolled back (a full disk may): the
						// command's own error tells why.
						return rollbackFailed("rollback", j.err, err)
					}
					return nil
				}
				keep(tx)
				continue
			}
			if err := exec(`SAVEPOINT command`); err != nil {
				return w.abort(fmt.Errorf("savepoint: %w", err))
			}
			if j.err = runJob(j, tx); j.err != nil {
				if _, bad := unavailableCode(j.err); bad {
					w.health.fail(j.err, w.sy.last())
				}
				if err := exec(`ROLLBACK TO command`); err != nil {
					// SQLite rolled the whole transaction back (a full disk
					// may): every command of the batch fails with the cause.
					return w.abort(rollbackFailed("rollback to savepoint", j.err, err))
				}
				// The batch's balance changes the command wrote went with
				// its savepoint.
				balances.merge(tx.flushed)
			} else {
				keep(tx)
			}
			if err := exec(`RELEASE command`); err != nil {
				return w.abort(fmt.Errorf("release savepoint: %w", err))
			}
		}
		if err := stats.write(ctx, q); err != nil {
			return w.abort(err)
		}
		if err := volumes.write(ctx, q); err != nil {
			return w.abort(err)
		}
		if err := quota.write(ctx, q); err != nil {
			return w.abort(err)
		}
		if err := balances.write(ctx, q); err != nil {
			return w.abort(err)
		}
		// Numbered before the COMMIT: a reader may see the batch's rows as
		// soon as SQLite publishes them, inside the COMMIT, and must then
		// find its number to wait for (Store.Durable).
		seq = w.sy.next()
		if err := exec(`COMMIT`); err != nil {
			return w.abort(fmt.Errorf("commit: %w", err))
		}
		committed = true
		w.batches.Add(1)
		w.commands.Add(int64(len(batch)))
		return nil
	}()
	if err != nil {
		// Nothing of the batch is durable: every command fails with it,
		// as service_unavailable (a retry with the same key runs again).
		// Only a later batch, durable, clears the readiness probe.
		w.health.fail(err, w.sy.last())
		failed := batchFailed(err)
		for _, j := range batch {
			j.err = failed
		}
		wake = 0
	}
	// Every answer waits for the batches before it to be durable, its own
	// included: even a command that failed may have read their rows (a
	// merchant_ref taken, a balance spent).
	if seq == 0 {
		seq = w.sy.last()
	}
	w.sy.add(seq, slices.Clone(batch), wake, committed)
	// Commands waiting for their fsync count against the queue's bound:
	// a disk that lags holds the writer, and new commands get 503.
	w.sy.throttle()
}

// rollbackFailed is the error of a batch whose rollback, after one of its
// commands failed with cmdErr, failed too: every command of the batch
// fails with it. The command's error tells why (a full disk), but an
// Idempotency-Key claimed by another request is that command's own answer
// (ErrClaimRace), not one for the whole batch.
func rollbackFailed(op string, cmdErr, err error) error {
	if errors.Is(cmdErr, xaalis.ErrClaimRace) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w", op, errors.Join(cmdErr, err))
}

// abort rolls the open transaction back after err, if SQLite has not
// already, and returns err.
func (w *writer) abort(err error) error {
	_, _ = w.conn.ExecContext(context.Background(), `ROLLBACK`)
	return err
}

// runJob runs one command, then writes the Idempotency-Key it claimed
// but left unwritten (ClaimIdempotency), turning a panic into its error so
// that one command cannot stop the writer. A command that fails with its
// key unwritten fails with ErrClaimRace if another request took the key.
func runJob(j *job, tx *Tx) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic in a write transaction: %v\n%s", v, debug.Stack())
		}
	}()
	if err := j.fn(tx); err != nil {
		return tx.claimFailed(j.ctx, err)
	}
	return tx.writeClaim(j.ctx)
}

// preparer is a pool or a connection.
type preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// stmtCache keeps each statement prepared once: SQLite's parser costs more
// than running most of our statements.
type stmtCache struct {
	db preparer
	mu sync.RWMutex
	m  map[string]*sql.Stmt
}

// maxCached bounds the cache: the store's statements are a fixed set, but
// list queries are assembled from their filters.
const maxCached = 1024

func newStmtCache(db preparer) *stmtCache { return &stmtCache{db: db, m: map[string]*sql.Stmt{}} }

// get returns the prepared statement of query, or nil when it cannot be
// kept (the caller then runs the query unprepared).
func (c *stmtCache) get(ctx context.Context, query string) *sql.Stmt {
	c.mu.RLock()
	st := c.m[query]
	c.mu.RUnlock()
	if st != nil {
		return st
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st = c.m[query]; st != nil {
		return st
	}
	if len(c.m) >= maxCached {
		return nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil // the unprepared call reports the error
	}
	c.m[query] = st
	return st
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = map[string]*sql.Stmt{}
}

// statements counts the statements every store of the process sends,
// for the benchmarks.
var statements atomic.Int64

// connq runs queries through a cache's prepared statements: on the read
// pool, or on the writer's connection inside its open transaction.
type connq struct {
	c *stmtCache
	// detach: statements ignore their context's end. On the writer, an
	// interrupted INSERT, UPDATE or DELETE makes SQLite roll back the
	// whole open transaction, every command of the batch; a client that
	// hangs up must not do that to the others. On the read pool, for the
	// point reads (Store.point): the driver would watch the context with
	// a goroutine per statement.
	detach bool
	// last, on the read pool, is the last batch the writer sent to
	// COMMIT: each read records it in its request's ReadMark once its
	// statement has run, so that the answer waits for what the read may
	// have seen to be durable (Store.Durable).
	last func() uint64
}

// saw records, after a read's statement ran, the commits it may have seen.
// modernc.org/sqlite steps a query to its first row inside QueryContext
// (TestReadSnapshotAtQuery), so the read's snapshot is taken by then, and
// a batch it sees was numbered before its COMMIT published it.
func (q connq) saw(ctx context.Context) {
	if q.last == nil {
		return
	}
	if m := xaalis.ReadMarkOf(ctx); m != nil {
		m.Saw(q.last())
	}
}

func (q connq) ctx(ctx context.Context) context.Context {
	statements.Add(1)
	if q.detach {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

func (q connq) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = q.ctx(ctx)
	defer q.saw(ctx)
	if st := q.c.get(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return q.c.db.ExecContext(ctx, query, args...)
}

func (q connq) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = q.ctx(ctx)
	defer q.saw(ctx)
	if st := q.c.get(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return q.c.db.QueryContext(ctx, query, args...)
}

func (q connq) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	ctx = q.ctx(ctx)
	defer q.saw(ctx)
	if st := q.c.get(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return q.c.db.QueryRowContext(ctx, query, args...)
}
