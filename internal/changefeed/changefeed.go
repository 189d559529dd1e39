// Package changefeed fans a "something changed" signal out to
// subscribers. Each subscriber's channel holds one pending signal, so a
// burst of changes reaches a slow reader as one, and Notify never
// blocks: readers look at the current state after each signal. With no
// subscriber, Notify takes a lock and returns.
package changefeed

import "sync"

// Feed is one source of change signals; the zero value is not usable,
// New makes one.
type Feed struct {
	mu   sync.Mutex
	next int
	subs map[int]chan struct{}
}

// New returns a feed with no subscribers.
func New() *Feed { return &Feed{subs: map[int]chan struct{}{}} }

// Notify signals every subscriber; it never blocks.
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

// Subscribe returns a channel signalled after every Notify, coalesced,
// and the function that ends the subscription.
func (f *Feed) Subscribe() (<-chan struct{}, func()) {
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

// Subscribers is how many subscriptions are open.
func (f *Feed) Subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}
