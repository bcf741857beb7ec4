package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// TestRestartRetryAt: a RESTART that readers held off waits restartRetry
// before the next try; one that failed otherwise (the disk full) is tried
// at the next poll, so that the WAL starts over as soon as space returns.
func TestRestartRetryAt(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		err  error
		want time.Time
	}{
		{"readers held on", errRestartBusy, now.Add(restartRetry)},
		{"readers held on, wrapped", fmt.Errorf("restart: %w", errRestartBusy), now.Add(restartRetry)},
		{"another failure", errors.New("database or disk is full (13)"), now},
	} {
		if got := restartRetryAt(c.err, now); !got.Equal(c.want) {
			t.Errorf("%s: retry at %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRestartOnce: commits that land while the checkpointer passes over
// the WAL, before its RESTART takes the writer, leave the file changed
// from what the checkpointer saw before the pass; that is no reason to
// start the WAL over a second time. One RESTART, then none while nothing
// is written. (With the file stat'ed before the pass as the restarted
// one, every poll restarted again: each RESTART holds every command.)
func TestRestartOnce(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	s.ckpt.poll.Store(int64(time.Hour)) // the store's own checkpointer stays out of the way
	write := func(name string) {
		t.Helper()
		if err := s.Update(ctx, func(xtx xaalis.Tx) error {
			_, err := xtx.(*Tx).tx.ExecContext(ctx, `INSERT OR REPLACE INTO settings (name, value) VALUES (?, randomblob(20000))`, name)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	write("before")
	var calls atomic.Int64
	c, err := newCheckpointer(s.ckpt.path, func() error {
		calls.Add(1)
		write("during the pass") // the writer appends before the RESTART takes it
		return s.ckpt.restart()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	c.limit.Store(16 << 10)
	c.poll.Store(int64(2 * time.Millisecond))
	// A hang guard, not a speed measure: a RESTART that met a reader (or
	// the store's own checkpointer's first pass) is tried again only after
	// restartRetry (5 s). A guard of 10 s ended one CI run under the race
	// detector, likely after two such tries.
	for deadline := time.Now().Add(6 * restartRetry); c.restarted.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no RESTART in %v with the WAL past the limit", 6*restartRetry)
		}
	}
	time.Sleep(300 * time.Millisecond) // about 150 polls
	if n := calls.Load(); n != 1 {
		t.Errorf("the WAL was started over %d times for one crossing of the limit, want 1", n)
	}
}

// TestNoRestartOfAWALStartedOver: once a RESTART has started the WAL over,
// the file stays past the limit until a commit cuts it back (its first
// write and its cut are apart), or, here, where the writer's
// journal_size_limit is far above the checkpointer's, for good. Commits
// that add a few frames to the new log are no reason for another RESTART:
// the frames the WAL holds, not the file's size, decide. (Before, every
// such commit started the WAL over again, each time holding every
// command.)
func TestNoRestartOfAWALStartedOver(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	s.ckpt.poll.Store(int64(time.Hour)) // the store's own checkpointer stays out of the way
	write := func(name string, size int) {
		t.Helper()
		if err := s.Update(ctx, func(xtx xaalis.Tx) error {
			_, err := xtx.(*Tx).tx.ExecContext(ctx, `INSERT OR REPLACE INTO settings (name, value) VALUES (?, randomblob(?))`, name, size)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	write("before", 40000)
	var calls atomic.Int64
	c, err := newCheckpointer(s.ckpt.path, func() error {
		calls.Add(1)
		return s.ckpt.restart()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	const limit = 16 << 10
	c.limit.Store(limit)
	c.poll.Store(int64(2 * time.Millisecond))
	// A hang guard, not a speed measure: a RESTART that met a reader (or
	// the store's own checkpointer's first pass) is tried again only after
	// restartRetry (5 s). A guard of 10 s ended one CI run under the race
	// detector, likely after two such tries.
	for deadline := time.Now().Add(6 * restartRetry); c.restarted.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no RESTART in %v with the WAL past the limit", 6*restartRetry)
		}
	}
	for i := range 5 {
		write(fmt.Sprint("small ", i), 100) // a few frames, from the WAL's start
		time.Sleep(20 * time.Millisecond)   // about 10 polls
	}
	if fi, err := os.Stat(c.wal); err != nil || fi.Size() <= limit {
		t.Fatalf("the WAL file: %v, %v; want it past the limit, as the writer left it", fi, err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d RESTARTs, want 1: commits to a WAL started over restarted it again", n)
	}
	// The new log past the limit is started over again. A poll may stat
	// the file after the commit's write but pass before SQLite publishes
	// its frames (once under the race detector in CI): that pass counts
	// the frames before the commit, and the file is then taken for one
	// started over until it changes again. Under load the next commit
	// changes it; here the commits go on, a few a second, as they would.
	write("big", 40000)
	next := time.Now().Add(200 * time.Millisecond)
	for deadline := time.Now().Add(10 * time.Second); calls.Load() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no RESTART in 10 s with the WAL's frames past the limit")
		}
		if time.Now().After(next) {
			write("after big", 100)
			next = time.Now().Add(200 * time.Millisecond)
		}
	}
}

// TestWALLimit: the WAL may take walLimit, or a quarter of a smaller
// filesystem (the full-disk test's tmpfs), never less than minWALLimit;
// the writer's journal_size_limit, which cuts the file back after a
// RESTART, is the checkpointer's limit.
func TestWALLimit(t *testing.T) {
	for _, c := range []struct {
		fs, want int64
	}{
		{100 << 30, walLimit},
		{4 * walLimit, walLimit},
		{256 << 20, 64 << 20},
		{2 << 20, minWALLimit},
	} {
		if got := limitFor(c.fs); got != c.want {
			t.Errorf("a filesystem of %d MiB: limit %d MiB, want %d MiB", c.fs>>20, got>>20, c.want>>20)
		}
	}
	s := openTemp(t)
	size, ok := fsSize(filepath.Dir(s.ckpt.path))
	if !ok {
		size = 4 * walLimit
	}
	want := limitFor(size)
	if got := s.ckpt.limit.Load(); got != want {
		t.Errorf("the checkpointer's limit is %d, want %d (filesystem of %d MiB)", got, want, size>>20)
	}
	var jl int64
	if err := s.w.direct(context.Background(), func(q querier) error {
		return q.QueryRowContext(context.Background(), `PRAGMA journal_size_limit`).Scan(&jl)
	}); err != nil {
		t.Fatal(err)
	}
	if jl != want {
		t.Errorf("the writer's journal_size_limit is %d, want the checkpointer's %d", jl, want)
	}
}

// TestRestartAfterABusyPass: a pass that meets another connection's
// checkpoint (another process's, the store's own checkpointer's, an
// online backup's) does not run, and SQLite answers it with a row, not an
// error: -1 frames in the WAL. Taken for a count, that was a WAL started
// over, and a file past the limit then changed by no commit was never
// started over (a CI run under the race detector: no RESTART in 30 s).
// The pass is tried again at the next poll.
func TestRestartAfterABusyPass(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	s.ckpt.poll.Store(int64(time.Hour))
	write := func(name string) {
		t.Helper()
		if err := s.Update(ctx, func(xtx xaalis.Tx) error {
			_, err := xtx.(*Tx).tx.ExecContext(ctx, `INSERT OR REPLACE INTO settings (name, value) VALUES (?, randomblob(40000))`, name)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	conn := func(busyTimeout int) *sql.Conn {
		t.Helper()
		db, err := sql.Open("sqlite", fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)", URIPath(s.ckpt.path), busyTimeout))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	write("before")
	// A reader on that snapshot keeps another connection's FULL checkpoint
	// waiting, and holding the WAL's checkpoint lock, until it ends.
	reader := conn(0)
	if _, err := reader.ExecContext(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRowContext(ctx, `SELECT count(*) FROM settings`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	write("after the reader")
	full, fullConn := make(chan error, 1), conn(60000)
	fullDeadline := time.Now().Add(20 * time.Second)
	go func() {
		for {
			var busy, log, copied int
			err := fullConn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(FULL)`).Scan(&busy, &log, &copied)
			if err != nil || busy == 0 {
				full <- err
				return
			}
			if time.Now().After(fullDeadline) {
				full <- fmt.Errorf("the FULL checkpoint never held the lock in 20 s")
				return
			}
			// The probe's checkpoint held the lock (a checkpoint does not
			// wait for another): again, until this one holds it.
			time.Sleep(time.Millisecond)
		}
	}()
	probe := conn(0)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		var busy, log, copied int
		if err := probe.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &copied); err != nil {
			t.Fatal(err)
		}
		if busy == 1 && log == -1 {
			break // the FULL checkpoint holds the lock
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint held the lock in 10 s: %d, %d, %d", busy, log, copied)
		}
	}
	c, err := newCheckpointer(s.ckpt.path, s.ckpt.restart)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	c.limit.Store(16 << 10)
	c.poll.Store(int64(2 * time.Millisecond))
	for deadline := time.Now().Add(10 * time.Second); c.busy.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no pass met the other checkpoint in 10 s")
		}
	}
	if _, err := reader.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-full:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the FULL checkpoint did not end in 30 s once the reader had")
	}
	// A hang guard: the RESTART goes at the next poll.
	for deadline := time.Now().Add(6 * restartRetry); c.restarted.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no RESTART in %v once the other checkpoint ended, the WAL past the limit", 6*restartRetry)
		}
	}
}
