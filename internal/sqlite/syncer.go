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
// for the batches committed after it. Webhook deliveries and provider
// calls follow a write of their own (the claim of the delivery, the
// attempt recorded before the call), so they leave durable state only.

// syncer makes the writer's commits durable, in order, and releases
// their answers.
type syncer struct {
	wal string
	// sync makes every write of the WAL durable (syncWAL); hook, when set
	// (tests), runs in its place and may call it.
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
	// waiters wake and look again.
	round chan struct{}
	// failedThrough is the last batch of the last round whose fdatasync
	// failed, failure its error: a waiter for a batch up to it gets the
	// error unless a later round made it durable.
	failedThrough uint64
	failure       error

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
func (y *syncer) add(seq uint64, jobs []*job, wake xaalis.Wakeup) {
	y.mu.Lock()
	y.queue = append(y.queue, syncBatch{seq: seq, jobs: jobs, wake: wake})
	y.mu.Unlock()
	select {
	case y.kick <- struct{}{}:
	default:
	}
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
		var err error
		synced := target > y.durable.Load()
		if synced {
			err = y.syncOnce()
		}
		y.finish(target, synced, err)
		for _, b := range q {
			for _, j := range b.jobs {
				if err != nil && j.err == nil {
					j.err = syncFailed(err)
				}
				j.done <- struct{}{}
			}
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
// durable (err nil) or failed to, and wakes Durable's waiters. A round
// that synced a new commit clears a failure the readiness probe shows;
// one that had nothing to sync (its batch failed) leaves it.
func (y *syncer) finish(target uint64, synced bool, err error) {
	y.mu.Lock()
	defer y.mu.Unlock()
	if err == nil {
		if target > y.durable.Load() {
			y.durable.Store(target)
		}
		if synced {
			y.health.set(nil)
		}
	} else {
		y.failedThrough, y.failure = target, err
		y.health.set(err)
	}
	close(y.round)
	y.round = make(chan struct{})
}

// wait returns once the batches ctx's reads may have seen (its ReadMark),
// or without one every batch sent to COMMIT before the call, are durable,
// or with the error of the fdatasync that failed to make one so.
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
		round, failed, failure := y.round, y.failedThrough >= target, y.failure
		y.mu.Unlock()
		if failed {
			return syncFailed(failure)
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
	if err := fdatasync(y.f); err != nil {
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

// syncFailed is the answer of a command whose batch committed but whose
// fdatasync failed: the database may keep it or not after a power cut. A
// retry with the same Idempotency-Key answers what was kept, or runs the
// command again.
func syncFailed(err error) error {
	var e *xaalis.Error
	if errors.As(err, &e) {
		return err
	}
	return &xaalis.Error{Code: xaalis.EServiceUnavailable, RetryAfter: time.Second, Cause: err,
		Message: "The database could not confirm this request reached the disk. Retry after Retry-After seconds with the same Idempotency-Key: the retry answers what was kept, or runs the request again."}
}
