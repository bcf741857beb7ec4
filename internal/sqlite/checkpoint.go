package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The checkpointer copies the WAL's pages into the database file from a
// connection of its own, so that the writer never does it inside a
// batch. A PASSIVE checkpoint takes no lock the writer needs: commits go
// on appending to the WAL while it runs, and the writer starts the WAL
// over once a checkpoint has caught up with it and no reader still needs
// its frames.

// checkpointEvery is how often the checkpointer copies what the WAL
// gained since its last pass: about one fsync of the database file a
// second under load, and a WAL of about a second's commits.
const checkpointEvery = time.Second

// walLimit bounds the WAL file. A PASSIVE checkpoint copies frames but
// the WAL only starts over when the writer begins a transaction while no
// reader is inside it: under a steady flow of reads (every API request
// reads its key) that moment never comes and the file grows without end
// (100 MiB a second at full load, until the disk is full). Past walLimit
// the checkpointer has the writer run a RESTART checkpoint between two
// batches: it waits for the readers of the moment (milliseconds: new
// readers then read the database file), and the next commits write the
// WAL from its start again (journal_size_limit cuts the file back to
// walLimit). RESTART rather than TRUNCATE: a WAL that keeps its blocks
// is overwritten in place, and create-payment ran 10 % faster, its p99
// a third lower, than with a WAL emptied and grown again each time.
//
// Each RESTART holds every command while it fsyncs the WAL and the
// database file and copies the frames appended since the pass before it:
// 15 to 30 ms on this project's 2-core machine under load, and the
// requests that arrive meanwhile wait as long. At 64 MiB that came every
// 1.2 s at 1,500 payments a second (a payment writes about 31 KiB of
// frames at that load), about one request in fifty held, and it set the
// open loop's p99: 52, 45 and 53 ms against 40, 30 and 25 ms at 256 MiB
// in three alternated pairs, p90 17, 12, 13 against 13, 9, 9 ms. The
// closed loop's throughput was the same once the WAL had reached its size
// (2,099/2,366 and 2,157/2,163 ok/s after 8 s of load); while it grows to
// it, the first seconds after a start, every fdatasync also writes the
// file's new size and blocks, and create-payment ran up to a quarter
// slower. A smaller filesystem gets a smaller limit (walLimitFor).
const walLimit = 256 << 20

// walShare is the largest part of its filesystem the WAL is let to take
// (walLimitFor), and minWALLimit the least limit, on a tiny one.
const (
	walShare    = 4
	minWALLimit = 1 << 20
)

// walLimitFor is the WAL's limit for the database at path: walLimit, or a
// walShare-th of the filesystem holding it when that is less, so that on
// a small disk (the full-disk chaos test's 256 MiB tmpfs: 64 MiB) the WAL
// starts over long before it could take the space the database needs.
func walLimitFor(path string) int64 {
	size, ok := fsSize(filepath.Dir(path))
	if !ok {
		return walLimit
	}
	return limitFor(size)
}

// limitFor is the WAL's limit on a filesystem of size bytes.
func limitFor(size int64) int64 {
	return max(min(walLimit, size/walShare), minWALLimit)
}

// walPoll is how often the checkpointer looks at the WAL's size: one
// stat. A WAL that grew by walLimit/4 since the last pass is copied at
// once rather than at the next second.
const walPoll = 100 * time.Millisecond

// restartWait is how long the writer waits for the readers of the moment
// in a RESTART checkpoint, and restartRetry how long the checkpointer
// lets pass after one that could not wait them out.
const (
	restartWait  = 200 * time.Millisecond
	restartRetry = 5 * time.Second
)

// errCheckpointBusy is a PASSIVE pass that did not run: another
// connection's checkpoint held the WAL's checkpoint lock (another
// process's, an online backup's, the sealing's TRUNCATE). SQLite answers
// it with a row, not an error, and -1 for the frames of the WAL and those
// copied.
var errCheckpointBusy = errors.New("wal_checkpoint(PASSIVE): another checkpoint runs")

// errRestartBusy is a RESTART checkpoint that readers kept from
// finishing within restartWait.
var errRestartBusy = errors.New("wal_checkpoint(RESTART): busy")

// restartRetryAt is when to try a RESTART that failed with err again. A
// reader that held on (an online backup) is left restartRetry: each try
// holds the writer up to restartWait. Any other failure (the disk full,
// an I/O error) returns at once without waiting for anyone, and is tried
// at the next poll: once space returns, the WAL must start over before
// the writes it lets through fill the disk again (a chaos run whose
// RESTART waited 5 s after the disk was freed saw the WAL grow to the
// whole 256 MiB filesystem, and no checkpoint could then write).
func restartRetryAt(err error, now time.Time) time.Time {
	var e *sqlite.Error
	if errors.Is(err, errRestartBusy) || errors.As(err, &e) && (e.Code()&0xff == sqlite3.SQLITE_BUSY || e.Code()&0xff == sqlite3.SQLITE_LOCKED) {
		return now.Add(restartRetry)
	}
	return now
}

type checkpointer struct {
	db   *sql.DB
	path string
	wal  string
	// file is the database file, opened for startWriteback.
	file *os.File
	// pageSize is the database's, for the size of the WAL's frames.
	pageSize int64
	stop     chan struct{}
	done     chan struct{}
	// restart runs a RESTART checkpoint on the writer's connection.
	restart func() error
	// limit is walLimit, poll walPoll (nanoseconds); the tests lower
	// them. The WAL may pass the limit by what the writer appends in one
	// poll: a test that lowers the limit lowers the poll with it.
	limit, poll atomic.Int64
	// copied is the frames the passes copied, restarted the RESTART
	// checkpoints that succeeded, writebacks the writebacks started after
	// a pass: for the tests.
	// busy the passes that met another checkpoint (errCheckpointBusy).
	copied, restarted, writebacks, busy atomic.Int64
	closed                              sync.Once
}

func newCheckpointer(path string, restart func() error) (*checkpointer, error) {
	q := "file:" + URIPath(path) + "?_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)"
	db, err := sql.Open("sqlite", q)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint connection: %w", err)
	}
	db.SetMaxOpenConns(1)
	var pageSize int64
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		db.Close()
		return nil, fmt.Errorf("read page size: %w", err)
	}
	c := &checkpointer{db: db, path: path, wal: path + "-wal", pageSize: pageSize, stop: make(chan struct{}), done: make(chan struct{}), restart: restart}
	c.limit.Store(walLimitFor(path))
	c.poll.Store(int64(walPoll))
	go c.run()
	return c, nil
}

func (c *checkpointer) run() {
	defer close(c.done)
	t := time.NewTimer(time.Duration(c.poll.Load()))
	defer t.Stop()
	var last, restarted os.FileInfo
	var lastPass, retryAt time.Time
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			t.Reset(time.Duration(c.poll.Load()))
		}
		fi, err := os.Stat(c.wal)
		if err != nil {
			continue
		}
		limit := c.limit.Load()
		// After a restart the file keeps its size until the next commit
		// cuts it: not a reason for another.
		same := func(a os.FileInfo) bool {
			return a != nil && fi.ModTime().Equal(a.ModTime()) && fi.Size() == a.Size()
		}
		if fi.Size() > limit && !same(restarted) && time.Now().After(retryAt) {
			// A PASSIVE pass first, from this connection while the writer
			// goes on committing: the RESTART, which holds the writer,
			// then has only the last few frames to copy. Without it the
			// writer stood 12-23 ms in each RESTART (every 0.3 s at
			// 2,300 payments a second), and the open-loop p99 of
			// create-payment was 41 ms; with it, 1-9 ms and 22 ms.
			log, copied, err := c.checkpoint()
			if errors.Is(err, errCheckpointBusy) {
				// The other checkpoint ends in moments: the next poll
				// tries again. (Its -1 frames, taken for a count, were a
				// WAL started over, and a file no commit changed then
				// never was.)
				continue
			}
			if err == nil {
				c.copied.Add(int64(copied))
				c.writeBack()
				// The WAL started over since the file last grew: it is
				// past the limit only until the commit that started it
				// over cuts it back (journal_size_limit), or, where that
				// limit is higher, because frames are overwritten in
				// place. A poll between that commit's first write and
				// its cut found a changed file past the limit and held
				// the writer for a second RESTART right after the first
				// (10 ms, with 508 frames to copy).
				if c.frames(log) <= limit {
					restarted, last, lastPass = fi, fi, time.Now()
					continue
				}
			}
			// PASSIVE passes go on meanwhile.
			err = c.restart()
			if err == nil {
				c.restarted.Add(1)
				// The file as the RESTART left it, not as it was before
				// the pass: the writer went on appending during the pass
				// and until the RESTART took its connection, and a file
				// that had changed since fi looked like a WAL to start
				// over again at the next poll: 16 of 58 RESTARTs (three
				// runs of 20 s at 1,500 payments a second) were such
				// second ones, right after the first, each holding every
				// command as long (a median of 24 ms).
				if after, err := os.Stat(c.wal); err == nil {
					fi = after
				}
				restarted, last = fi, nil
				continue
			}
			retryAt = restartRetryAt(err, time.Now())
		}
		// Nothing committed since the last pass: nothing to copy.
		if same(last) {
			continue
		}
		if time.Since(lastPass) < checkpointEvery && (last == nil || fi.Size() < last.Size()+limit/4) {
			continue
		}
		lastPass = time.Now()
		if _, copied, err := c.checkpoint(); err == nil {
			last = fi
			c.copied.Add(int64(copied))
			c.writeBack()
		}
	}
}

// writeBack starts the kernel writing the pages a PASSIVE pass copied
// into the database file, without waiting for them. SQLite fsyncs the
// database file only in a checkpoint that copies the WAL's last frame:
// under load, where the writer appends during every pass, only the
// RESTART does, on the writer's connection, and its fsync then wrote
// every page copied since the last one while the writer waited: 40-60 ms
// every 0.6 s with 1,000,000 payments in the database (their pages are
// spread over gigabytes), the p99 of create-payment. Started here, that
// writing is mostly done by the RESTART. It makes nothing durable and
// hides no error: a page the disk fails to write fails SQLite's own
// fsync, as before (Linux reports a writeback error to every file open
// on it), and the checkpoint with it. A failure of the call itself only
// leaves the writing to that fsync.
func (c *checkpointer) writeBack() {
	if c.file == nil {
		f, err := os.Open(c.path)
		if err != nil {
			return
		}
		c.file = f
	}
	if startWriteback(c.file) == nil {
		c.writebacks.Add(1)
	}
}

// frames is the size of n frames of the WAL, its header included.
func (c *checkpointer) frames(n int) int64 {
	return walHeader + int64(n)*(c.pageSize+walFrameHeader)
}

// checkpoint runs one PASSIVE checkpoint and reports the WAL's frames and
// those copied into the database.
func (c *checkpointer) checkpoint() (log, copied int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var busy int
	err = c.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &copied)
	if err == nil && log < 0 {
		c.busy.Add(1)
		return 0, 0, errCheckpointBusy
	}
	return log, copied, err
}

// close stops the checkpointer; a store may be closed twice.
func (c *checkpointer) close() {
	c.closed.Do(func() {
		close(c.stop)
		<-c.done
		c.db.Close()
		if c.file != nil {
			c.file.Close()
		}
	})
}
