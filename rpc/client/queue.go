package client

import "sync"

// queue hands values from the receive goroutine to one consumer without
// ever blocking the receiver: a slow consumer (a terminal printing a flood
// of log lines) must not stall responses to other requests. The backlog is
// unbounded; it lives only as long as the subscription.
type queue[T any] struct {
	out   chan T
	wake  chan struct{} // capacity 1: "items or end changed"
	stopc chan struct{}
	once  sync.Once

	mu    sync.Mutex // guards the following fields
	items []T
	ended bool // no more pushes; close out once drained
}

func newQueue[T any]() *queue[T] {
	q := &queue[T]{out: make(chan T), wake: make(chan struct{}, 1), stopc: make(chan struct{})}
	go q.run()
	return q
}

// push appends v; it is dropped once the queue has ended.
func (q *queue[T]) push(v T) {
	q.mu.Lock()
	if q.ended {
		q.mu.Unlock()
		return
	}
	q.items = append(q.items, v)
	q.mu.Unlock()
	q.signal()
}

// end lets the consumer drain what is queued, then closes out.
func (q *queue[T]) end() {
	q.mu.Lock()
	q.ended = true
	q.mu.Unlock()
	q.signal()
}

// stop closes out at once and discards the backlog.
func (q *queue[T]) stop() { q.once.Do(func() { close(q.stopc) }) }

func (q *queue[T]) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *queue[T]) run() {
	defer close(q.out)
	for {
		q.mu.Lock()
		if len(q.items) == 0 {
			ended := q.ended
			q.mu.Unlock()
			if ended {
				return
			}
			select {
			case <-q.wake:
				continue
			case <-q.stopc:
				return
			}
		}
		v := q.items[0]
		var zero T
		q.items[0] = zero
		q.items = q.items[1:]
		q.mu.Unlock()
		select {
		case q.out <- v:
		case <-q.stopc:
			return
		}
	}
}
