package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/xaalis/xaalis/internal/postgres/pgtest"
	"github.com/xaalis/xaalis/internal/storetest"
	"github.com/xaalis/xaalis/internal/xaalis"
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
		p0, n0, st0 := s.PipeCounts()
		queue(t, reads)
		p1, n1, st1 := s.PipeCounts()
		for _, r := range reads {
			if r.err != nil || r.got != 100/r.arg {
				t.Fatalf("100 / %d = %d, %v", r.arg, r.got, r.err)
			}
		}
		// The two held reads, then the twenty in one or two pipelines
		// (both readers wake at the release), each pipeline's reads of
		// the one statement merged into one.
		if p, n, st := p1-p0, n1-n0, st1-st0; n != 22 || p > 4 || st > p {
			t.Fatalf("%d reads in %d pipelines, %d statements; want 22 in at most 4, a statement each", n, p, st)
		}
	})

	t.Run("a read with no row", func(t *testing.T) {
		release := hold(t)
		got := make([]int, 5)
		errs := make([]error, 5)
		var wg sync.WaitGroup
		for i := range got {
			wg.Go(func() {
				errs[i] = s.PipeRead(ctx, `SELECT 100 / $1::int WHERE $1::int <> 3`, []any{i + 1}, &got[i])
			})
			waitFor(t, func() bool { return s.PipeQueued() == i+1 })
		}
		release()
		wg.Wait()
		for i := range got {
			if i+1 == 3 {
				if !errors.Is(errs[i], pgx.ErrNoRows) {
					t.Fatalf("the read with no row: %d, %v; want no rows", got[i], errs[i])
				}
			} else if errs[i] != nil || got[i] != 100/(i+1) {
				t.Fatalf("100 / %d = %d, %v", i+1, got[i], errs[i])
			}
		}
	})

	t.Run("reads not asked to merge", func(t *testing.T) {
		release := hold(t)
		got := make([]int, 3)
		errs := make([]error, 3)
		_, n0, st0 := s.PipeCounts()
		var wg sync.WaitGroup
		for i := range got {
			wg.Go(func() { errs[i] = s.PipeReadAlone(ctx, `SELECT 100 / $1::int`, []any{i + 1}, &got[i]) })
			waitFor(t, func() bool { return s.PipeQueued() == i+1 })
		}
		release()
		wg.Wait()
		_, n1, st1 := s.PipeCounts()
		if !slices.Equal(got, []int{100, 50, 33}) || errors.Join(errs...) != nil {
			t.Fatalf("got %v, %v", got, errors.Join(errs...))
		}
		if n, st := n1-n0, st1-st0; st != n {
			t.Fatalf("%d reads in %d statements; want a statement each", n, st)
		}
	})

	t.Run("arguments that do not merge", func(t *testing.T) {
		release := hold(t)
		args := []any{true, false, true}
		got := make([]string, len(args))
		errs := make([]error, len(args))
		var wg sync.WaitGroup
		for i, a := range args {
			wg.Go(func() {
				errs[i] = s.PipeRead(ctx, `SELECT CASE WHEN $1::bool THEN 'yes' ELSE 'no' END`, []any{a}, &got[i])
			})
			waitFor(t, func() bool { return s.PipeQueued() == i+1 })
		}
		release()
		wg.Wait()
		if !slices.Equal(got, []string{"yes", "no", "yes"}) || errors.Join(errs...) != nil {
			t.Fatalf("got %q, %v", got, errors.Join(errs...))
		}
	})

	// The store's own reads: keys and their merchants, with and without an
	// Idempotency-Key, a key that does not exist, and volumes, each read
	// getting its own answer from its kind's one statement.
	t.Run("a store's reads", func(t *testing.T) {
		pepper := []byte("pepper")
		var hashes [][]byte
		var merchants []*xaalis.Merchant
		var qs []xaalis.VolumeQuery
		for i := range 4 {
			m := storetest.NewMerchant(t, s)
			k, secret := xaalis.NewKey(xaalis.NewUUIDv7(), m.ID, xaalis.KeySecret, xaalis.ModeTest, nil, nil, nil, pepper, time.Now())
			x := storetest.NewPayment(m, xaalis.ModeTest, "vol", time.Now())
			err := s.Update(ctx, func(tx xaalis.Tx) error {
				if err := tx.CreateKey(ctx, k); err != nil {
					return err
				}
				return tx.AddVolume(ctx, xaalis.VolumeScopes(x), xaalis.VolumeDay(x.CreatedAt), int64(1000*(i+1)))
			})
			if err != nil {
				t.Fatal(err)
			}
			hashes, merchants = append(hashes, xaalis.HashKey(pepper, secret)), append(merchants, m)
			qs = append(qs, xaalis.VolumeQuery{Mode: xaalis.ModeTest, MerchantID: m.ID, Since: x.CreatedAt, HoldSince: x.CreatedAt})
		}
		type read struct {
			hash    []byte
			idem    string
			volumes []xaalis.VolumeQuery
			m       *xaalis.Merchant
			vol     []int64
			err     error
		}
		var reads []*read
		for i := range hashes {
			reads = append(reads, &read{hash: hashes[i]}, &read{hash: hashes[i], idem: fmt.Sprintf("idem-%d", i)},
				&read{volumes: qs[i : i+1]})
		}
		reads = append(reads, &read{hash: []byte("no such key")}, &read{hash: []byte("no such key"), idem: "idem-x"})
		p0, n0, st0 := s.PipeCounts()
		release := hold(t)
		var wg sync.WaitGroup
		for i, r := range reads {
			wg.Go(func() {
				if r.volumes != nil {
					r.vol, r.err = s.Volumes(ctx, r.volumes)
					return
				}
				_, r.m, _, r.err = s.KeyByHash(ctx, r.hash, r.idem)
			})
			waitFor(t, func() bool { return s.PipeQueued() == i+1 })
		}
		release()
		wg.Wait()
		p1, n1, st1 := s.PipeCounts()
		for i, r := range reads {
			switch {
			case r.volumes != nil:
				if want := int64(1000 * (i/3 + 1)); r.err != nil || len(r.vol) != 1 || r.vol[0] != want {
					t.Errorf("read %d: volumes %v, %v; want [%d]", i, r.vol, r.err, want)
				}
			case i >= 3*len(hashes):
				if !errors.Is(r.err, xaalis.ErrNotFound) {
					t.Errorf("read %d, no such key: %v, %v; want not_found", i, r.m, r.err)
				}
			case r.err != nil || r.m.ID != merchants[i/3].ID:
				t.Errorf("read %d: merchant %v, %v; want %s", i, r.m, r.err, merchants[i/3].ID)
			}
		}
		// The two held reads alone, then two statements (key, key and
		// Idempotency-Key) in each of at most two pipelines, and the
		// volumes' four reads, which do not merge.
		if p, n, st := p1-p0, n1-n0, st1-st0; n != int64(len(reads)+2) || st > 2+2*2+4 {
			t.Fatalf("%d reads in %d pipelines, %d statements; want %d in at most 10 statements", n, p, st, len(reads)+2)
		}
	})

	// A merged statement's generic plan looks dearer than its custom
	// plans (unnest's 10 rows against the arrays' length): the pipeline
	// sets plan_cache_mode so that it is not planned at every call.
	t.Run("merged reads plan once", func(t *testing.T) {
		const sql = `SELECT $1::int * 2 FROM (SELECT 1) AS one WHERE $1::int > 0`
		for range 8 {
			release := hold(t)
			var wg sync.WaitGroup
			for i := range 3 {
				wg.Go(func() {
					var got int
					if err := s.PipeRead(ctx, sql, []any{i + 1}, &got); err != nil || got != 2*(i+1) {
						t.Errorf("%d * 2 = %d, %v", i+1, got, err)
					}
				})
				waitFor(t, func() bool { return s.PipeQueued() == i+1 })
			}
			release()
			wg.Wait()
		}
		counts, err := s.PlanCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var generic int64
		for _, p := range counts {
			if strings.Contains(p.Statement, "WITH ORDINALITY") && strings.Contains(p.Statement, "r.p1::int * 2") {
				if p.Custom > 0 {
					t.Errorf("merged statement planned for its values %d times: %s", p.Custom, oneLine(p.Statement))
				}
				generic += p.Generic
			}
		}
		if generic < 4 {
			t.Errorf("the merged statement ran %d times on its generic plan; want a pipeline's at least", generic)
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
