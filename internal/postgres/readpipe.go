package postgres

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
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
	// pipelines and reads count what the readers sent, for the tests.
	pipelines, reads int64
	countMu          sync.Mutex
}

// pipeRead is one read waiting for a reader.
type pipeRead struct {
	ctx  context.Context
	sql  string
	args []any
	dest []any
	err  error
	done chan struct{}
}

// queryRow returns a row read through the pipe when it is scanned.
func (p *readPipe) queryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return pipeRow{p: p, ctx: ctx, sql: sql, args: args}
}

// pipeRow is a row read when scanned: the read goes with the others
// waiting then, and the reader scans it into dest.
type pipeRow struct {
	p    *readPipe
	ctx  context.Context
	sql  string
	args []any
}

func (r pipeRow) Scan(dest ...any) error {
	return unavailable(r.p.read(r.ctx, r.sql, r.args, dest))
}

// read queues a read and waits for it; it reads alone when the pipe is
// full or closed.
func (p *readPipe) read(ctx context.Context, sql string, args, dest []any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.run(pipeReaders, p.answer)
	r := &pipeRead{ctx: ctx, sql: sql, args: args, dest: dest, done: make(chan struct{})}
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

// pipeline sends reads in one round trip and scans each row. A statement
// that fails ends the pipeline (PostgreSQL skips the rest): its read gets
// the error, and the reads after it run again alone.
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
		p.count(1, 1)
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
	b := &pgx.Batch{}
	for _, r := range live {
		b.Queue(r.sql, r.args...)
	}
	br := c.SendBatch(p.bg, b)
	rest := len(live)
	for i, r := range live {
		r.err = br.QueryRow().Scan(r.dest...)
		if r.err != nil && !errors.Is(r.err, pgx.ErrNoRows) {
			rest = i + 1
			break
		}
	}
	// An error of Close is one of a read above, or comes after every row
	// was read: the reads stand as answered.
	_ = br.Close()
	p.count(1, len(live))
	for _, r := range live[rest:] {
		r.err = p.pool.Pool.QueryRow(r.ctx, r.sql, r.args...).Scan(r.dest...)
		p.count(1, 1)
	}
}

func (p *readPipe) count(pipelines, reads int) {
	p.countMu.Lock()
	p.pipelines += int64(pipelines)
	p.reads += int64(reads)
	p.countMu.Unlock()
}
