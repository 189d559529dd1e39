package client

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// While no leader is known, find does not only ask the replicas between
// backoff steps: it also keeps a Cluster.Watch open at every replica
// address, and any replica that comes to name a leader — a new one
// elected, or a replica that comes up knowing one — wakes it at once. The
// watches wait for their connection (WaitForReady), so a replica that is
// not up yet is watched from the moment its port answers, at gRPC's
// redial pace (rpc.Redial), instead of at the next backoff step. At
// power-on, when the agents start before the replicas have elected a
// leader, the backoff alone cost them 25 to 100 ms after the election.

// leaderWatchHeartbeat is the heartbeat asked of these watches: only a
// change wakes find, so the repeats are not needed; they only show the
// watch is alive, which the next poll round shows as well.
const leaderWatchHeartbeat = 5 * time.Second

// leaderWatchRetry spaces the reopening of a watch that a replica ended,
// so that one that ends every watch at once (shutting down) cannot make
// it spin.
const leaderWatchRetry = 50 * time.Millisecond

// leaderWatch is the set of watches of one find.
type leaderWatch struct {
	r       *Resolver
	ctx     context.Context
	cancel  context.CancelFunc
	wake    chan struct{} // capacity 1: a replica named a leader
	wg      sync.WaitGroup
	watched map[string]bool // owned by find's goroutine

	mu sync.Mutex
	// self is the last replica that named itself the leader, and its id:
	// find takes it without asking around again (leader).
	self, selfID string
}

func (r *Resolver) newLeaderWatch(ctx context.Context) *leaderWatch {
	ctx, cancel := context.WithCancel(ctx)
	return &leaderWatch{r: r, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), watched: map[string]bool{}}
}

// add watches every address not watched yet.
func (w *leaderWatch) add(addrs []string) {
	for _, a := range addrs {
		if w.watched[a] {
			continue
		}
		w.watched[a] = true
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.watch(a)
		}()
	}
}

// stop ends the watches and waits for their goroutines.
func (w *leaderWatch) stop() {
	w.cancel()
	w.wg.Wait()
}

// wait returns after d, when a watch names a leader, or when ctx ends.
func (w *leaderWatch) wait(ctx context.Context, d time.Duration) error {
	t := clock.NewTimer(w.r.opts.timers(), d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-w.wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Resolver) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// leader returns the replica that last named itself the leader in its
// Watch, and its id; "" if none did. A replica that says it leads is as
// authoritative in a Watch event as in an answer to poll, so find takes
// it without another round of asking, which cost a CLI started with its
// replica one more round trip after the election. A leader named by
// another replica is asked around for, as poll explains.
func (w *leaderWatch) leader() (addr, id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.self, w.selfID
}

// sawSelf records whether the replica at addr, in its latest event,
// names itself the leader: a replica that stepped down since is not
// taken.
func (w *leaderWatch) sawSelf(addr, id string, leads bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case leads:
		w.self, w.selfID = addr, id
	case w.self == addr:
		w.self, w.selfID = "", ""
	}
}

func (w *leaderWatch) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// watch follows one replica's Watch until the find ends. It wakes find
// when the replica names a leader other than the one it named before: the
// repeats of a stale name (a follower that still names a leader that is
// gone) do not make find ask around again and again.
func (w *leaderWatch) watch(addr string) {
	cc, err := w.r.conn(addr)
	if err != nil {
		return
	}
	named := ""
	for {
		st, err := grapnelpb.NewClusterClient(cc).Watch(w.ctx,
			&grapnelpb.WatchRequest{HeartbeatMs: uint32(leaderWatchHeartbeat.Milliseconds())}, grpc.WaitForReady(true))
		for err == nil {
			var ev *grapnelpb.WatchEvent
			if ev, err = st.Recv(); err != nil {
				break
			}
			id, leader := leaderOf(addr, ev.GetStatus())
			w.sawSelf(addr, id, leader == addr)
			switch {
			case leader != "" && id != named:
				named = id
				w.signal()
			case id == "":
				named = ""
			}
		}
		if status.Code(err) == codes.Unimplemented || w.r.isClosed() {
			return // an upstream server, or the connections are gone
		}
		retry := clock.NewTimer(w.r.opts.timers(), leaderWatchRetry)
		select {
		case <-w.ctx.Done():
			retry.Stop()
			return
		case <-retry.C:
		}
	}
}
