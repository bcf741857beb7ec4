package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/xaalis/xaalis/internal/postgres/pgtest"
)

// TestReadPipe: reads that wait together go in one pipeline, each gets its
// own row; a read that fails in a pipeline gets its own error and the
// reads after it are answered; a read whose request is gone is not sent.
func TestReadPipe(t *testing.T) {
	ctx := context.Background()
	s := openURL(t, pgtest.URL(t))
	// Both readers wait on an advisory lock this connection holds, while
	// the reads under test queue behind them.
	holder := openURL(t, pgtest.URL(t))
	lockConn, err := holder.AcquireRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lockConn.Release()
	hold := func(t *testing.T) (release func()) {
		t.Helper()
		if _, err := lockConn.Exec(ctx, `SELECT pg_advisory_lock(7357)`); err != nil {
			t.Fatal(err)
		}
		// One blocked read a reader: the second is queued once the first
		// waits for the lock, so that the other reader takes it.
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() {
				var one int
				if err := s.PipeRead(ctx, `SELECT 1 FROM (SELECT pg_advisory_xact_lock_shared(7357)) AS l`, nil, &one); err != nil {
					t.Error(err)
				}
			})
			waitFor(t, func() bool {
				var n int
				err := lockConn.QueryRow(ctx, `SELECT count(*) FROM pg_locks
					WHERE locktype = 'advisory' AND objid = 7357 AND NOT granted`).Scan(&n)
				return err == nil && n == i+1
			})
		}
		return func() {
			if _, err := lockConn.Exec(ctx, `SELECT pg_advisory_unlock(7357)`); err != nil {
				t.Error(err)
			}
			wg.Wait()
		}
	}
	type read struct {
		arg  int
		got  int
		err  error
		ctx  context.Context
		sent bool
	}
	// queue starts the reads one after the other, each queued before the
	// next, and returns once all are answered.
	queue := func(t *testing.T, reads []*read) {
		t.Helper()
		release := hold(t)
		var wg sync.WaitGroup
		for i, r := range reads {
			if r.ctx == nil {
				r.ctx = ctx
			}
			wg.Go(func() {
				r.err = s.PipeRead(r.ctx, `SELECT 100 / $1::int`, []any{r.arg}, &r.got)
			})
			waitFor(t, func() bool { return s.PipeQueued() == i+1 })
		}
		release()
		wg.Wait()
	}

	t.Run("one pipeline", func(t *testing.T) {
		reads := make([]*read, 20)
		for i := range reads {
			reads[i] = &read{arg: i + 1}
		}
		p0, n0 := s.PipeCounts()
		queue(t, reads)
		p1, n1 := s.PipeCounts()
		for _, r := range reads {
			if r.err != nil || r.got != 100/r.arg {
				t.Fatalf("100 / %d = %d, %v", r.arg, r.got, r.err)
			}
		}
		// The two held reads, then the twenty in one or two pipelines
		// (both readers wake at the release).
		if p, n := p1-p0, n1-n0; n != 22 || p > 4 {
			t.Fatalf("%d reads in %d pipelines; want 22 in at most 4", n, p)
		}
	})

	t.Run("a read that fails", func(t *testing.T) {
		reads := []*read{{arg: 1}, {arg: 2}, {arg: 0}, {arg: 4}, {arg: 5}}
		queue(t, reads)
		for _, r := range reads {
			var pe *pgconn.PgError
			switch {
			case r.arg == 0 && (!errors.As(r.err, &pe) || pe.Code != "22012"):
				t.Fatalf("100 / 0: %v, want division_by_zero", r.err)
			case r.arg != 0 && (r.err != nil || r.got != 100/r.arg):
				t.Fatalf("100 / %d = %d, %v", r.arg, r.got, r.err)
			}
		}
	})

	t.Run("a read whose request is gone", func(t *testing.T) {
		gone, cancel := context.WithCancel(ctx)
		reads := []*read{{arg: 1}, {arg: 2, ctx: gone}, {arg: 4}}
		release := hold(t)
		var wg sync.WaitGroup
		for i, r := range reads {
			if r.ctx == nil {
				r.ctx = ctx
			}
			wg.Go(func() { r.err = s.PipeRead(r.ctx, `SELECT 100 / $1::int`, []any{r.arg}, &r.got) })
			waitFor(t, func() bool { return s.PipeQueued() == i+1 })
		}
		cancel()
		release()
		wg.Wait()
		if !errors.Is(reads[1].err, context.Canceled) || reads[1].got != 0 {
			t.Fatalf("the gone read: %d, %v", reads[1].got, reads[1].err)
		}
		if reads[0].err != nil || reads[0].got != 100 || reads[2].err != nil || reads[2].got != 25 {
			t.Fatalf("the others: %+v %+v", reads[0], reads[2])
		}
	})
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
