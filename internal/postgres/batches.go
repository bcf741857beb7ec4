package postgres

import "sync"

// batches queues items for a few workers, each of which takes every item
// queued at the moment (up to max) and handles them together: the group
// workers' commands (group.go) and the read pipe's reads (readpipe.go).
// At low load a worker takes an item alone, at once; nothing waits for
// company.
type batches[T any] struct {
	queue chan T
	max   int
	// mu: offering holds it for reading; closing, for writing, so that
	// nothing is queued after the workers drained the queue.
	mu      sync.RWMutex
	closed  bool
	workers sync.WaitGroup
	start   sync.Once
}

// run starts n workers, the first time it is called, each handing every
// batch it takes to handle.
func (b *batches[T]) run(n int, handle func([]T)) {
	b.start.Do(func() {
		for range n {
			b.workers.Add(1)
			go b.work(handle)
		}
	})
}

func (b *batches[T]) work(handle func([]T)) {
	defer b.workers.Done()
	items := make([]T, 0, b.max)
	for x := range b.queue {
		items = append(items[:0], x)
	more:
		for len(items) < b.max {
			select {
			case x, ok := <-b.queue:
				if !ok {
					break more
				}
				items = append(items, x)
			default:
				break more
			}
		}
		handle(items)
		clear(items)
	}
}

// offer queues x; it reports false when the queue is full or closed.
func (b *batches[T]) offer(x T) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return false
	}
	select {
	case b.queue <- x:
		return true
	default:
		return false
	}
}

// close stops the workers once they handled everything queued.
func (b *batches[T]) close() {
	b.mu.Lock()
	was := b.closed
	b.closed = true
	b.mu.Unlock()
	if !was {
		close(b.queue)
	}
	b.workers.Wait()
}
