package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// A stream opened with Options.Lookout keeps, besides its heartbeat at
// the leader, a slow Cluster.Watch at one other replica: the lookout. A
// leader that loses power cannot say so, but the followers elect the next
// one within a few hundred milliseconds and every Watch pushes a change
// at once, so the lookout names the new leader as soon as it exists. The
// stream then ends with ErrLeaderMoved, and the caller reconnects to the
// leader the lookout named. The leader's own heartbeat is left with one
// job, noticing a leader this client alone cannot reach, which can take a
// few seconds; so it beats every LookoutHeartbeatInterval instead of
// every DefaultHeartbeatInterval, and an idle leader with many agents
// wakes a quarter as often for them (docs/replication.md, "Idle cost").

// Heartbeats of a stream with a lookout: LookoutHeartbeatInterval at the
// leader, LookoutHeartbeatTimeout (three intervals) before it counts as
// dead; lookoutHeartbeat at the lookout, which only has to show that the
// watch is alive, and a lookout silent for lookoutTimeout is replaced by
// the next replica.
const (
	LookoutHeartbeatInterval = time.Second
	LookoutHeartbeatTimeout  = 3 * time.Second
	lookoutHeartbeat         = 5 * time.Second
	lookoutTimeout           = 3 * lookoutHeartbeat
)

// The wait between lookouts that failed doubles from lookoutRetryFirst
// to lookoutRetryMax, so that a replica gone for hours costs the client
// next to nothing; one that answered starts it over.
const (
	lookoutRetryFirst = 100 * time.Millisecond
	lookoutRetryMax   = 5 * time.Second
)

// lookout runs until the stream ends. It watches the replicas other than
// the stream's, one at a time, moving to the next when one fails, falls
// silent, or turns out to be the stream's own replica under another
// address. It is owned by the stream's heartbeat goroutine, which waits
// for it.
func (r *Resolver) lookout(s *Stream) {
	delay, next := lookoutRetryFirst, 0
	// aliases are addresses found to reach the stream's own replica (a
	// configured host name beside the address it announces): skipped,
	// or a single replica would be watched over and over.
	aliases := map[string]bool{s.addr: true}
	for {
		addr := r.lookoutAddr(aliases, next)
		next++
		if addr != "" {
			switch answered, self := r.lookAt(s, addr); {
			case self:
				aliases[addr] = true
			case answered:
				delay = lookoutRetryFirst
			}
		}
		t := clock.NewTimer(r.opts.timers(), delay)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, lookoutRetryMax)
	}
}

// lookoutAddr is the i-th replica address other than the leader's, or ""
// when none is known (a single replica).
func (r *Resolver) lookoutAddr(leader map[string]bool, i int) string {
	var others []string
	for _, a := range r.Members() {
		if !leader[a] {
			others = append(others, a)
		}
	}
	if len(others) == 0 {
		return ""
	}
	return others[i%len(others)]
}

// lookAt watches the replica at addr until the stream ends or the watch
// fails. It reports whether the watch delivered any event, so that the
// caller backs off only from replicas that do not answer, and whether
// addr reached the stream's own replica.
func (r *Resolver) lookAt(s *Stream, addr string) (answered, self bool) {
	cc, err := r.conn(addr)
	if err != nil {
		return false, false
	}
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	silent := r.opts.timers().AfterFunc(lookoutTimeout, cancel)
	defer func() { silent.Stop() }()
	w, err := grapnelpb.NewClusterClient(cc).Watch(ctx,
		&grapnelpb.WatchRequest{HeartbeatMs: uint32(lookoutHeartbeat.Milliseconds())}, grpc.WaitForReady(false))
	if err != nil {
		return false, false
	}
	for {
		ev, err := w.Recv()
		if err != nil {
			if status.Code(err) == codes.Unimplemented {
				// An upstream server has no Watch; nothing to look out for.
				<-s.ctx.Done()
			}
			return answered, false
		}
		answered = true
		silent.Stop()
		silent = r.opts.timers().AfterFunc(lookoutTimeout, cancel)
		st := ev.GetStatus()
		if st.GetReplicaId() == s.replica {
			return true, true // the leader itself under another address
		}
		r.observeMembers(st)
		id, leaderAddr := leaderOf(addr, st)
		if id == "" || id == s.replica || st.GetTerm() <= s.term.Load() || s.term.Load() == 0 {
			continue
		}
		// A newer term has a leader that is not the stream's.
		if leaderAddr != "" {
			r.redirect(id, leaderAddr)
		} else {
			r.Forget(s.addr)
		}
		s.cancel(fmt.Errorf("%w: %w: %s at %s names %s the leader in term %d, after %s in term %d",
			ErrConnectionLost, ErrLeaderMoved, st.GetReplicaId(), addr, id, st.GetTerm(), s.replica, s.term.Load()))
		return true, false
	}
}

// observeMembers takes the replica set a status lists, and nothing else:
// a follower's view of the leader must not unset the leader a stream is
// open to.
func (r *Resolver) observeMembers(st *grapnelpb.StatusResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observeMembersLocked(st)
}
