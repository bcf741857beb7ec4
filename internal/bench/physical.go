package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
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
	return &Prepared{Op: op, Close: func() { f.Close(); os.Remove(path) }, Notes: []string{
		fmt.Sprintf("4 KiB appended then fdatasync, one at a time, in %s (%s)", dir, where)}}, nil
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
