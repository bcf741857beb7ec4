// Package postgres is the Store on PostgreSQL, through pgx's native API
// and a connection pool. Every write transaction runs at READ COMMITTED;
// rows a command changes are locked with SELECT ... FOR UPDATE, so several
// server processes may share one database.
//
// The connection URL's search_path (a query parameter such as
// "?search_path=xaalis") chooses the schema that holds every table,
// goose's version table included.
package postgres

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	mrand "math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/xaalis/xaalis/internal/xaalis"
)

//go:embed migration/*.sql
var migrations embed.FS

// Store is the PostgreSQL Store.
type Store struct {
	pool *db // the pool, answering a database that is away as service_unavailable
	wake xaalis.Signals
	// box seals the secrets the database keeps (SetSecretBox).
	box xaalis.SecretBox

	// commits counts the write transactions committed, commands the
	// commands in them (a batch has several, group.go).
	commits, commands atomic.Int64
	// reruns counts the commands a batch that rolled back sent to run
	// again alone (group.go).
	reruns atomic.Int64
	// batchTrips counts the round trips batches' commands made through
	// their mux (groupmux.go), for the tests.
	batchTrips atomic.Int64
	group      group
	// batchLockSetting is a batch's lock_timeout (batchLockTimeout), as
	// PostgreSQL reads it.
	batchLockSetting string
	// reads sends the hot one-row reads in shared round trips (readpipe.go).
	reads readPipe
	// shards gives each connection of the pool its own shard of the split
	// hot rows (connShard), from a start random per process.
	shards     sync.Map // *pgx.Conn -> int16
	nextShard  atomic.Int32
	listenOnce sync.Once
	bg         context.Context // ends at Close
	stop       context.CancelFunc
	listening  sync.WaitGroup
	// wakeChannel is this schema's NOTIFY channel (wakeChannel).
	wakeChannel string
}

var _ xaalis.Store = (*Store)(nil)

// Open connects to the database at url (a postgres:// URL or a keyword/value
// connection string) and applies the migrations, holding an advisory lock
// so that processes starting together migrate one at a time.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse postgres url: %w", err)
	}
	cfg.ConnConfig.Tracer = counter{}
	if !strings.Contains(url, "pool_max_conns") {
		// Commits wait on the disk, not the CPU: more transactions in
		// flight than CPUs let PostgreSQL flush many commits per fsync.
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxConns < 2 {
		// One connection LISTENs for wake-ups for as long as the store is
		// open: with one in all, no command could ever run.
		return nil, fmt.Errorf("postgres url: pool_max_conns is %d: it must be at least 2 (one connection listens for wake-ups)", cfg.MaxConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	schema, err := migrate(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	bg, stop := context.WithCancel(context.Background())
	st := &Store{pool: &db{pool}, bg: bg, stop: stop, wakeChannel: wakeChannel(schema), batchLockSetting: lockTimeout(batchLockTimeout),
		group: group{batches: batches[*groupJob]{queue: make(chan *groupJob, groupQueue), max: maxGroup},
			workersWanted: GroupWorkers}}
	st.reads = readPipe{pool: st.pool, bg: bg, batches: batches[*pipeRead]{queue: make(chan *pipeRead, pipeQueue), max: maxPipe}}
	st.nextShard.Store(mrand.Int32N(hotShards))
	return st, nil
}

// connShard is the shard of the split hot rows (migration 00013) that the
// transactions of conn add to. Each connection of a pool has its own, up
// to hotShards connections: two transactions of one process at once never
// wait for each other's shard, and those of several processes rarely do.
func (s *Store) connShard(conn *pgx.Conn) int16 {
	if v, ok := s.shards.Load(conn); ok {
		return v.(int16)
	}
	v, _ := s.shards.LoadOrStore(conn, int16(s.nextShard.Add(1)%hotShards))
	return v.(int16)
}

// Installed reports whether the schema a database URL names (its
// search_path's first that exists) holds a Xaalis installation (goose's
// version table), and which schema that is, without changing anything.
func Installed(ctx context.Context, url string) (schema string, ok bool, err error) {
	// Parsed as Open parses it: pgx.Connect would send the pool's own
	// parameters (pool_max_conns) to the server, which refuses them.
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return "", false, fmt.Errorf("parse postgres url: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return "", false, fmt.Errorf("open postgres: %w", err)
	}
	defer conn.Close(ctx)
	var cur *string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&cur); err != nil {
		return "", false, fmt.Errorf("read current schema: %w", err)
	}
	if cur == nil {
		return "", false, errors.New("no schema of the search_path exists")
	}
	err = conn.QueryRow(ctx, `SELECT to_regclass(quote_ident(current_schema()) || '.goose_db_version') IS NOT NULL`).Scan(&ok)
	if err != nil {
		return "", false, fmt.Errorf("look for an installation: %w", err)
	}
	return *cur, ok, nil
}

// DefaultMaxConns is the pool size when the URL sets no pool_max_conns.
var DefaultMaxConns int32 = 16

// migrate applies the migrations and returns the schema they went to.
func migrate(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	// goose's advisory lock is database-wide; keying it by schema lets
	// installations (and tests) in separate schemas migrate side by side,
	// while processes sharing a schema still take turns.
	var schema *string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return "", fmt.Errorf("read current schema: %w", err)
	}
	if schema == nil {
		return "", errors.New("migrations: no schema of the search_path exists")
	}
	h := fnv.New64a()
	h.Write([]byte("xaalis migrations\x00" + *schema))
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(int64(h.Sum64())), lock.WithLockTimeout(1, 300))
	if err != nil {
		return "", fmt.Errorf("migration lock: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close() // leaves the pool open
	p, err := newMigrations(db, goose.WithSessionLocker(locker))
	if err != nil {
		return "", fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return "", fmt.Errorf("apply migrations: %w", err)
	}
	return *schema, nil
}

// newMigrations is goose's provider of every migration: migration/*.sql
// and the ones written in Go (goMigrations), which a provider of the files
// alone would skip without a word.
func newMigrations(db *sql.DB, opts ...goose.ProviderOption) (*goose.Provider, error) {
	sub, err := fs.Sub(migrations, "migration")
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(goose.DialectPostgres, db, sub, append(opts, goose.WithGoMigrations(goMigrations()...))...)
}

// Close closes the pool.
func (s *Store) Close() error {
	s.closeGroup()
	s.reads.close()
	s.stop()
	s.listening.Wait()
	s.pool.Close()
	return nil
}

// wakeChannel is the NOTIFY channel of the wake-ups of the installation
// in schema. Channels are database-wide: installations (and tests) in
// other schemas of the same database must not wake this one's dispatcher.
func wakeChannel(schema string) string {
	h := fnv.New64a()
	h.Write([]byte(schema))
	return fmt.Sprintf("xaalis_wake_%016x", h.Sum64())
}

// Subscribe returns a channel that receives after commits, in any process
// on this database, that made work of a kind in w due: commits NOTIFY, and
// one connection of the pool LISTENs. The listener signals every
// subscriber each time it (re)connects, work having maybe come while
// nobody listened; the channel is subscribed before the first listener
// starts, so that its first signal cannot come before the subscription
// and be lost (TestWakeAcrossProcesses waited for it in vain, once in
// CI).
func (s *Store) Subscribe(w xaalis.Wakeup) <-chan struct{} {
	c := s.wake.Subscribe(w)
	s.listenOnce.Do(s.listen)
	return c
}

func (s *Store) listen() {
	ctx := s.bg
	s.listening.Add(1)
	go func() {
		defer s.listening.Done()
		for ctx.Err() == nil {
			if err := s.listenOnce1(ctx); err != nil && ctx.Err() == nil {
				// The database went away: the loops keep polling meanwhile.
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}
	}()
}

func (s *Store) listenOnce1(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `LISTEN `+s.wakeChannel); err != nil {
		conn.Conn().Close(ctx)
		return err
	}
	// After a reconnection, work may have come while nobody listened.
	s.wake.Notify(^xaalis.Wakeup(0))
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			// A connection left listening must not go back to the pool.
			conn.Conn().Close(context.Background())
			return err
		}
		if v, err := strconv.Atoi(n.Payload); err == nil {
			s.wake.Notify(xaalis.Wakeup(v))
		}
	}
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// Pepper returns the installation's key-hashing secret, creating it on
// first use.
func (s *Store) Pepper(ctx context.Context) ([]byte, error) {
	const read = `SELECT value FROM settings WHERE name = 'key_pepper'`
	var v []byte
	err := s.pool.QueryRow(ctx, read).Scan(&v)
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("read pepper: %w", err)
	}
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("make pepper: %w", err)
	}
	// Callers may race to create it: the first insert wins (the others wait
	// for it to commit, then do nothing) and all read the winner's value.
	if _, err := s.pool.Exec(ctx, `INSERT INTO settings (name, value) VALUES ('key_pepper', $1)
		ON CONFLICT (name) DO NOTHING`, fresh); err != nil {
		return nil, fmt.Errorf("create pepper: %w", err)
	}
	if err := s.pool.QueryRow(ctx, read).Scan(&v); err != nil {
		return nil, fmt.Errorf("read pepper: %w", err)
	}
	return v, nil
}

// InsertSettingOnce records a named setting unless it exists, and reports
// whether this call inserted it. A concurrent insert of the same name waits
// for the first transaction to end, so exactly one committed caller gets
// true.
func (t *Tx) InsertSettingOnce(ctx context.Context, name string, value []byte) (bool, error) {
	tag, err := t.tx.Exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
		name, value)
	if err != nil {
		return false, fmt.Errorf("insert setting: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ClaimSetting sets a setting when it is absent or below below: the
// upsert's row lock makes concurrent callers wait, and the one that comes
// second finds the first's value.
func (t *Tx) ClaimSetting(ctx context.Context, name string, value, below []byte) (bool, error) {
	tag, err := t.tx.Exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value WHERE settings.value < $3`, name, value, below)
	if err != nil {
		return false, fmt.Errorf("claim setting: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Update runs fn in one READ COMMITTED transaction, committed when fn
// returns nil and rolled back otherwise. A command marked
// xaalis.Rerunnable may share its transaction with others (group.go).
func (s *Store) Update(ctx context.Context, fn func(tx xaalis.Tx) error) error {
	if s.group.workersWanted > 0 && xaalis.IsRerunnable(ctx) {
		return s.updateGrouped(ctx, fn)
	}
	return s.update(ctx, fn)
}

// update runs fn in a transaction of its own.
func (s *Store) update(ctx context.Context, fn func(tx xaalis.Tx) error) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return unavailable(fmt.Errorf("begin: %w", err))
	}
	defer c.Release()
	t := &txConn{c: c, shard: s.connShard(c.Conn())}
	committed := false
	// Rolls back if fn or the commit fails, or fn panics.
	defer func() {
		if !committed {
			t.rollback(ctx)
		}
	}()
	tx := &Tx{tx: t, box: s.box, wakeChannel: s.wakeChannel}
	if err := fn(tx); err != nil {
		// A check that balance changes written early (ahead of a
		// LockBalance) made: the same answer as at commit.
		if r := tx.commitRefusal(err); r != nil {
			return tx.claimFailed(ctx, r)
		}
		return tx.claimFailed(ctx, unavailable(retryable(err)))
	}
	tx.writeClaim()
	var tail []queued
	if tx.wake != 0 {
		// Delivered at commit, to every process listening on this schema.
		tail = append(tail, queued{op: "notify", sql: `SELECT pg_notify($1, $2)`,
			args: []any{s.wakeChannel, strconv.Itoa(int(tx.wake))}})
	}
	if err := t.commit(ctx, tail...); err != nil {
		if r := tx.commitRefusal(err); r != nil {
			return tx.claimFailed(ctx, r)
		}
		return tx.claimFailed(ctx, unavailable(retryable(err)))
	}
	committed = true
	s.commits.Add(1)
	s.commands.Add(1)
	return nil
}

// Durable returns at once: a COMMIT returns once PostgreSQL made it
// durable (synchronous_commit on), before any reader can see it.
func (s *Store) Durable(ctx context.Context) error { return nil }

// statements counts the statements every store of the process sends, for
// the benchmarks.
var statements atomic.Int64

// counter is a pgx tracer that counts statements.
type counter struct{}

func (counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	statements.Add(1)
	return ctx
}

func (counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	statements.Add(1)
}

func (counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// Stats reports the statements sent (by every PostgreSQL store of the
// process), the write transactions committed, the commands in them and
// the commands that batches sent back to run alone.
func (s *Store) Stats() xaalis.StoreStats {
	return xaalis.StoreStats{Statements: statements.Load(), Transactions: s.commits.Load(), Commands: s.commands.Load(),
		Reruns: s.reruns.Load()}
}

// retryable answers a deadlock or a serialization failure, which
// PostgreSQL resolves by aborting one transaction, as service_unavailable:
// nothing of the command was done and the same request may be retried.
func retryable(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001") {
		e := xaalis.Errorf(xaalis.EServiceUnavailable, "The database aborted this request to resolve a conflict with another; nothing was done: retry it.")
		e.RetryAfter = time.Second
		return e
	}
	return err
}

// Tx is one write transaction.
type Tx struct {
	tx   *txConn
	box  xaalis.SecretBox
	wake xaalis.Wakeup
	// wakeChannel is the store's NOTIFY channel, for statements that wake
	// the dispatcher only when they store work (InsertFanOut).
	wakeChannel string
	// quotaRetry is when the quota window of the key this transaction
	// claimed ends, from the claim (quotaRefusal).
	quotaRetry time.Duration
	// unwritten is the command's claim of an Idempotency-Key its request
	// found absent (Claim.Unseen), not yet in the table: written with the
	// answer (CompleteIdempotency) or, before the COMMIT, in flight
	// (writeClaim). claimQueued: its INSERT is queued, to go with the
	// next statement or the COMMIT.
	unwritten   *xaalis.Claim
	claimQueued bool
}

// Wake asks for the background work w once the transaction commits.
func (t *Tx) Wake(w xaalis.Wakeup) { t.wake |= w }

var _ xaalis.Tx = (*Tx)(nil)

// querier is what both the pool and a transaction offer.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// notFound maps pgx.ErrNoRows to xaalis.ErrNotFound and wraps other
// errors with op.
func notFound(op string, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return xaalis.ErrNotFound
	}
	return fmt.Errorf("%s: %w", op, err)
}

// oneRow turns an update or delete that touched nothing into ErrNotFound.
func oneRow(op string, tag pgconn.CommandTag, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if tag.RowsAffected() == 0 {
		return xaalis.ErrNotFound
	}
	return nil
}

// deref is *p, or "" for nil: a column that may be NULL.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// utcPtr returns t in UTC, keeping nil.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// nonNil makes an empty list for a nil one: a nil slice is SQL NULL to pgx
// and the list columns are NOT NULL.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// cidrs prepares a prefix list for a cidr[] column, which refuses host
// bits right of the mask: masking keeps which addresses a prefix contains.
func cidrs(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, len(ps))
	for i, p := range ps {
		out[i] = p.Masked()
	}
	return out
}

// nilIfEmpty reads an empty array back as nil, as the SQLite store does.
func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// queryAll runs a query and scans every row with scan; errors are wrapped
// with op.
func queryAll[T any](ctx context.Context, q querier, op string, scan func(string, interface{ Scan(...any) error }) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(op, rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}
