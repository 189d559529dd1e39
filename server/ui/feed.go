package ui

import "sync"

// Feed fans "the store changed" out to the open event streams. Each
// subscriber's channel holds one pending signal, so a burst of applied
// entries reaches a slow page as one update and never blocks the FSM.
// With no page open, Notify takes a lock and returns.
type Feed struct {
	mu   sync.Mutex
	next int
	subs map[int]chan struct{}
}

// NewFeed returns a feed with no subscribers.
func NewFeed() *Feed { return &Feed{subs: map[int]chan struct{}{}} }

// Notify signals every subscriber; it never blocks. The FSM's observer
// calls it after every applied command.
func (f *Feed) Notify() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// subscribe returns a channel signalled on every Notify and its cancel.
func (f *Feed) subscribe() (<-chan struct{}, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.next
	f.next++
	ch := make(chan struct{}, 1)
	f.subs[id] = ch
	return ch, func() {
		f.mu.Lock()
		delete(f.subs, id)
		f.mu.Unlock()
	}
}

// subscribers is how many streams listen, for tests.
func (f *Feed) subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}
