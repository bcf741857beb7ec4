package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// heldSync replaces the syncer's fdatasync: each sync signals entered and
// waits for a value on release, which it returns (nil: the real
// fdatasync's result).
type heldSync struct {
	entered chan struct{}
	release chan error
}

// holdSyncs holds s's fdatasyncs until the test releases them, or ends
// (a failing test must not leave the store's Close waiting).
func holdSyncs(t *testing.T, s *Store) *heldSync {
	h := &heldSync{entered: make(chan struct{}, 16), release: make(chan error)}
	ended := make(chan struct{})
	hook := func(sync func() error) error {
		h.entered <- struct{}{}
		select {
		case err := <-h.release:
			if err != nil {
				return err
			}
		case <-ended:
		}
		return sync()
	}
	s.w.sy.hook.Store(&hook)
	t.Cleanup(func() { close(ended) })
	return h
}

// setting is a write of one settings row.
func setting(name string) func(xaalis.Tx) error {
	return func(xtx xaalis.Tx) error {
		_, err := xtx.(*Tx).tx.ExecContext(context.Background(),
			`INSERT INTO settings (name, value) VALUES (?, x'01')`, name)
		return err
	}
}

// start runs a command writing the settings row name in the background
// and returns its answer.
func start(s *Store, name string) <-chan error {
	c := make(chan error, 1)
	go func() { c <- s.Update(context.Background(), setting(name)) }()
	return c
}

// readSetting reports whether a reader of the pool sees the row.
func readSetting(t *testing.T, s *Store, name string) bool {
	t.Helper()
	return readSettingCtx(t, context.Background(), s, name)
}

func readSettingCtx(t *testing.T, ctx context.Context, s *Store, name string) bool {
	t.Helper()
	var n int
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM settings WHERE name = ?`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// durableNow reports whether what ctx's reads saw (without a ReadMark:
// everything committed so far) is durable, without waiting: Durable with
// a context already done returns nil only when it has nothing to wait
// for.
func durableNow(s *Store) error { return durableNowCtx(context.Background(), s) }

func durableNowCtx(ctx context.Context, s *Store) error {
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	return s.Durable(ctx)
}

// TestAnswerWaitsForSync holds the syncer's fdatasync: the command has
// committed (a reader sees its row) but its answer does not leave, and
// Durable has a commit to wait for, until the fdatasync returns.
func TestAnswerWaitsForSync(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	h := holdSyncs(t, s)

	answered := start(s, "held")
	<-h.entered
	if !readSetting(t, s, "held") {
		t.Fatal("the command's row is not visible while its batch is being synced: the COMMIT waited for the disk")
	}
	select {
	case err := <-answered:
		t.Fatalf("Update answered (%v) while its batch's fdatasync had not returned", err)
	default:
	}
	if err := durableNow(s); !errors.Is(err, context.Canceled) {
		t.Fatalf("Durable while the fdatasync is held = %v, want it waiting (context.Canceled)", err)
	}
	h.release <- nil
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if err := s.Durable(ctx); err != nil {
		t.Fatalf("Durable after the fdatasync: %v", err)
	}
	if err := durableNow(s); err != nil {
		t.Fatalf("Durable with nothing to wait for = %v, want nil", err)
	}
}

// TestWriterGoesOnDuringSync holds the first fdatasync: the writer commits
// the next commands meanwhile (their rows are visible), none of them is
// answered, and one fdatasync then makes them all durable.
func TestWriterGoesOnDuringSync(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	h := holdSyncs(t, s)

	var wg sync.WaitGroup
	errs := make(chan error, 21)
	update := func(name string) {
		defer wg.Done()
		errs <- s.Update(ctx, setting(name))
	}
	wg.Add(1)
	go update("first")
	<-h.entered
	syncs := s.w.sy.syncs.Load()
	for i := range 20 {
		wg.Add(1)
		go update(fmt.Sprintf("next-%d", i))
	}
	// Each of the 20 is committed while the first fdatasync is held. (The
	// deadline only keeps a writer that waits for the disk from hanging
	// the test.)
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < 20; {
		if readSetting(t, s, fmt.Sprintf("next-%d", i)) {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the 20 commands committed while the first fdatasync was held: the writer waits for the disk", i)
		}
		time.Sleep(time.Millisecond)
	}
	if n := len(errs); n != 0 {
		t.Fatalf("%d commands answered while the first fdatasync was held", n)
	}
	h.release <- nil // the first
	<-h.entered      // one more covers the 20
	h.release <- nil
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := s.w.sy.syncs.Load() - syncs; got != 1 {
		t.Errorf("the 20 commands committed during the first fdatasync took %d more, want 1", got)
	}
	if err := durableNow(s); err != nil {
		t.Fatalf("Durable after the last fdatasync = %v", err)
	}
}

// TestSyncFailure fails one fdatasync: its command answers
// service_unavailable, and so does every later command and every Durable
// for what it did not cover, and the readiness probe stays failed: after a
// failed fdatasync Linux may have dropped the pages it could not write, so
// no later fdatasync can vouch for them (the server must be restarted).
// What was durable before stays durable.
func TestSyncFailure(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	if err := s.Update(ctx, setting("before")); err != nil {
		t.Fatal(err)
	}
	readBefore := xaalis.WithReadMark(ctx)
	readSettingCtx(t, readBefore, s, "before")
	h := holdSyncs(t, s)

	answered := start(s, "unsynced")
	<-h.entered
	waited := make(chan error, 1)
	go func() { waited <- s.Durable(ctx) }()
	h.release <- errors.New("EIO (injected)")
	unavailable := func(what string, err error) {
		t.Helper()
		var e *xaalis.Error
		if !errors.As(err, &e) || e.Code != xaalis.EServiceUnavailable {
			t.Fatalf("%s = %v, want service_unavailable", what, err)
		}
	}
	unavailable("a command whose fdatasync failed", <-answered)
	unavailable("Durable over a failed fdatasync", <-waited)
	unavailable("a command after a failed fdatasync", s.Update(ctx, setting("after")))
	unavailable("Durable after a failed fdatasync", durableNow(s))
	if err := s.Durable(readBefore); err != nil {
		t.Fatalf("Durable for a read of what was durable before the failure = %v, want nil", err)
	}
	if s.w.health.err() == nil {
		t.Error("the readiness probe does not see the failed fdatasync")
	}
	unavailable("the readiness probe", s.Ping(ctx))
}

// TestReadMark: a request's answer waits for the batches its reads may
// have seen, not for one committed after them: a read that saw a batch
// whose fdatasync is held must wait; a request that read nothing, or read
// before that batch was committed, need not.
func TestReadMark(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	before := xaalis.WithReadMark(ctx)
	if readSetting(t, s, "marked") {
		t.Fatal("row there before its write")
	}
	readSettingCtx(t, before, s, "other") // read before the batch below
	h := holdSyncs(t, s)
	answered := start(s, "marked")
	<-h.entered

	saw := xaalis.WithReadMark(ctx)
	if !readSettingCtx(t, saw, s, "marked") {
		t.Fatal("the committed row is not visible")
	}
	if err := durableNowCtx(saw, s); !errors.Is(err, context.Canceled) {
		t.Fatalf("Durable after a read that saw a batch not yet durable = %v, want it waiting", err)
	}
	if err := durableNowCtx(xaalis.WithReadMark(ctx), s); err != nil {
		t.Fatalf("Durable for a request that read nothing = %v, want nil at once", err)
	}
	if err := durableNowCtx(before, s); err != nil {
		t.Fatalf("Durable for a request that read before the batch was committed = %v, want nil at once", err)
	}
	h.release <- nil
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if err := s.Durable(saw); err != nil {
		t.Fatal(err)
	}
}

// TestReadSnapshotAtQuery: a read's snapshot is taken inside QueryContext
// (modernc.org/sqlite steps to the first row there), so a batch committed
// between the call and the Scan is not in its answer. The ReadMark relies
// on it: it records the last batch once the call has returned.
func TestReadSnapshotAtQuery(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	row := s.read.QueryRowContext(ctx, `SELECT count(*) FROM settings WHERE name = 'late'`)
	if err := s.Update(ctx, setting("late")); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := row.Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("a read saw a commit made after its QueryRowContext returned: its snapshot is taken later than the ReadMark assumes")
	}
}

// TestCommitFailureKeepsProbeFailed: a batch whose COMMIT fails leaves
// the readiness probe failed after its round with the syncer; the next
// batch that commits and becomes durable clears it.
func TestCommitFailureKeepsProbeFailed(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	err := s.Update(ctx, func(xtx xaalis.Tx) error {
		tx := xtx.(*Tx).tx
		// A foreign key checked at COMMIT only: the COMMIT fails.
		if _, err := tx.ExecContext(ctx, `PRAGMA defer_foreign_keys = ON`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO ledger_postings (entry_id, line, account, currency, amount)
			VALUES ('no-such-entry', 1, 'a', 'XOF', 1)`)
		return err
	})
	var e *xaalis.Error
	if !errors.As(err, &e) || e.Code != xaalis.EServiceUnavailable {
		t.Fatalf("a batch whose COMMIT failed answered %v, want service_unavailable", err)
	}
	if s.w.health.err() == nil {
		t.Fatal("the readiness probe was cleared by the round of a batch whose COMMIT failed")
	}
	if err := s.Update(ctx, setting("next")); err != nil {
		t.Fatal(err)
	}
	if err := s.w.health.err(); err != nil {
		t.Fatalf("the readiness probe still fails after a later batch committed and became durable: %v", err)
	}
}
