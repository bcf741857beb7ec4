package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/xaalis/xaalis/internal/sqlite"
)

// The physical floors: what the disk and the database do with nothing of
// ours in the way. One request of a design that commits once per request
// costs at least one fsync, so create-payment above 1.0 × floor-fsync
// shows commits shared by several requests (group commit).

// fsyncBlock is the size of one floor-fsync append: a WAL frame's order.
const fsyncBlock = 4096

// fsyncFileMax is where floor-fsync's file starts over (a truncate, one
// operation in thousands), so that a long run does not fill the disk.
const fsyncFileMax = 16 << 20

// prepareFloorFsync appends 4 KiB to a file in the database's directory
// and fdatasyncs it, one at a time.
func prepareFloorFsync(ctx context.Context, env *Env) (*Prepared, error) {
	return prepareFsync(ctx, env, 0)
}

// prepareFloorFsyncBusy is floor-fsync while one goroutine a CPU spins:
// the disk as a server that keeps its CPUs busy finds it. floor-fsync is
// measured on idle CPUs, and on this project's machine (a virtual machine
// of 2 CPUs) an fdatasync there took 0.44 ms at the median and 0.6 to
// 0.65 ms at p90; with both CPUs busy, 0.5 to 0.6 ms and 3.4 to 4.0 ms,
// 730 to 870 a second against 2,150. Spinning in another process did the
// same, and the syncing thread at nice -10 waited as long: the host
// finishes the guest's I/O on the CPUs the guest keeps busy. Under
// create-payment the SQLite syncer's fdatasyncs took 1.0 ms at the median
// (docs/write-path.md).
func prepareFloorFsyncBusy(ctx context.Context, env *Env) (*Prepared, error) {
	return prepareFsync(ctx, env, runtime.NumCPU())
}

// prepareFsync is floor-fsync with spinners goroutines spinning from
// Prepare to Close.
func prepareFsync(ctx context.Context, env *Env, spinners int) (*Prepared, error) {
	dir, where, err := databaseDir(ctx, env.DBURL)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, ".xaalis-floor-fsync-*")
	if err != nil {
		return nil, fmt.Errorf("floor-fsync: %w", err)
	}
	path := f.Name()
	block := make([]byte, fsyncBlock)
	for i := range block {
		block[i] = byte(i)
	}
	var off int64 // one op at a time (concurrency 1): no lock needed
	op := func(ctx context.Context, seq int64) Outcome {
		if off >= fsyncFileMax {
			if err := f.Truncate(0); err != nil {
				return Outcome{Code: "truncate: " + err.Error()}
			}
			off = 0
		}
		if _, err := f.WriteAt(block, off); err != nil {
			return Outcome{Code: "write: " + err.Error()}
		}
		off += fsyncBlock
		if err := sqlite.Fdatasync(f); err != nil {
			return Outcome{Code: "fdatasync: " + err.Error()}
		}
		return Outcome{OK: true}
	}
	note := fmt.Sprintf("4 KiB appended then fdatasync, one at a time, in %s (%s)", dir, where)
	stop := func() {}
	if spinners > 0 {
		note += fmt.Sprintf(", while %d goroutines spin (one a CPU)", spinners)
		stop = spin(spinners)
	}
	return &Prepared{Op: op, Close: func() { stop(); f.Close(); os.Remove(path) }, Notes: []string{note}}, nil
}

// spinSink keeps the spinners' sums alive, so that no compiler drops
// their loops.
var spinSink atomic.Int64

// spin keeps n goroutines busy until the returned stop is called (it
// waits for them). Each gives its P up every few tens of microseconds:
// the kernel sees the CPUs busy, while the goroutine measured finds a P
// as soon as its fdatasync returns, so that the wait measured is the
// disk's and the kernel's, not Go's scheduler's.
func spin(n int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := int64(0)
			for {
				select {
				case <-done:
					spinSink.Add(x)
					return
				default:
				}
				for i := range int64(100_000) {
					x += i ^ x
				}
				runtime.Gosched()
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

// databaseDir is a directory on the database's filesystem that this
// process may write to.
func databaseDir(ctx context.Context, dbURL string) (dir, where string, err error) {
	if dbURL == "" {
		return "", "", errors.New("floor-fsync needs the database (--database-url)")
	}
	if !isPostgresURL(dbURL) {
		path, err := sqlite.ParseURL(dbURL)
		if err != nil {
			return "", "", err
		}
		return filepath.Dir(path), "the SQLite database's directory", nil
	}
	// PostgreSQL's data directory belongs to its server: the file goes
	// beside it, on the same filesystem, when this process may write
	// there, and in the temporary directory otherwise (said in the note).
	conn, err := pgx.Connect(ctx, pgOneConn(dbURL))
	if err == nil {
		defer conn.Close(ctx)
		var data string
		if conn.QueryRow(ctx, `SHOW data_directory`).Scan(&data) == nil && data != "" {
			parent := filepath.Dir(data)
			if f, err := os.CreateTemp(parent, ".xaalis-probe-*"); err == nil {
				f.Close()
				os.Remove(f.Name())
				return parent, "beside PostgreSQL's data directory " + data, nil
			}
		}
	}
	return os.TempDir(), "the temporary directory: PostgreSQL's data directory was not writable here", nil
}

// prepareFloorTx commits one-row INSERT transactions one at a time on the
// same database, through a connection of its own, into a scratch table
// dropped afterwards.
func prepareFloorTx(ctx context.Context, env *Env) (*Prepared, error) {
	if env.DBURL == "" {
		return nil, errors.New("floor-tx needs the database (--database-url)")
	}
	const table = "xaalis_bench_floor_tx"
	payload := make([]byte, 200) // about a ledger posting's row
	if isPostgresURL(env.DBURL) {
		conn, err := pgx.Connect(ctx, pgOneConn(env.DBURL))
		if err != nil {
			return nil, fmt.Errorf("floor-tx: %w", err)
		}
		if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (id bigserial PRIMARY KEY, seq bigint NOT NULL, v bytea NOT NULL)`); err != nil {
			conn.Close(ctx)
			return nil, fmt.Errorf("floor-tx: %w", err)
		}
		op := func(ctx context.Context, seq int64) Outcome {
			if _, err := conn.Exec(ctx, `INSERT INTO `+table+` (seq, v) VALUES ($1, $2)`, seq, payload); err != nil {
				return Outcome{Code: "insert: " + err.Error()}
			}
			return Outcome{OK: true}
		}
		return &Prepared{Op: op, Close: func() {
			_, _ = conn.Exec(context.Background(), `DROP TABLE IF EXISTS `+table)
			conn.Close(context.Background())
		}, Notes: []string{"one-row INSERT transactions (autocommit), one at a time, on one connection of the same database"}}, nil
	}
	path, err := sqlite.ParseURL(env.DBURL)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", "file:"+sqlite.URIPath(path)+"?_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)&_pragma=journal_mode(WAL)")
	if err != nil {
		return nil, fmt.Errorf("floor-tx: %w", err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (id INTEGER PRIMARY KEY, seq INTEGER NOT NULL, v BLOB NOT NULL)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("floor-tx: %w", err)
	}
	stmt, err := db.PrepareContext(ctx, `INSERT INTO `+table+` (seq, v) VALUES (?, ?)`)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("floor-tx: %w", err)
	}
	var n atomic.Int64
	op := func(ctx context.Context, seq int64) Outcome {
		if _, err := stmt.ExecContext(ctx, seq, payload); err != nil {
			return Outcome{Code: "insert: " + err.Error()}
		}
		n.Add(1)
		return Outcome{OK: true}
	}
	return &Prepared{Op: op, Close: func() {
		stmt.Close()
		_, _ = db.ExecContext(context.Background(), `DROP TABLE IF EXISTS `+table)
		db.Close()
	}, Notes: []string{"one-row INSERT transactions (autocommit, a prepared statement), one at a time, on a connection of its own " +
		"to the same SQLite file (WAL, synchronous=FULL)"}}, nil
}

func isPostgresURL(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

// pgOneConn drops pgxpool's own parameters (pool_max_conns, ...) from a
// URL, for a single pgx connection that would send them to the server.
func pgOneConn(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, "pool_") {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}
