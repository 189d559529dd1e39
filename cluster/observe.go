package cluster

import (
	"sync"

	"github.com/hashicorp/raft"
)

// changeFeed fans a "something changed" signal out to subscribers. A
// subscriber's channel holds one pending signal, so a slow reader sees
// changes coalesced and never blocks the sender.
type changeFeed struct {
	mu   sync.Mutex
	next int
	subs map[int]chan struct{}
}

func newChangeFeed() *changeFeed { return &changeFeed{subs: map[int]chan struct{}{}} }

func (f *changeFeed) subscribe() (<-chan struct{}, func()) {
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

func (f *changeFeed) notify() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Changes returns a channel signalled whenever the leader, the Raft
// configuration or gossip membership may have changed, and a cancel func.
// Signals are coalesced: read the current view after each one.
func (n *Node) Changes() (<-chan struct{}, func()) { return n.feed.subscribe() }

// observeRaft turns Raft's leader and peer observations into feed signals.
// It stops when Raft's observation channel is closed by Shutdown.
func (n *Node) observeRaft() {
	defer n.wg.Done()
	for {
		select {
		case o := <-n.obsCh:
			switch o.Data.(type) {
			case raft.LeaderObservation, raft.PeerObservation, raft.RaftState:
				n.feed.notify()
			}
		case <-n.shutdownCh:
			return
		}
	}
}
