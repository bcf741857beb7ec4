package xaalis

import (
	"context"
	"sync/atomic"
)

// ReadMark remembers the newest commit the reads of one request may have
// seen, so that its answer waits for that commit to be durable and no
// later one (Store.Durable). A store that publishes commits before they
// are durable (SQLite's writer, syncer.go) records it on every read of
// its read pool; one whose commits are durable when seen (PostgreSQL)
// records nothing.
type ReadMark struct{ seq atomic.Uint64 }

type readMarkKey struct{}

// WithReadMark returns ctx carrying a new ReadMark, for one request.
func WithReadMark(ctx context.Context) context.Context {
	return context.WithValue(ctx, readMarkKey{}, &ReadMark{})
}

// ReadMarkOf returns ctx's ReadMark, or nil.
func ReadMarkOf(ctx context.Context) *ReadMark {
	m, _ := ctx.Value(readMarkKey{}).(*ReadMark)
	return m
}

// Saw records that a read may have seen commits up to seq.
func (m *ReadMark) Saw(seq uint64) {
	for {
		cur := m.seq.Load()
		if seq <= cur || m.seq.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// Seq is the newest commit the reads may have seen (0: none).
func (m *ReadMark) Seq() uint64 { return m.seq.Load() }
