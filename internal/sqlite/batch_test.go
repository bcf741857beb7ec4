package sqlite

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/ledger"
	"github.com/xaalis/xaalis/internal/storetest"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// openTemp opens a store in a fresh file, closed when the test ends.
func openTemp(t *testing.T) *Store {
	t.Helper()
	return openPath(t, filepath.Join(t.TempDir(), "x.db"))
}

// openPath opens a store on the database at path, closed when the test
// ends.
func openPath(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestBatchFailingCommand holds the writer while four commands queue, so
// that they run in one batch: the ones that succeed commit, a constraint
// violation and a refusal each get their own error, and nothing of theirs
// (rows, stat and volume deltas, transactions counted, Idempotency-Keys
// counted against the quota) is kept. The quota of 2 keys is exact inside
// the batch: the last command's key is the second counted, and a key
// claimed after the batch is the third. The last command also settles the
// payment it inserted, on a merchant with no count yet: the lists' counts
// follow both.
func TestBatchFailingCommand(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	m := storetest.NewMerchant(t, s)

	if err := s.Update(ctx, func(xtx xaalis.Tx) error {
		_, err := xtx.(*Tx).tx.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES ('taken', x'01')`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	day := xaalis.VolumeDay(now)
	claim := func(key string) xaalis.Claim {
		return xaalis.Claim{Scope: xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: key},
			Fingerprint: []byte("fp"), Token: key, Now: now, Lease: time.Minute, QuotaLimit: 2, QuotaWindow: time.Hour}
	}
	put := func(name string) func(xaalis.Tx) error {
		return func(xtx xaalis.Tx) error {
			if r, err := xtx.ClaimIdempotency(ctx, claim(name)); err != nil || r.Outcome != xaalis.ClaimAcquired {
				return fmt.Errorf("claim %s: %+v %w", name, r, err)
			}
			if err := xtx.AddStats(ctx, day, 0, xaalis.StatDelta{Metric: "test", Key: name, Count: 1}); err != nil {
				return err
			}
			if err := xtx.AddVolume(ctx, []string{"test:" + name, "test:all"}, day, 100); err != nil {
				return err
			}
			if err := xtx.InsertTransaction(ctx, storetest.NewPayment(m, xaalis.ModeTest, name, now)); err != nil {
				return err
			}
			_, err := xtx.(*Tx).tx.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, x'01')`, name)
			return err
		}
	}
	refused := xaalis.E(xaalis.EInsufficientBalance)
	cmds := []struct {
		name string
		fn   func(xaalis.Tx) error
	}{
		{"first", put("first")},
		// The INSERT breaks the primary key, after the command added to a
		// counter.
		{"constraint", put("taken")},
		{"refused", func(xtx xaalis.Tx) error {
			if err := put("refused")(xtx); err != nil {
				return err
			}
			return refused
		}},
		{"last", func(xtx xaalis.Tx) error {
			if err := put("last")(xtx); err != nil {
				return err
			}
			x, err := xtx.TransactionByMerchantRefForUpdate(ctx, m.ID, xaalis.ModeTest, xaalis.KeySecret, "last")
			if err != nil {
				return err
			}
			x.Status = xaalis.StatusSuccess
			return xtx.UpdateTransaction(ctx, x)
		}},
	}
	var fns []func(xaalis.Tx) error
	for _, c := range cmds {
		fns = append(fns, c.fn)
	}
	errs := inOneBatch(t, s, fns...)
	if errs[0] != nil || errs[3] != nil {
		t.Fatalf("succeeding commands failed: %v, %v", errs[0], errs[3])
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "UNIQUE") {
		t.Fatalf("constraint violation: got %v", errs[1])
	}
	if !errors.Is(errs[2], refused) && errs[2] != error(refused) {
		t.Fatalf("refusal: got %v, want its own error", errs[2])
	}
	var names []string
	rows, err := s.readDB.QueryContext(ctx, `SELECT name FROM settings WHERE name IN ('first', 'refused', 'last') ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	rows.Close()
	if strings.Join(names, ",") != "first,last" {
		t.Fatalf("rows kept: %v, want first and last", names)
	}
	totals, err := s.StatTotals(ctx, day)
	if err != nil {
		t.Fatal(err)
	}
	counted := map[string]int64{}
	for _, st := range totals {
		if st.Metric == "test" {
			counted[st.Key] = st.Count
		}
	}
	if len(counted) != 2 || counted["first"] != 1 || counted["last"] != 1 {
		t.Fatalf("counters: %v, want first and last once each", counted)
	}
	volumes := map[string]int64{}
	rows, err = s.readDB.QueryContext(ctx, `SELECT scope, amount FROM volume_counters WHERE scope LIKE 'test:%' AND day = ?`, day)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var sc string
		var n int64
		if err := rows.Scan(&sc, &n); err != nil {
			t.Fatal(err)
		}
		volumes[sc] = n
	}
	rows.Close()
	if want := map[string]int64{"test:first": 100, "test:last": 100, "test:all": 200}; fmt.Sprint(volumes) != fmt.Sprint(want) {
		t.Fatalf("volumes: %v, want %v", volumes, want)
	}
	count := func(f xaalis.TxFilter) int {
		t.Helper()
		f.MerchantID, f.Mode = m.ID, xaalis.ModeTest
		_, n, err := s.Transactions(ctx, f, xaalis.PageRequest{Page: 1, PerPage: 1})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if all, initiated, success := count(xaalis.TxFilter{}), count(xaalis.TxFilter{Status: xaalis.StatusInitiated}),
		count(xaalis.TxFilter{Status: xaalis.StatusSuccess}); all != 2 || initiated != 1 || success != 1 {
		t.Fatalf("transactions counted: %d, %d initiated, %d success; want 2, 1 and 1", all, initiated, success)
	}
	if ps, err := s.CheckLedger(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("ledger check: %v %v", ps, err)
	}
	var claimed int
	if err := s.readDB.QueryRowContext(ctx, `SELECT count FROM idempotency_quota WHERE merchant_id = ?`, m.ID).Scan(&claimed); err != nil || claimed != 2 {
		t.Fatalf("keys counted against the quota: %d %v, want 2", claimed, err)
	}
	if r, err := s.ClaimIdempotency(ctx, claim("after")); err != nil || r.Outcome != xaalis.ClaimQuotaExceeded {
		t.Fatalf("a third key after the batch: %+v %v, want the quota exceeded", r, err)
	}
}

// inOneBatch holds the writer while it queues fns one after the other,
// then lets them run: in one batch, in this order. It returns their
// errors.
func inOneBatch(t *testing.T, s *Store, fns ...func(xaalis.Tx) error) []error {
	t.Helper()
	ctx := context.Background()
	// The writer runs a raw job that waits for release.
	held, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = s.w.direct(ctx, func(querier) error { close(held); <-release; return nil })
	}()
	<-held
	batches := s.w.batches.Load()
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.Update(ctx, fn) }()
		for deadline := time.Now().Add(10 * time.Second); len(s.w.queue) < i+1; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				close(release)
				t.Fatalf("%d commands queued, want %d", len(s.w.queue), i+1)
			}
		}
	}
	close(release)
	wg.Wait()
	if got := s.w.batches.Load() - batches; got != 1 {
		t.Fatalf("the commands took %d transactions, want 1 batch", got)
	}
	return errs
}

// TestBatchBalances: a batch sums the balance changes of entries that no
// balance can refuse (a payment's credit) and writes them before its
// COMMIT; an entry that may be refused must still see them. The first
// command credits a merchant's available money; the second debits it,
// which its check allows only with the credit counted, then fails: its
// savepoint takes back the credit's write too, and the batch must keep
// the credit for the third, whose debit leaves 100, so that the fourth's
// debit of 200 is refused. The balance is then 100 and equals the sum of
// the postings.
func TestBatchBalances(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	m := storetest.NewMerchant(t, s)
	available := ledger.Merchant(string(xaalis.ModeTest), m.ID, ledger.Available)
	clearing := ledger.Provider(string(xaalis.ModeTest), "channel_a", ledger.Clearing)
	world := ledger.World(string(xaalis.ModeTest))
	entry := func(id, from, to string, amount int64) *ledger.Entry { return transfer(m, id, from, to, amount) }
	failed := errors.New("the command fails after its debit")
	errs := inOneBatch(t, s,
		func(xtx xaalis.Tx) error { return xtx.PostEntry(ctx, entry("credit", clearing, available, 1000)) },
		func(xtx xaalis.Tx) error {
			if err := xtx.PostEntry(ctx, entry("undone", available, world, 800)); err != nil {
				return fmt.Errorf("a debit within the credit: %w", err)
			}
			return failed
		},
		func(xtx xaalis.Tx) error { return xtx.PostEntry(ctx, entry("debit", available, world, 900)) },
		func(xtx xaalis.Tx) error { return xtx.PostEntry(ctx, entry("refused", available, world, 200)) },
	)
	if errs[0] != nil || !errors.Is(errs[1], failed) || errs[2] != nil {
		t.Fatalf("credit, undone debit, debit: %v; %v; %v", errs[0], errs[1], errs[2])
	}
	if !errors.Is(errs[3], ledger.ErrNegative) {
		t.Fatalf("a debit past the balance: %v, want refused", errs[3])
	}
	wantBalances(t, s, map[string]int64{available: 100, clearing: -1000, world: 900})
}

// TestRefusalLeavesBalances: a command that goes on after an entry was
// refused finds the balances as they were, and commits them so. The
// CHECK on reserved money refuses the balances' UPDATE itself, which
// SQLite then undoes whole: the refusal must not take back deltas that
// were never added (it did: reserved 150, available -90).
func TestRefusalLeavesBalances(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	m := storetest.NewMerchant(t, s)
	mode := string(xaalis.ModeTest)
	available := ledger.Merchant(mode, m.ID, ledger.Available)
	reserved := ledger.Merchant(mode, m.ID, ledger.Reserved)
	clearing := ledger.Provider(mode, "channel_a", ledger.Clearing)
	entry := func(id, from, to string, amount int64) *ledger.Entry { return transfer(m, id, from, to, amount) }
	for _, e := range []*ledger.Entry{entry("to-available", clearing, available, 10), entry("to-reserved", clearing, reserved, 50)} {
		if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.PostEntry(ctx, e) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Update(ctx, func(tx xaalis.Tx) error {
		if err := tx.PostEntry(ctx, entry("release", reserved, available, 100)); !errors.Is(err, ledger.ErrNegative) {
			return fmt.Errorf("releasing 100 of 50 reserved: %v, want refused", err)
		}
		return nil // the command goes on, and commits
	}); err != nil {
		t.Fatal(err)
	}
	wantBalances(t, s, map[string]int64{available: 10, reserved: 50})
}

// transfer is a test-mode entry of m moving amount XOF from one account
// to another.
func transfer(m *xaalis.Merchant, id, from, to string, amount int64) *ledger.Entry {
	return &ledger.Entry{ID: id, Mode: string(xaalis.ModeTest), MerchantID: m.ID, Kind: "test", RefType: "test", RefID: id,
		CreatedAt: time.Now(), Postings: []ledger.Posting{
			{Account: from, Currency: "XOF", Amount: -amount},
			{Account: to, Currency: "XOF", Amount: amount},
		}}
}

// wantBalances checks the cached XOF balances of accounts, and that the
// ledger check finds every balance equal to the sum of its postings.
func wantBalances(t *testing.T, s *Store, want map[string]int64) {
	t.Helper()
	ctx := context.Background()
	accounts := make([]string, 0, len(want))
	for a := range want {
		accounts = append(accounts, a)
	}
	got, _, err := s.Balances(ctx, accounts, "XOF")
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("balances %v, want %v", got, want)
	}
	if ps, err := s.CheckLedger(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("ledger check: %v %v", ps, err)
	}
}

// TestCheckpointer: the writer never checkpoints (wal_autocheckpoint is
// 0); the checkpointer copies the WAL's frames into the database file
// within a pass or two, and starts their writing to the disk.
func TestCheckpointer(t *testing.T) {
	s := openTemp(t)
	writeRows(t, s, 50)
	for deadline := time.Now().Add(5 * checkpointEvery); s.ckpt.copied.Load() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no frame checkpointed")
		}
	}
	// Each pass then starts the writing of what it copied (writeBack), so
	// that the RESTART's fsync, on the writer's connection, finds little
	// left to write.
	for deadline := time.Now().Add(5 * time.Second); s.ckpt.writebacks.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no writeback started after a pass")
		}
	}
}

// writeRows commits n rows of 3,000 bytes, one a command, for the WAL to
// hold frames to checkpoint.
func writeRows(t *testing.T, s *Store, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		if err := s.Update(ctx, func(xtx xaalis.Tx) error {
			_, err := xtx.(*Tx).tx.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, randomblob(3000))`, fmt.Sprintf("row%d", i))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLeaveCheckpoints: a store that leaves checkpoints to the server
// owning the database copies nothing of the WAL, even of its own writes;
// the owner's checkpointer does.
func TestLeaveCheckpoints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	owner, beside := openPath(t, path), openPath(t, path)
	beside.LeaveCheckpoints()
	writeRows(t, beside, 50)
	for deadline := time.Now().Add(5 * checkpointEvery); owner.ckpt.copied.Load() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the owner checkpointed no frame")
		}
	}
	if n := beside.ckpt.copied.Load(); n != 0 {
		t.Errorf("the store beside the owner copied %d frames", n)
	}
}

// TestWALBounded: under writes and a steady flow of reads, the WAL file
// stays bounded while several times its limit of frames passes through
// it. The WAL starts over on its own only when no reader is inside it;
// past the limit the checkpointer starts it over (a RESTART), or the file
// would grow until the disk is full. (This test counted RESTARTs, two in
// 15 s, until the checkpointer stopped starting over a WAL that had
// started over on its own: with polls every 5 ms most passes find every
// frame copied, and the writer then starts the WAL over by itself. What
// the test must see is the file bounded, whoever starts the WAL over.)
func TestWALBounded(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A lower limit, so that the race detector's slower writes pass it
	// several times, and a shorter poll with it: the WAL may pass the
	// limit by what one poll lets the writer append.
	const limit = 1 << 20
	s.ckpt.limit.Store(limit)
	s.ckpt.poll.Store(int64(5 * time.Millisecond))
	// Each command writes a blob of blob bytes, so at least that much
	// of WAL frames. Once the commands have written through bytes of
	// blobs, a WAL that never started over would be at least through
	// bytes long: twice the bound checked below.
	const blob, through = 3000, 6 * limit
	var commands atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := s.Update(ctx, func(xtx xaalis.Tx) error {
					_, err := xtx.(*Tx).tx.ExecContext(ctx, `INSERT OR REPLACE INTO settings (name, value) VALUES (?, randomblob(?))`, fmt.Sprintf("row-%d-%d", w, i%50), blob)
					return err
				}); err != nil {
					t.Error(err)
					return
				}
				commands.Add(1)
				var n int
				if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM settings`).Scan(&n); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var most int64
	deadline := time.Now().Add(60 * time.Second)
	for commands.Load()*blob < through && time.Now().Before(deadline) && !t.Failed() {
		time.Sleep(20 * time.Millisecond)
		if fi, err := os.Stat(path + "-wal"); err == nil {
			most = max(most, fi.Size())
		}
	}
	close(stop)
	wg.Wait()
	if fi, err := os.Stat(path + "-wal"); err == nil {
		most = max(most, fi.Size())
	}
	if n := commands.Load(); n*blob < through {
		t.Fatalf("only %d commands (%d MiB of blobs) in 60 s, want %d MiB through the WAL", n, n*blob>>20, through>>20)
	}
	if most > 3*limit {
		t.Errorf("the WAL reached %d KiB, past 3 × the %d KiB limit, with %d MiB written through it", most>>10, limit>>10, commands.Load()*blob>>20)
	}
	t.Logf("largest WAL %d KiB, %d MiB written through it, %d RESTARTs", most>>10, commands.Load()*blob>>20, s.ckpt.restarted.Load())
}

// TestWriterYieldsOnce: the writer, finding the queue empty, yields its CPU
// once before it commits, so that a request already runnable queues its
// command in time to join the batch. With one CPU: a command whose
// goroutine is runnable, not yet running, when the first is queued commits
// in the first's batch; a lone command commits alone, without waiting for
// anything. (Under the race detector the scheduler may run that goroutine
// before the writer, which batches the two without the yield too.)
//
// The pair is tried many times and most must batch, not all: one schedule
// in 61 the runtime takes its global run queue first (schedule's fairness
// check), where Gosched put the writer, and the writer then commits before
// the runnable request queues; about one pair in 60 commits twice. Without
// the yield no pair batches.
func TestWriterYieldsOnce(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	noop := func(xaalis.Tx) error { return nil }
	counts := func() (commits, commands int64) {
		st := s.Stats()
		return st.Transactions, st.Commands
	}

	c0, n0 := counts()
	if err := s.Update(ctx, noop); err != nil {
		t.Fatal(err)
	}
	c1, n1 := counts()
	if c1-c0 != 1 || n1-n0 != 1 {
		t.Fatalf("a lone command: %d commits of %d commands, want 1 of 1", c1-c0, n1-n0)
	}

	const pairs = 40
	batched := 0
	for i := 0; i < pairs; i++ {
		c1, n1 := counts()
		second := make(chan error, 1)
		go func() { second <- s.Update(ctx, noop) }()
		if err := s.Update(ctx, noop); err != nil {
			t.Fatal(err)
		}
		if err := <-second; err != nil {
			t.Fatal(err)
		}
		c2, n2 := counts()
		if n2-n1 != 2 {
			t.Fatalf("pair %d: %d commands counted, want 2", i, n2-n1)
		}
		if c2-c1 == 1 {
			batched++
		}
	}
	if batched < pairs*3/4 {
		t.Fatalf("two commands, the second runnable when the first queued: %d of %d pairs committed in one batch, want at least %d", batched, pairs, pairs*3/4)
	}
}
