package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Durability off the writer's path. With synchronous=FULL every COMMIT
// waited for an fsync of the WAL, and the writer, the one goroutine every
// command waits for, stood idle meanwhile: a quarter of its time under
// load (a batch's fsync took about 1 ms on this project's 2-core machine).
// Now the writer commits with synchronous=NORMAL (SQLite writes the
// batch's frames to the WAL and publishes them without an fsync), hands
// the batch to the syncer and goes on with the next batch at once. The
// syncer fdatasyncs the WAL file, then releases the answers of every
// batch committed before that fdatasync began: one fsync may cover
// several batches. Nothing is answered before it is durable, as before.
//
// A reader may see a batch's rows between its COMMIT and its fsync: they
// are in the OS's cache, safe from a crash of the process, not yet from a
// power cut. So what leaves the process after a read waits for
// Store.Durable first: every HTTP answer, every streamed event. Each read
// of the pool records in its request's ReadMark the last batch sent to
// COMMIT when it ran, and the answer waits for that batch only: a write's
// answer, whose own batch is durable once Update returns, does not wait
// for the batches committed after it. A webhook delivery and a provider
// call made after a read wait the same way (internal/webhook,
// internal/xaalis); the other provider calls follow a command of their
// own.

// syncer makes the writer's commits durable, in order, and releases
// their answers.
type syncer struct {
	wal string
	// hook, when set (tests), runs in place of syncWAL and may call it.
	hook atomic.Pointer[func(sync func() error) error]
	f    *os.File // the WAL, opened at the first sync, again if SQLite made a new one

	// committed numbers the batches the writer sent to COMMIT (from 1),
	// set before the COMMIT: a reader that sees a batch's rows loads its
	// number or a later one. durable is the last batch whose COMMIT
	// returned and whose frames an fdatasync then covered.
	committed, durable atomic.Uint64

	mu    sync.Mutex
	queue []syncBatch // committed, waiting for their fdatasync
	// round is closed when a sync round ends, then replaced: Durable's
	// waiters and a throttled writer wake and look again.
	round chan struct{}
	// broken is the error of an fdatasync that failed, set under mu
	// before the round's channel closes, and read without it by every
	// command (failed). It stays: Linux may have dropped the pages it
	// could not write and marked them clean, so a later fdatasync that
	// succeeds proves nothing of them, and the WAL's checksum chain would
	// stop at the first lost frame, taking every later commit with it at
	// recovery. Nothing more is answered as durable; the server must be
	// restarted.
	broken atomic.Pointer[error]
	// waiting counts the commands queued here and not yet answered.
	waiting atomic.Int64

	kick      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	onDurable func(xaalis.Wakeup)
	health    *writeHealth
	// syncs counts the fdatasyncs, for the tests.
	syncs atomic.Int64
}

// syncBatch is a batch whose COMMIT returned (or failed): its answers
// leave once batch seq is durable.
type syncBatch struct {
	seq  uint64
	jobs []*job
	// wake is what the batch's commands asked to wake once durable.
	wake xaalis.Wakeup
	// committed: its COMMIT succeeded (once durable, it clears a failure
	// the readiness probe shows).
	committed bool
}

func newSyncer(dbPath string, onDurable func(xaalis.Wakeup), health *writeHealth) *syncer {
	y := &syncer{wal: dbPath + "-wal", round: make(chan struct{}), kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), onDurable: onDurable, health: health}
	go y.run()
	return y
}

// next numbers the batch about to be sent to COMMIT.
func (y *syncer) next() uint64 { return y.committed.Add(1) }

// last is the number of the last batch sent to COMMIT.
func (y *syncer) last() uint64 { return y.committed.Load() }

// add queues a batch's answers behind the fdatasync that covers batch seq.
func (y *syncer) add(seq uint64, jobs []*job, wake xaalis.Wakeup, committed bool) {
	y.waiting.Add(int64(len(jobs)))
	y.mu.Lock()
	y.queue = append(y.queue, syncBatch{seq: seq, jobs: jobs, wake: wake, committed: committed})
	y.mu.Unlock()
	select {
	case y.kick <- struct{}{}:
	default:
	}
}

// throttle holds the writer while more commands wait for their fdatasync
// than the writer's queue holds: with FULL a slow disk held the writer in
// its COMMIT, its queue filled and new commands got 503; so it does still.
func (y *syncer) throttle() {
	for y.waiting.Load() > queueSize {
		y.mu.Lock()
		round := y.round
		y.mu.Unlock()
		if y.waiting.Load() <= queueSize {
			return
		}
		select {
		case <-round:
		case <-y.done:
			return
		}
	}
}

// failed returns the error of the fdatasync that failed, if one did.
func (y *syncer) failed() error {
	if p := y.broken.Load(); p != nil {
		return syncFailed(*p)
	}
	return nil
}

func (y *syncer) run() {
	defer close(y.done)
	for {
		select {
		case <-y.kick:
		case <-y.stop:
			// The writer has stopped: release what it queued last.
			y.mu.Lock()
			n := len(y.queue)
			y.mu.Unlock()
			if n == 0 {
				return
			}
		}
		y.mu.Lock()
		q := y.queue
		y.queue = nil
		y.mu.Unlock()
		if len(q) == 0 {
			continue
		}
		// Batches are queued in order: the last is the highest. A batch
		// still inside its COMMIT is not in q, and not counted durable.
		target := q[len(q)-1].seq
		var okSeq uint64 // the last batch of q that committed
		for _, b := range q {
			if b.committed {
				okSeq = b.seq
			}
		}
		err := y.failed()
		if err == nil && target > y.durable.Load() {
			err = y.syncOnce()
		}
		y.finish(target, okSeq, err)
		for _, b := range q {
			for _, j := range b.jobs {
				if err != nil {
					// Even a command that failed on its own may show rows
					// of the batches before it: none leaves as durable.
					j.err = syncFailed(err)
				}
				j.done <- struct{}{}
			}
			y.waiting.Add(-int64(len(b.jobs)))
			if err == nil && b.wake != 0 && y.onDurable != nil {
				y.onDurable(b.wake)
			}
		}
	}
}

// syncOnce runs one fdatasync of the WAL, through the tests' hook if set.
func (y *syncer) syncOnce() error {
	y.syncs.Add(1)
	if h := y.hook.Load(); h != nil {
		return (*h)(y.syncWAL)
	}
	return y.syncWAL()
}

// finish records the end of a round that made batches up to target
// durable (err nil) or failed to, and wakes Durable's waiters. A durable
// batch that committed (okSeq) clears a failure the readiness probe shows
// from before it; a failed fdatasync breaks the syncer for good.
func (y *syncer) finish(target, okSeq uint64, err error) {
	y.mu.Lock()
	defer y.mu.Unlock()
	if err == nil {
		if target > y.durable.Load() {
			y.durable.Store(target)
		}
		if okSeq > 0 {
			y.health.durable(okSeq)
		}
	} else {
		y.broken.CompareAndSwap(nil, &err)
		y.health.fail(y.failed(), ^uint64(0))
	}
	close(y.round)
	y.round = make(chan struct{})
}

// wait returns once the batches ctx's reads may have seen (its ReadMark),
// or without one every batch sent to COMMIT before the call, are durable,
// or with the error of the fdatasync that failed (after which nothing
// more is durable).
func (y *syncer) wait(ctx context.Context) error {
	target := y.committed.Load()
	if m := xaalis.ReadMarkOf(ctx); m != nil {
		target = m.Seq()
	}
	for {
		if y.durable.Load() >= target {
			return nil
		}
		y.mu.Lock()
		if y.durable.Load() >= target {
			y.mu.Unlock()
			return nil
		}
		round := y.round
		y.mu.Unlock()
		if err := y.failed(); err != nil {
			return err
		}
		select {
		case <-round:
		case <-ctx.Done():
			return ctx.Err()
		case <-y.done:
			if y.durable.Load() >= target {
				return nil
			}
			return unavailable(errClosed)
		}
	}
}

// syncWAL fdatasyncs the WAL file. The file is opened once and kept; when
// SQLite made a new one (the path names another file), it is opened again
// and its directory synced, so that a new WAL's name survives a power cut
// as SQLite's own first sync of it would make it.
func (y *syncer) syncWAL() error {
	if y.f != nil {
		cur, err1 := y.f.Stat()
		now, err2 := os.Stat(y.wal)
		if err1 != nil || err2 != nil || !os.SameFile(cur, now) {
			y.f.Close()
			y.f = nil
		}
	}
	if y.f == nil {
		f, err := os.Open(y.wal)
		if err != nil {
			return fmt.Errorf("open the WAL to sync it: %w", err)
		}
		if err := syncDir(filepath.Dir(y.wal)); err != nil {
			f.Close()
			return err
		}
		y.f = f
	}
	if err := Fdatasync(y.f); err != nil {
		return fmt.Errorf("fdatasync the WAL: %w", err)
	}
	return nil
}

// syncDir fsyncs a directory, making the names in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open the database directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync the database directory: %w", err)
	}
	return nil
}

// close releases what is queued, once the writer has stopped, and closes
// the WAL file.
func (y *syncer) close() {
	close(y.stop)
	<-y.done
	if y.f != nil {
		y.f.Close()
	}
}

// syncFailed is the answer of a command, or of a read, once an fdatasync
// failed: what it did or saw may or may not be on the disk, and the server
// must be restarted (the database then recovers what is). A retry with
// the same Idempotency-Key, once restarted, answers what was kept or runs
// the command again.
func syncFailed(err error) error {
	var e *xaalis.Error
	if errors.As(err, &e) {
		return err
	}
	return &xaalis.Error{Code: xaalis.EServiceUnavailable, RetryAfter: 30 * time.Second, Cause: err,
		Message: "The database could not make its writes durable (an fsync failed): this server takes no more requests until it is restarted. Retry with the same Idempotency-Key."}
}
