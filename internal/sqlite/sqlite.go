// Package sqlite is the Store on an embedded SQLite database
// (modernc.org/sqlite, no cgo), configured for money: WAL, foreign keys, a
// busy timeout, and one writer connection beside a pool of readers. The
// writer commits batches of commands without waiting for the disk
// (synchronous=NORMAL) and a syncer fdatasyncs the WAL before any of their
// answers leaves: as durable as synchronous=FULL, without the writer
// standing idle in each fsync (syncer.go).
package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/xaalis/xaalis/internal/xaalis"
)

//go:embed migration/*.sql
var migrations embed.FS

// Store is the SQLite Store.
type Store struct {
	path   string
	write  *sql.DB // one connection, held by w: SQLite has one writer at a time
	w      *writer
	readDB *sql.DB
	read   connq // readDB through prepared statements
	// point is read for the reads every request makes, bounded by an
	// index (the key, a payment's volumes, a record by id or reference):
	// they ignore the request's end. The driver watches a cancellable
	// context with a goroutine per statement, and on two CPUs those
	// goroutines' turns held up the requests: without them a payment
	// creates 1 goroutine instead of 5, runnable goroutines wait 140 µs
	// on average instead of 300, and create-payment ran about 13 % faster
	// (ten alternated pairs, -8 to +19 %). A read of microseconds has
	// nothing to cancel.
	point connq
	wake  xaalis.Signals
	// box seals the secrets the database keeps (SetSecretBox).
	boxMu sync.RWMutex
	box   xaalis.SecretBox
	// resealed: ResealSecrets replaced values since its last checkpoint.
	resealed atomic.Bool
	// ckpt checkpoints the WAL beside the writer (see checkpointer).
	ckpt *checkpointer
}

var _ xaalis.Store = (*Store)(nil)

// ParseURL turns "sqlite://./dir/x.db", "sqlite:///abs/x.db" or a bare
// path into a file path.
func ParseURL(u string) (string, error) {
	const p = "sqlite://"
	if len(u) >= len(p) && u[:len(p)] == p {
		u = u[len(p):]
	} else if len(u) >= 7 && u[:7] == "sqlite:" {
		u = u[7:]
	}
	if u == "" {
		return "", errors.New("sqlite: empty database path")
	}
	return u, nil
}

// pageSize is the page size of a database this store creates. A command
// changes a few rows in each of about thirty B-trees, and every page it
// changes goes to the WAL whole: with 4,096-byte pages a payment appended
// about 70 KiB to the WAL under load, and the fdatasync every answer waits
// for takes longer with every KiB it writes. With 1,024-byte pages a
// payment writes about 29 KiB, for the same CPU, and create-payment ran 8
// to 16 % faster in six alternated pairs; on a database of 1,000,000
// payments status and list read as fast (docs/write-path.md, item 10).
const pageSize = 1024

func dsn(path string, write bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "journal_mode(WAL)")
	// Temporary structures in memory: above all the sub-journal of each
	// command's SAVEPOINT in a batch, which SQLite otherwise spills to a
	// temporary file (a pwrite per page the command changes, 15% of the
	// writer's CPU under load). The sub-journal only serves ROLLBACK TO;
	// durability is the WAL's.
	q.Add("_pragma", "temp_store(MEMORY)")
	if write {
		// The WAL is checkpointed by the checkpointer's connection, not at
		// the writer's commits: a checkpoint copies pages and fsyncs the
		// database file, work that would stall every command queued
		// behind the batch that crossed the threshold.
		q.Add("_pragma", "wal_autocheckpoint(0)")
		// After the checkpointer's RESTART the WAL is written again from
		// its start and, at the next commit, cut back to its limit
		// (walLimitFor, the checkpointer's): the file keeps its blocks
		// (appends that grow a file make each fdatasync write the file's
		// size too) but never grows past the limit by more than a
		// checkpoint's delay.
		q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", walLimitFor(path)))
		// BEGIN IMMEDIATE takes the write lock at the start of a transaction,
		// so two processes never deadlock upgrading a read lock.
		q.Set("_txlock", "immediate")
		// The WAL's frames in one write at each COMMIT (walvfs.go).
		q.Set("vfs", walVFS)
	} else {
		q.Add("_pragma", "query_only(1)")
	}
	return "file:" + URIPath(path) + "?" + q.Encode()
}

// URIPath escapes the characters a file: URI gives a meaning to, so that
// a path holding '?', '#' or '%' names its own file and not a shorter one
// (SQLite would cut "x#1/db" at '#').
func URIPath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

// openWriter opens the writer's pool on the database at path, through
// walVFS, which it registers first.
func openWriter(path string) (*sql.DB, error) {
	if err := registerWALVFS(); err != nil {
		return nil, err
	}
	return sql.Open("sqlite", dsn(path, true))
}

// Open opens (creating if need be) the database at path and applies the
// migrations.
func Open(ctx context.Context, path string) (*Store, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create database directory: %w", err)
		}
	}
	if err := create(ctx, path); err != nil {
		return nil, err
	}
	w, err := openWriter(path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, err
	}
	r, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite readers: %w", err)
	}
	n := max(4, runtime.NumCPU()*2)
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	s := &Store{path: path, write: w, readDB: r, read: connq{c: newStmtCache(r)}}
	if s.w, err = newWriter(ctx, w, path, s.wake.Notify, s.secretBox); err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	s.read.last = s.w.sy.last
	s.point = s.read
	s.point.detach = true
	restart := func() error {
		return s.w.direct(context.Background(), func(q querier) error {
			// The writer waits for the readers of the moment at most
			// restartWait, not busy_timeout: a long reader (an online
			// backup) must not stall the writes; the checkpointer tries
			// again later.
			ctx := context.Background()
			if _, err := q.ExecContext(ctx, fmt.Sprintf(`PRAGMA busy_timeout = %d`, restartWait.Milliseconds())); err != nil {
				return err
			}
			defer q.ExecContext(ctx, `PRAGMA busy_timeout = 10000`)
			var busy, log, copied int
			if err := q.QueryRowContext(ctx, `PRAGMA wal_checkpoint(RESTART)`).Scan(&busy, &log, &copied); err != nil {
				return err
			}
			if busy != 0 {
				return errRestartBusy
			}
			return nil
		})
	}
	if s.ckpt, err = newCheckpointer(path, restart); err != nil {
		s.w.close()
		r.Close()
		w.Close()
		return nil, err
	}
	return s, nil
}

// create makes the database file with pages of pageSize bytes if it does
// not exist yet, or is empty. The page size must be set before the
// database enters WAL mode, which the connections' own pragmas do first
// (the driver runs them in the order of their names). Entering WAL mode
// here is also what writes the file's header: a page size set on a
// connection that writes nothing is lost with it. An existing database
// keeps the page size it was made with.
func create(ctx context.Context, path string) error {
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		return nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("create database: %w", err)
	}
	db, err := sql.Open("sqlite", "file:"+URIPath(path)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	defer c.Close()
	for _, q := range []string{fmt.Sprintf(`PRAGMA page_size = %d`, pageSize), `PRAGMA journal_mode = WAL`} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("create database: %s: %w", q, err)
		}
	}
	return nil
}

func migrate(ctx context.Context, db *sql.DB) error {
	sub, err := fs.Sub(migrations, "migration")
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, sub)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// LeaveCheckpoints stops this store's checkpointer, for a process that
// opens the database beside the server that owns it and writes little
// (`xaalis bench --server-process`): two checkpointers, one a process,
// each copy the same WAL and hold each other's writer in their RESTARTs.
// The WAL is then checkpointed by the other process alone; SQLite's own
// automatic checkpoint stays off on this connection.
func (s *Store) LeaveCheckpoints() { s.ckpt.close() }

// Close finishes the writes queued, then closes both pools.
func (s *Store) Close() error {
	s.ckpt.close()
	s.w.close()
	s.read.c.close()
	return errors.Join(s.readDB.Close(), s.write.Close())
}

// Subscribe returns a channel that receives once after commits that made
// work of kind w due, in this process (SQLite has one writer process in
// practice; the background loops also poll).
func (s *Store) Subscribe(w xaalis.Wakeup) <-chan struct{} { return s.wake.Subscribe(w) }

// Stats reports the statements sent (by every SQLite store of the
// process), and the transactions the writer committed with the commands
// they held.
func (s *Store) Stats() xaalis.StoreStats {
	return xaalis.StoreStats{Statements: statements.Load(), Transactions: s.w.batches.Load(), Commands: s.w.commands.Load()}
}

// Ping reports whether the database answers reads and takes writes. After
// a write failed for want of disk or I/O, and only then, it commits a
// probe that needs fresh pages (8 KiB): ready again once the database can
// grow.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.read.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return unavailable(fmt.Errorf("ping: %w", err))
	}
	if s.w.health.err() == nil {
		return nil
	}
	return s.Update(ctx, func(xtx xaalis.Tx) error {
		_, err := xtx.(*Tx).tx.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES ('readiness_probe', randomblob(8192))
			ON CONFLICT (name) DO UPDATE SET value = excluded.value`)
		return err
	})
}

// Pepper returns the installation's key-hashing secret.
func (s *Store) Pepper(ctx context.Context) ([]byte, error) {
	var v []byte
	err := s.read.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = 'key_pepper'`).Scan(&v)
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read pepper: %w", err)
	}
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	// Two processes may race to create it: the first wins, both read it.
	err = s.Update(ctx, func(xtx xaalis.Tx) error {
		tx := xtx.(*Tx).tx
		if _, err := tx.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES ('key_pepper', ?) ON CONFLICT DO NOTHING`, fresh); err != nil {
			return fmt.Errorf("create pepper: %w", err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = 'key_pepper'`).Scan(&v); err != nil {
			return fmt.Errorf("read pepper: %w", err)
		}
		return nil
	})
	return v, err
}

// Update runs fn as one command of a write transaction: its writes commit
// with those of the commands queued beside it, or, when fn fails, roll
// back alone (see writer). It returns once the commit is durable.
func (s *Store) Update(ctx context.Context, fn func(tx xaalis.Tx) error) error {
	return s.w.do(ctx, fn)
}

// Durable returns once the batches ctx's reads may have seen (its
// xaalis.ReadMark), or without one every batch the writer sent to COMMIT
// before the call, are durable: a read may see a batch's rows while the
// syncer still fdatasyncs the WAL (syncer.go). It fails with
// service_unavailable when that fdatasync failed, or with ctx's error.
func (s *Store) Durable(ctx context.Context) error { return s.w.sy.wait(ctx) }

// Tx is one command inside the writer's transaction.
type Tx struct {
	tx   querier
	box  xaalis.SecretBox
	wake xaalis.Wakeup
	// stats and volumes gather the command's counter deltas (AddStats,
	// AddVolume), claims its Idempotency-Keys counted against the quota;
	// quota is the batch's count. The writer adds those of the batch's
	// committed commands together and writes them once before its COMMIT.
	stats   statBatch
	volumes volumeBatch
	quota   *quotaBatch
	claims  map[quotaKey]int
	// unwritten is the command's claim of an Idempotency-Key its request
	// found absent (Claim.Unseen), not yet in the table: written with the
	// answer when the command completes it, else in flight at its end
	// (writeClaim).
	unwritten *xaalis.Claim
	// balances sums the command's balance changes that no balance can
	// refuse; batch is the writer batch's sum of its committed commands';
	// flushed holds what of batch this command wrote ahead of a balance
	// read (flushBalances), given back to batch if the command rolls back.
	balances, batch, flushed balanceBatch
}

// Wake asks for the background work w once the command commits.
func (t *Tx) Wake(w xaalis.Wakeup) { t.wake |= w }

var _ xaalis.Tx = (*Tx)(nil)

// querier is what both a pool and a transaction offer.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// micros stores a time as microseconds since the epoch.
func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func nullMicros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func fromNullMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// isUnique reports a UNIQUE or PRIMARY KEY violation.
func isUnique(err error) bool {
	var e *sqlite.Error
	if errors.As(err, &e) {
		c := e.Code()
		return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return xaalis.ErrNotFound
	}
	return err
}

// Pragmas reads the settings the writer connection runs with, so tests
// and `xaalis serve` logs can show the database is configured for money.
func (s *Store) Pragmas(ctx context.Context) map[string]string {
	out := map[string]string{}
	_ = s.Update(ctx, func(xtx xaalis.Tx) error {
		for _, p := range []string{"journal_mode", "synchronous", "foreign_keys", "busy_timeout", "temp_store", "wal_autocheckpoint", "journal_size_limit", "page_size"} {
			var v string
			if err := xtx.(*Tx).tx.QueryRowContext(ctx, "PRAGMA "+p).Scan(&v); err == nil {
				out[p] = v
			}
		}
		return nil
	})
	return out
}

// queryAll runs a query and scans every row with scan; a query error is
// wrapped with op when one is given.
func queryAll[T any](ctx context.Context, q querier, op string, scan func(func(...any) error) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		if op != "" {
			err = fmt.Errorf("%s: %w", op, err)
		}
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Backup writes a consistent copy of the database to path with VACUUM
// INTO, while servers keep reading and writing it (the copy is one read
// transaction's snapshot). The copy is written beside path and renamed
// into place once complete, so path is never a partial copy; path must
// not exist.
func (s *Store) Backup(ctx context.Context, path string) error {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("backup: %s exists", path)
	}
	tmp := path + ".partial"
	_ = os.Remove(tmp)
	// VACUUM INTO reads the database in one read transaction, so writes
	// go on meanwhile; the readers are query_only, which refuses it, so a
	// connection of its own does it.
	db, err := sql.Open("sqlite", "file:"+URIPath(s.path)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	_, err = db.ExecContext(ctx, `VACUUM INTO ?`, tmp)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("backup: %w", err)
	}
	f, err := os.Open(tmp)
	if err == nil {
		err = errors.Join(f.Chmod(0o600), f.Sync(), f.Close())
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}
