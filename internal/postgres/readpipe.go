package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Reads of every request, sent together.
//
// Every API request reads its key and merchant (KeyByHash), and every
// payment the volumes its limits need (Volumes), each alone on a
// connection of the pool: a round trip each. On this 2-core machine a
// round trip costs the server about 60 µs of CPU (mostly the loopback
// socket's write, which also wakes PostgreSQL's backend) and PostgreSQL
// as much again, twice a payment. A readPipe sends the reads that wait at
// the same moment in one pipeline, on one connection: a few reader
// goroutines each take every read queued, send them together, and scan
// each row into its caller's destinations. A read is sent after its call,
// so it sees every commit before it, as alone; at low load a reader takes
// it at once and nothing waits for company.
//
// Only short reads of one row go through it (pipeRow): a slow statement
// would hold every read queued behind it.

const (
	// pipeReaders is how many pipelines may be in flight at once, each on
	// a connection of its own.
	pipeReaders = 2
	// maxPipe bounds a pipeline's reads.
	maxPipe = 64
	// pipeQueue bounds the reads waiting for a reader; past it a read goes
	// alone, as before.
	pipeQueue = 1024
)

// readPipe queues one-row reads for its readers.
type readPipe struct {
	batches[*pipeRead]
	pool *db
	bg   context.Context
	// pipelines, reads and statements count what the readers sent, for
	// the tests.
	pipelines, reads, statements int64
	countMu                      sync.Mutex
}

// pipeRead is one read waiting for a reader.
type pipeRead struct {
	ctx   context.Context
	sql   string
	args  []any
	merge bool
	dest  []any
	err   error
	done  chan struct{}
}

// queryRow returns a row read through the pipe when it is scanned.
func (p *readPipe) queryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return pipeRow{p: p, ctx: ctx, sql: sql, args: args}
}

// mergedRow is queryRow for a statement whose reads waiting together may
// go as one statement (mergeReads).
func (p *readPipe) mergedRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return pipeRow{p: p, ctx: ctx, sql: sql, args: args, merge: true}
}

// pipeRow is a row read when scanned: the read goes with the others
// waiting then, and the reader scans it into dest.
type pipeRow struct {
	p     *readPipe
	ctx   context.Context
	sql   string
	args  []any
	merge bool
}

func (r pipeRow) Scan(dest ...any) error {
	return unavailable(r.p.read(r.ctx, r.merge, r.sql, r.args, dest))
}

// read queues a read and waits for it; it reads alone when the pipe is
// full or closed.
func (p *readPipe) read(ctx context.Context, merge bool, sql string, args, dest []any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.run(pipeReaders, p.answer)
	r := &pipeRead{ctx: ctx, sql: sql, args: args, merge: merge, dest: dest, done: make(chan struct{})}
	if !p.offer(r) {
		return p.pool.Pool.QueryRow(ctx, sql, args...).Scan(dest...)
	}
	// The reader writes into dest: wait for it, whatever ctx does (a
	// reader leaves out a read whose context is done).
	<-r.done
	return r.err
}

// answer sends the reads a reader took and lets their callers go on.
func (p *readPipe) answer(reads []*pipeRead) {
	p.pipeline(reads)
	for _, r := range reads {
		close(r.done)
	}
}

// pipeline sends reads in one round trip and scans each row. Reads of one
// statement go as one statement (mergeReads). A statement that fails ends
// the pipeline (PostgreSQL skips the rest): a read alone gets the error;
// the reads of a merged statement that failed, and the reads after it, run
// again alone.
func (p *readPipe) pipeline(reads []*pipeRead) {
	live := reads[:0:0]
	for _, r := range reads {
		if r.err = r.ctx.Err(); r.err == nil {
			live = append(live, r)
		}
	}
	switch len(live) {
	case 0:
		return
	case 1:
		r := live[0]
		r.err = p.pool.Pool.QueryRow(r.ctx, r.sql, r.args...).Scan(r.dest...)
		p.count(1, 1, 1)
		return
	}
	c, err := p.pool.Pool.Acquire(p.bg)
	if err != nil {
		for _, r := range live {
			r.err = err
		}
		return
	}
	defer c.Release()
	groups := groupReads(live)
	b := &pgx.Batch{}
	generic := slices.ContainsFunc(groups, func(g readGroup) bool { return g.merged != "" })
	if generic {
		// Until the pipeline's end (its implicit transaction), as a
		// batch's (queueBegin): a merged statement's generic plan counts
		// 10 rows for unnest, its custom plans the arrays' length, so
		// PostgreSQL planned it anew at nearly every call, 0.3 ms of
		// planning against 0.1 ms of execution, for the same plan.
		b.Queue(`SELECT ` + genericPlans)
	}
	for _, g := range groups {
		if g.merged != "" {
			b.Queue(g.merged, g.args...)
		} else {
			b.Queue(g.reads[0].sql, g.reads[0].args...)
		}
	}
	br := c.SendBatch(p.bg, b)
	var again []*pipeRead
	if generic {
		if _, err := br.Exec(); err != nil {
			groups, again = nil, live
		}
	}
	for i, g := range groups {
		var failed bool
		if g.merged != "" {
			failed = scanMerged(c.Conn().TypeMap(), br, g.reads) != nil
			if failed {
				again = append(again, g.reads...)
			}
		} else {
			r := g.reads[0]
			r.err = br.QueryRow().Scan(r.dest...)
			failed = r.err != nil && !errors.Is(r.err, pgx.ErrNoRows)
		}
		if failed {
			for _, g := range groups[i+1:] {
				again = append(again, g.reads...)
			}
			break
		}
	}
	// An error of Close is one of a statement above, or comes after every
	// row was read: the reads stand as answered.
	_ = br.Close()
	p.count(1, len(live), len(groups))
	for _, r := range again {
		r.err = p.pool.Pool.QueryRow(r.ctx, r.sql, r.args...).Scan(r.dest...)
		p.count(1, 1, 1)
	}
}

// readGroup is the reads of one statement in a pipeline, and the
// statement that reads them all when there are several (mergeReads).
type readGroup struct {
	reads  []*pipeRead
	merged string
	args   []any
}

// groupReads gathers the reads of each statement that merges (mergedRow),
// in the order of each statement's first read; other reads, and those
// whose arguments do not merge, go one a group.
func groupReads(reads []*pipeRead) []readGroup {
	var groups []readGroup
	at := make(map[string]int, len(reads))
	for _, r := range reads {
		if !r.merge {
			groups = append(groups, readGroup{reads: []*pipeRead{r}})
			continue
		}
		if i, ok := at[r.sql]; ok {
			groups[i].reads = append(groups[i].reads, r)
			continue
		}
		at[r.sql] = len(groups)
		groups = append(groups, readGroup{reads: []*pipeRead{r}})
	}
	out := groups[:0:0]
	for _, g := range groups {
		if len(g.reads) > 1 {
			if g.merged, g.args = mergeReads(g.reads); g.merged == "" {
				for _, r := range g.reads {
					out = append(out, readGroup{reads: []*pipeRead{r}})
				}
				continue
			}
		}
		out = append(out, g)
	}
	return out
}

// Reads of one statement, merged.
//
// PostgreSQL's cost of a short read is mostly the statement's own (its
// portal, snapshot and executor start-up), not its row. Several reads of
// one statement go as one: each parameter's values as one array, unnested
// with the read's ordinal, and the statement run for each set as a LATERAL
// subquery, its parameters replaced by the set's columns. The text depends
// only on the statement, so it is prepared and planned once like the
// statement itself; the first column of each row is its read's ordinal.
//
// A statement merges when its caller says so (mergedRow): a one-row read
// with no LIMIT, ORDER BY or locking of its own, which a LATERAL subquery
// keeps as it is, and whose merged form was measured cheaper. KeyByHash's
// is (pg_stat_statements, create-payment at 16 in flight: 11 µs of
// execution a read merged, about 5 reads a statement, against 28 µs
// alone). Volumes' is not: its aggregate runs again for each read, 45 µs
// a read merged against 40 µs alone, so its reads stay statements of their
// own. Only parameters whose Go type names one PostgreSQL type merge
// (pgArray); a read of another goes alone.

// mergeReads returns the statement that reads reads (of one statement)
// at once, and its arguments; "" when a parameter's type does not merge.
func mergeReads(reads []*pipeRead) (string, []any) {
	n := len(reads[0].args)
	if n == 0 {
		return "", nil
	}
	args := make([]any, n)
	types := make([]string, n)
	for i := range n {
		if args[i], types[i] = pgArray(reads, i); args[i] == nil {
			return "", nil
		}
	}
	return mergedText(reads[0].sql, types), args
}

// mergedTexts caches mergedText's statements: a statement's merged text
// depends only on it and its parameters' types, and a pipeline of the
// hot path should not rewrite it with a regexp each time.
var mergedTexts sync.Map // mergedKey -> string

type mergedKey struct{ sql, types string }

// mergedText is the merged form of sql whose parameters are arrays of
// types (mergeReads).
func mergedText(sql string, types []string) string {
	key := mergedKey{sql, strings.Join(types, ",")}
	if s, ok := mergedTexts.Load(key); ok {
		return s.(string)
	}
	var b strings.Builder
	b.WriteString("SELECT r.ord, q.* FROM unnest(")
	for i, typ := range types {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$%d::%s[]", i+1, typ)
	}
	b.WriteString(") WITH ORDINALITY AS r(")
	for i := range types {
		fmt.Fprintf(&b, "p%d, ", i+1)
	}
	b.WriteString("ord) CROSS JOIN LATERAL (")
	b.WriteString(placeholder.ReplaceAllString(sql, "r.p$1"))
	b.WriteString(") AS q")
	mergedTexts.Store(key, b.String())
	return b.String()
}

// pgArray returns the reads' i-th arguments as one array, and the type of
// its elements; nil when they are not all of one type that it knows.
func pgArray(reads []*pipeRead, i int) (any, string) {
	switch reads[0].args[i].(type) {
	case []byte:
		return column[[]byte](reads, i), "bytea"
	case string:
		return column[string](reads, i), "text"
	case int64:
		return column[int64](reads, i), "int8"
	case int:
		return column[int](reads, i), "int8"
	}
	return nil, ""
}

// column returns the reads' i-th arguments as a []T, or nil when one is
// not a T.
func column[T any](reads []*pipeRead, i int) any {
	out := make([]T, len(reads))
	for j, r := range reads {
		v, ok := r.args[i].(T)
		if !ok {
			return nil
		}
		out[j] = v
	}
	return out
}

// scanMerged reads a merged statement's rows into their reads: a read
// with no row gets pgx.ErrNoRows, as alone. It returns the statement's
// error, the reads then unanswered.
func scanMerged(types *pgtype.Map, br pgx.BatchResults, reads []*pipeRead) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	got := make([]bool, len(reads))
	for rows.Next() {
		fields, vals := rows.FieldDescriptions(), rows.RawValues()
		var ord int64
		if err := pgx.ScanRow(types, fields[:1], vals[:1], &ord); err != nil {
			rows.Close()
			return err
		}
		if ord < 1 || ord > int64(len(reads)) || got[ord-1] {
			continue // a read's row after its first: QueryRow's Scan keeps the first
		}
		got[ord-1] = true
		r := reads[ord-1]
		r.err = pgx.ScanRow(types, fields[1:], vals[1:], r.dest...)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for i, r := range reads {
		if !got[i] {
			r.err = pgx.ErrNoRows
		}
	}
	return nil
}

func (p *readPipe) count(pipelines, reads, statements int) {
	p.countMu.Lock()
	p.pipelines += int64(pipelines)
	p.reads += int64(reads)
	p.statements += int64(statements)
	p.countMu.Unlock()
}
