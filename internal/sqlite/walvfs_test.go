package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/storetest"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// TestWALGathered: a batch's COMMIT writes its WAL frames (a header and a
// page each, two writes SQLite asks for) to the file in one write; what it
// committed is read at once by the read pool, and again after the store
// is closed and opened.
func TestWALGathered(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	m := storetest.NewMerchant(t, s)

	held, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = s.w.direct(ctx, func(querier) error { close(held); <-release; return nil })
	}()
	<-held
	const n = 8
	writes, flushes, batches := walWrites.Load(), walFlushes.Load(), s.w.batches.Load()
	errs := make([]error, n)
	var wg sync.WaitGroup
	now := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Update(ctx, func(tx xaalis.Tx) error {
				return tx.InsertTransaction(ctx, storetest.NewPayment(m, xaalis.ModeTest, "gathered-"+string(rune('a'+i)), now))
			})
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); len(s.w.queue) < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d commands queued, want %d", len(s.w.queue), n)
		}
	}
	close(release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
	}
	if got := s.w.batches.Load() - batches; got != 1 {
		t.Fatalf("the commands took %d transactions, want 1 batch", got)
	}
	asked, made := walWrites.Load()-writes, walFlushes.Load()-flushes
	if made != 1 || asked < 2*4 {
		t.Fatalf("the batch's COMMIT: SQLite asked for %d WAL writes, %d made; want many gathered in 1", asked, made)
	}
	t.Logf("one batch of %d payments: %d WAL writes gathered in %d", n, asked, made)

	count := func(s *Store, ref string) int {
		t.Helper()
		_, total, err := s.Transactions(ctx, xaalis.TxFilter{MerchantID: m.ID, Mode: xaalis.ModeTest, MerchantRef: ref},
			xaalis.PageRequest{Page: 1, PerPage: 1})
		if err != nil {
			t.Fatal(err)
		}
		return total
	}
	for i := range n {
		if got := count(s, "gathered-"+string(rune('a'+i))); got != 1 {
			t.Fatalf("payment %d read back: %d found", i, got)
		}
	}
	if got := count(s, ""); got != n {
		t.Fatalf("%d payments listed, want %d", got, n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := count(s, ""); got != n {
		t.Fatalf("after the store is opened again: %d payments listed, want %d", got, n)
	}
	if ps, err := s.CheckLedger(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("ledger check: %v %v", ps, err)
	}
}

// TestWALCopiedAfterCommit: the WAL file as it stands once a COMMIT has
// returned recovers everything the transaction wrote, copied aside and
// opened as a database of its own, as after a crash of the process. The
// transaction outgrows the writer's page cache, so SQLite writes frames
// before the COMMIT, writes some of them again in place and then rewrites
// their headers' checksums, the last a commit frame's header with no page
// after it: none of those may wait in memory.
func TestWALCopiedAfterCommit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "x.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.ckpt.poll.Store(int64(time.Hour)) // the database file stays as the COMMIT left it
	if err := s.w.direct(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, `PRAGMA cache_size = 8`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	const rows = 400
	rewrites := walRewrites.Load()
	if err := s.Update(ctx, func(xtx xaalis.Tx) error {
		q := xtx.(*Tx).tx
		for i := range rows {
			if _, err := q.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, randomblob(1000))`, fmt.Sprintf("spill-%03d", i)); err != nil {
				return err
			}
		}
		_, err := q.ExecContext(ctx, `UPDATE settings SET value = zeroblob(900) WHERE name < 'spill-100'`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if walRewrites.Load() == rewrites {
		t.Fatal("the transaction rewrote no frame in place: the test misses what it is for")
	}

	db, err := sql.Open("sqlite", "file:"+copyFiles(t, path))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n, zeroed int
	var check string
	if err := db.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE value = zeroblob(900)) FROM settings
		WHERE name LIKE 'spill-%'`).Scan(&n, &zeroed); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&check); err != nil {
		t.Fatal(err)
	}
	if n != rows || zeroed != 100 || check != "ok" {
		t.Fatalf("the copy holds %d rows, %d rewritten, integrity %q; want %d, 100 and ok", n, zeroed, check, rows)
	}
}

// copyFiles copies the database at path and its WAL, as they stand in the
// files, as a crash of the process would leave them, and returns the
// copy's path.
func copyFiles(t *testing.T, path string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "x.db")
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to+suffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// walBuffered is what the WAL files opened through walVFS hold in memory.
func walBuffered() (n int64) {
	walFilesMu.Lock()
	defer walFilesMu.Unlock()
	for _, w := range walFiles {
		n += w.n
	}
	return n
}

// openWAL opens path in WAL mode on one connection, through walVFS or the
// default VFS, with no automatic checkpoint.
func openWAL(t *testing.T, path string, gather bool) *sql.DB {
	t.Helper()
	if err := registerWALVFS(); err != nil {
		t.Fatal(err)
	}
	q := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=wal_autocheckpoint(0)"
	if gather {
		q += "&vfs=" + walVFS
	}
	db, err := sql.Open("sqlite", q)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// TestWALFirstCommitElsewhere: a commit whose frames do not continue the
// WAL's last write (the first after a rolled-back transaction that wrote
// frames, the first of a connection that opens a WAL holding frames, as
// after a crash) leaves nothing in memory once it returns; another
// connection reads it, and so does a copy of the files.
func TestWALFirstCommitElsewhere(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// before runs on the gathering connection w before its commit;
		// other is a connection of the default VFS.
		before func(t *testing.T, w *sql.Conn, other *sql.DB)
	}{
		{"after a rollback", func(t *testing.T, w *sql.Conn, _ *sql.DB) {
			for _, q := range []string{`PRAGMA cache_size = 4`, `BEGIN`} {
				if _, err := w.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			for range 40 { // spilled to the WAL before the ROLLBACK
				if _, err := w.ExecContext(ctx, `INSERT INTO big VALUES (randomblob(3000))`); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := w.ExecContext(ctx, `ROLLBACK`); err != nil {
				t.Fatal(err)
			}
		}},
		{"first of a connection", func(t *testing.T, _ *sql.Conn, other *sql.DB) {
			// Frames committed by another connection; w has written none.
			if _, err := other.ExecContext(ctx, `INSERT INTO big VALUES (randomblob(100))`); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.db")
			other := openWAL(t, path, false)
			for _, q := range []string{`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)`, `CREATE TABLE big (x BLOB)`,
				`INSERT INTO t VALUES (1, 'old')`} {
				if _, err := other.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			w, err := openWAL(t, path, true).Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if _, err := w.ExecContext(ctx, `SELECT count(*) FROM t`); err != nil {
				t.Fatal(err)
			}
			tc.before(t, w, other)
			if _, err := w.ExecContext(ctx, `UPDATE t SET v = 'new' WHERE id = 1`); err != nil {
				t.Fatal(err)
			}
			if n := walBuffered(); n != 0 {
				t.Fatalf("%d bytes still in memory after the COMMIT", n)
			}
			var v string
			if err := other.QueryRowContext(ctx, `SELECT v FROM t WHERE id = 1`).Scan(&v); err != nil || v != "new" {
				t.Fatalf("another connection reads %q, %v; want new", v, err)
			}
			cp := openWAL(t, copyFiles(t, path), false)
			var check string
			if err := cp.QueryRowContext(ctx, `SELECT v FROM t WHERE id = 1`).Scan(&v); err != nil || v != "new" {
				t.Fatalf("a copy of the files reads %q, %v; want new", v, err)
			}
			if err := cp.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
				t.Fatalf("a copy of the files: integrity %q, %v", check, err)
			}
		})
	}
}

// TestWALSectorPadding: with synchronous=FULL and psow=0 SQLite pads each
// commit to a sector with copies of its commit frame, and writes the page
// that crosses the sector's end in two parts; one part may be 24 bytes
// long, a frame header's size, with zeros where a header gives the
// database's size. Only a 24-byte write where a frame starts is a header:
// every commit is in the file once it returns, and another connection
// reads it. (The writer runs NORMAL with psow on, and never pads.)
func TestWALSectorPadding(t *testing.T) {
	ctx := context.Background()
	if err := registerWALVFS(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := sql.Open("sqlite", "file:"+path+"?psow=0&vfs="+walVFS)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	defer db.Close()
	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	blob := func(i int) []byte {
		b := bytes.Repeat([]byte{0xab}, 900)
		b[0] = byte(i)
		copy(b[880:], []byte{0, 0, 0, 0}) // the page's bytes 1004-1007
		return b
	}
	for _, q := range []string{`PRAGMA page_size = 1024`, `CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)`,
		`PRAGMA journal_mode = WAL`, `PRAGMA synchronous = FULL`, `PRAGMA wal_autocheckpoint = 0`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO t VALUES (1, ?)`, blob(0)); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 300; i++ {
		if _, err := db.ExecContext(ctx, `UPDATE t SET b = ? WHERE id = 1`, blob(i)); err != nil {
			t.Fatal(err)
		}
		if n := walBuffered(); n != 0 {
			t.Fatalf("commit %d: %d bytes still in memory after the COMMIT", i, n)
		}
		var got []byte
		if err := other.QueryRowContext(ctx, `SELECT b FROM t WHERE id = 1`).Scan(&got); err != nil || !bytes.Equal(got, blob(i)) {
			t.Fatalf("commit %d: another connection reads %d bytes, %v", i, len(got), err)
		}
	}
}
