package postgres

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Group commit with multi-row statements.
//
// A command's transaction costs PostgreSQL an executor start-up, a round
// trip and foreign-key checks for each of its statements, and a COMMIT:
// about 1.2 ms of its CPU a payment, which is what bounds create-payment
// (BENCHMARKS.md). Commands marked xaalis.Rerunnable that arrive together
// therefore share one transaction: a few group workers take every such
// command queued, run them side by side on one connection (groupmux.go),
// keep the rows each one queued (pipeline.go's later) aside, and write
// each table's rows of all of them in one statement (a multi-row INSERT) with
// the summed hot rows and the COMMIT, in one round trip. With pgbench,
// batches of 8 payments' rows carried 2.6 to 2.8 times the payments a
// second of single ones at 16 in flight (scripts/pg-multirow.sh).
//
// The batch is all or nothing. When a statement fails (a merchant_ref or
// an Idempotency-Key that two commands of the batch, or another process,
// took; an insufficient balance; a quota reached; a deadlock), PostgreSQL
// rolled the whole transaction back and nothing of it was done: every
// command of the batch then runs again alone, on its caller's goroutine,
// through the one-command path, which gives the command at fault its own
// answer and commits the others. When a command's fn fails of itself (a
// merchant_ref found used, a limit), only that command goes back to its
// caller, and the others run again as a batch. Only a COMMIT whose outcome
// is unknown (the connection lost while it ran) fails the batch's
// commands, as service_unavailable: they may have committed, and a retry
// with the same Idempotency-Key finds out.
//
// Commands of a batch do not see each other's rows held aside (a
// merchant_ref probe misses the row of an earlier command of the batch):
// two such commands collide at the batch's write, and the rerun alone
// answers them as separate transactions would have.

const (
	// maxGroup bounds a batch: a long one delays its first command, and
	// its multi-row statements' parameters (65,535 at most) grow with it.
	maxGroup = 32
	// groupQueue bounds the commands waiting for a worker; past it they run
	// alone, as commands not marked do.
	groupQueue = 1024
)

// GroupWorkers is how many batches a store opened next may have in flight
// at once, each on a connection of its own; 0 turns group commit off. One
// batch commits while the next runs its commands. More workers make
// smaller batches, which cost more CPU a payment: with the commands of a
// batch side by side, create-payment at 16 clients ran 1,450 and 1,474
// payments a second with one worker, 1,524 and 1,701 with two, 1,269 and
// 1,424 with three, 1,290 and 1,300 with four (docs/write-path.md). Two
// also keep commands flowing while one batch waits for a row another
// process holds.
var GroupWorkers = 2

// groupJob is a command waiting for a group worker.
type groupJob struct {
	ctx context.Context
	fn  func(xaalis.Tx) error
	err error
	// alone: the batch rolled back; the caller runs the command again in
	// a transaction of its own.
	alone bool
	done  chan struct{}
}

var groupJobs = sync.Pool{New: func() any { return &groupJob{done: make(chan struct{}, 1)} }}

// group queues the commands marked rerunnable for the workers.
type group struct {
	batches[*groupJob]
	// workersWanted is GroupWorkers when the store opened.
	workersWanted int
	// muxWait, when set, replaces the const muxWait (nanoseconds), for
	// the tests.
	muxWait atomic.Int64
}

// updateGrouped runs a rerunnable command in a batch, or alone when group
// commit is off, the queue full or the store closing.
func (s *Store) updateGrouped(ctx context.Context, fn func(xaalis.Tx) error) error {
	g := &s.group
	g.run(min(g.workersWanted, int(s.pool.Config().MaxConns)-1), s.runJobs)
	j := groupJobs.Get().(*groupJob)
	j.ctx, j.fn, j.err, j.alone = ctx, fn, nil, false
	if !g.offer(j) {
		j.ctx, j.fn = nil, nil
		groupJobs.Put(j)
		return s.update(ctx, fn)
	}
	<-j.done
	err, alone := j.err, j.alone
	j.ctx, j.fn, j.err = nil, nil, nil
	groupJobs.Put(j)
	if alone {
		return s.update(ctx, fn)
	}
	return err
}

// closeGroup stops the workers once they answered every command queued.
func (s *Store) closeGroup() { s.group.close() }

// runJobs runs a batch a worker took and answers its commands.
func (s *Store) runJobs(jobs []*groupJob) {
	s.runGroup(jobs)
	for _, j := range jobs {
		j.done <- struct{}{}
	}
}

// runGroup runs jobs in one transaction and sets each one's answer. A
// lone command runs through the one-command path, here so that it waits
// its turn as a batch would. A command whose request is gone (its context
// done) is left to its caller, which fails at once. A command whose fn
// fails goes back to its caller to run alone, and the others run again as
// a batch, up to maxDropped times: a stream of failing requests (a reused
// merchant_ref, a limit reached) would otherwise make every batch run
// twice.
func (s *Store) runGroup(jobs []*groupJob) {
	ctx := s.bg
	live := jobs[:0:0]
	for _, j := range jobs {
		if j.ctx.Err() != nil {
			j.alone = true
			continue
		}
		live = append(live, j)
	}
	for dropped := 0; ; dropped++ {
		switch len(live) {
		case 0:
			return
		case 1:
			j := live[0]
			if !recovered(func() { j.err = s.update(ctx, j.fn) }) {
				j.alone = true // it panicked: again on its caller's goroutine, to panic there
			}
			return
		}
		failed, again := s.runBatch(ctx, live)
		if !again {
			return
		}
		if failed < 0 || dropped == maxDropped {
			for _, j := range live {
				j.alone = true
			}
			s.reruns.Add(int64(len(live)))
			return
		}
		live[failed].alone = true
		s.reruns.Add(1)
		live = slices.Delete(live, failed, failed+1)
	}
}

// batchLockTimeout bounds each lock wait of a batch's transaction. A
// batch's statements run on the store's context, not on any one request's
// (a request's deadline must not cancel the others' commands), so a row
// that another process holds locked would stall every command of the
// batch for as long as it is held. Past the timeout PostgreSQL fails the
// statement (lock_not_available), the batch rolls back, and each command
// runs again alone, on its own request's context: only the one that needs
// the row waits for it, and its request's deadline bounds the wait. Lock
// waits between batches of a healthy system last a commit (a few
// milliseconds); deadlocks are found after deadlock_timeout (1 s by
// default), before this.
const batchLockTimeout = 2 * time.Second

// lockTimeout is d as PostgreSQL's lock_timeout reads it.
func lockTimeout(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" }

// maxDropped is how many commands whose fn failed a batch leaves out, one
// at a time, before it sends every command back to run alone.
const maxDropped = 2

// runBatch runs jobs in one transaction. On success, and when the COMMIT's
// outcome is unknown, it sets every job's answer and reports again false.
// Otherwise the transaction rolled back and nothing of it was done: it
// reports again true, with failed the index of the job whose fn failed,
// or -1 when the failure was the database's (a statement, the COMMIT).
func (s *Store) runBatch(ctx context.Context, jobs []*groupJob) (failed int, again bool) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return -1, true
	}
	defer c.Release()
	t := &txConn{c: c, shard: s.connShard(c.Conn()), batch: s.batchLockSetting}
	// The commands run at once, their statements sent together
	// (groupmux.go); each keeps its own rows and sums, added up below in
	// the commands' order.
	m := newBatchMux(ctx, c, len(jobs), s.batchLockSetting, time.Duration(s.group.muxWait.Load()))
	txs := make([]*Tx, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		txs[i] = &Tx{tx: &txConn{c: c, begun: true, shard: t.shard, mux: m}, box: s.box, wakeChannel: s.wakeChannel}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer m.done()
			if !recovered(func() { errs[i] = j.fn(txs[i]) }) {
				errs[i] = errPanicked
			}
		}()
	}
	wg.Wait()
	t.begun = m.begun
	s.batchTrips.Add(int64(m.trips))
	failed = -1
	for i, ferr := range errs {
		if ferr != nil && failed < 0 {
			failed = i
		}
	}
	if aerr := m.aborted(); aerr != nil || failed >= 0 {
		t.rollback(ctx)
		var pe *pgconn.PgError
		if aerr != nil || errors.As(errs[failed], &pe) {
			// A statement failed: the transaction is aborted, and
			// whether the command or another caused it (a deadlock
			// between batches, say) is not known.
			return -1, true
		}
		return failed, true
	}
	var rows []queued
	var wake xaalis.Wakeup
	for _, tx := range txs {
		tx.writeClaim()
		rows = append(rows, tx.tx.queued...)
		t.absorb(tx.tx)
		wake |= tx.wake
	}
	t.queued = mergeRows(rows)
	var tail []queued
	if wake != 0 {
		tail = append(tail, queued{op: "notify", sql: `SELECT pg_notify($1, $2)`,
			args: []any{s.wakeChannel, strconv.Itoa(int(wake))}})
	}
	if err := t.commit(ctx, tail...); err != nil {
		t.rollback(ctx)
		var pe *pgconn.PgError
		if errors.As(err, &pe) || errors.Is(err, errRolledBack) || pgconn.SafeToRetry(err) {
			// PostgreSQL refused a statement or the COMMIT, or nothing was
			// sent: the transaction did not commit.
			return -1, true
		}
		// The COMMIT's outcome is unknown.
		err = unavailable(fmt.Errorf("commit a batch of %d commands: %w", len(jobs), err))
		for _, j := range jobs {
			j.err = err
		}
		return -1, false
	}
	s.commits.Add(1)
	s.commands.Add(int64(len(jobs)))
	return -1, false
}

// errPanicked is the error of a command of a batch that panicked: it runs
// again alone, on its caller's goroutine, to panic there.
var errPanicked = errors.New("the command panicked")

// recovered runs f and reports whether it returned without panicking.
func recovered(f func()) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	f()
	return true
}

// A rowsStatement is a statement that inserts one command's rows and that
// a batch may merge with other commands' statements of the same kind: one
// statement then inserts the rows of all.
type rowsStatement interface {
	// merged returns the statement inserting the rows of every argument
	// list of rows, in order.
	merged(rows [][]any) (string, []any)
}

// mergeRows merges the statements of a batch's commands that insert rows
// of one kind into one statement. The merged statements go together at the
// place of the first of them, in mergeOrder: what a command's later
// statement refers to (its transaction, its event) is then written before
// it, even when another command of the batch wrote its own event at once
// (an event that is not its object's first) and queued only the fan-out.
func mergeRows(q []queued) []queued {
	out := make([]queued, 0, len(q))
	at := -1
	kinds := map[rowsStatement]*mergedKind{}
	var order []*mergedKind
	for _, s := range q {
		if s.rows == nil {
			out = append(out, s)
			continue
		}
		if at < 0 {
			at = len(out)
		}
		k := kinds[s.rows]
		if k == nil {
			k = &mergedKind{first: s}
			kinds[s.rows] = k
			order = append(order, k)
		}
		k.rows = append(k.rows, s.args)
	}
	if at < 0 {
		return out
	}
	slices.SortStableFunc(order, func(a, b *mergedKind) int {
		return mergeRank(a.first.rows) - mergeRank(b.first.rows)
	})
	merged := make([]queued, len(order))
	for i, k := range order {
		if len(k.rows) == 1 {
			merged[i] = queued{op: k.first.op, sql: k.first.sql, args: k.rows[0]}
			continue
		}
		sql, args := k.first.rows.merged(k.rows)
		merged[i] = queued{op: k.first.op, sql: sql, args: args}
	}
	return slices.Insert(out, at, merged...)
}

// mergedKind is one kind of rows of a batch: the first statement of it
// and every statement's arguments.
type mergedKind struct {
	first queued
	rows  [][]any
}

// mergeOrder is the order of the merged statements: a row before the rows
// that refer to it (a delivery refers to its event).
var mergeOrder = []rowsStatement{insertTxRows, insertFirstEventRows, fanOutRows{}, entryRows{}, insertUnseenKeyRows}

// mergeRank is r's place in mergeOrder; a kind not in it goes last.
func mergeRank(r rowsStatement) int {
	if i := slices.Index(mergeOrder, r); i >= 0 {
		return i
	}
	return len(mergeOrder)
}

// valuesRows is an INSERT ... VALUES of one row, its placeholders $1 to
// $width: merged, it has a row a command.
type valuesRows struct {
	head, row, tail string
	width           int
	// raise, when set, is the xaalis_raise code the statement raises when
	// it inserted fewer rows than it was given (ON CONFLICT DO NOTHING),
	// with message.
	raise, message string
	texts          sync.Map // n -> string
}

// newValuesRows makes the kind of statement head VALUES row tail, row
// numbering its placeholders from $1.
func newValuesRows(head, row, tail string) *valuesRows {
	n := 0
	for _, m := range placeholder.FindAllStringSubmatch(row, -1) {
		k, _ := strconv.Atoi(m[1])
		n = max(n, k)
	}
	return &valuesRows{head: head, row: row, tail: tail, width: n}
}

// placeholder is a statement's parameter, $n: valuesRows renumbers them,
// mergeReads (readpipe.go) names them after a LATERAL's columns.
var placeholder = regexp.MustCompile(`\$(\d+)`)

// sql is the statement for n rows.
func (v *valuesRows) sql(n int) string {
	if s, ok := v.texts.Load(n); ok {
		return s.(string)
	}
	var b strings.Builder
	b.WriteString(v.head)
	b.WriteString(" VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		off := i * v.width
		b.WriteString(placeholder.ReplaceAllStringFunc(v.row, func(p string) string {
			k, _ := strconv.Atoi(p[1:])
			return "$" + strconv.Itoa(k+off)
		}))
	}
	if v.tail != "" {
		b.WriteString(" ")
		b.WriteString(v.tail)
	}
	s := b.String()
	if v.raise != "" {
		s = `WITH w AS (` + s + ` RETURNING 1)
		SELECT CASE WHEN count(*) <> ` + strconv.Itoa(n) + ` THEN xaalis_raise('` + v.raise + `', '` + v.message + `') ELSE 0 END FROM w`
	}
	v.texts.Store(n, s)
	return s
}

func (v *valuesRows) merged(rows [][]any) (string, []any) {
	args := make([]any, 0, len(rows)*v.width)
	for _, r := range rows {
		args = append(args, r...)
	}
	return v.sql(len(rows)), args
}

// one is the statement of one command's row.
func (v *valuesRows) one(op string, args ...any) queued {
	return queued{op: op, sql: v.sql(1), args: args, rows: v}
}
