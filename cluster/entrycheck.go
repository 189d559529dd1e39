package cluster

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// entryCheck sits between the Raft transport and Raft: it hands Raft
// every RPC the transport received, except an AppendEntries that carries
// a command entry check refuses, which it answers with an error itself.
// Such an entry is never stored, so it never applies and never has to be
// cut out of the Raft log by hand: the replica keeps serving and restarts as
// before. The leader sees the RPC fail and retries with Raft's backoff;
// heartbeats (no entries) pass, so the replica does not call elections.
// One goroutine, stopped by stop, keeps the RPCs in the order the
// transport delivered them.
//
// It also answers every AppendEntries that carries entries with an error
// once this replica's storage failed (storage.go), without a log line:
// Raft would try to store them, fail, log it, and answer with a failure
// that the leader takes for a log mismatch, walking back its next index
// entry by entry down to a snapshot install. An error leaves the leader's
// next index where it is, and Raft's backoff paces its retries.
type entryCheck struct {
	in  <-chan raft.RPC
	out chan raft.RPC
	// own carries this replica's RPCs to itself (fastfail.go): they take
	// the transport's way in without the network.
	own   chan raft.RPC
	check func(data []byte) error // nil: no check of the entries
	// storage, once failed, refuses entries.
	storage *storageGuard
	// hold, while active, refuses the votes it must (votehold.go) and
	// learns the leader's commit index; self and addr answer them.
	hold *holdState
	// checkHold ends the hold if the log caught up (Node.checkHold).
	checkHold func()
	self      raft.ServerID
	addr      raft.ServerAddress
	log       hclog.Logger
	stop      <-chan struct{}
	now       func() time.Time

	mu      sync.Mutex
	logged  time.Time // last refusal logged
	skipped int       // refusals since, not logged
	refused uint64
}

// refusalLogEvery bounds the log of refused entries: a leader retries the
// same entry at Raft's backoff for as long as it leads.
const refusalLogEvery = 10 * time.Second

func newEntryCheck(in <-chan raft.RPC, check func([]byte) error, storage *storageGuard, log hclog.Logger, now func() time.Time, stop <-chan struct{}) *entryCheck {
	return &entryCheck{in: in, out: make(chan raft.RPC), own: make(chan raft.RPC), check: check, storage: storage, log: log, now: now, stop: stop}
}

func (c *entryCheck) run() {
	for {
		var rpc raft.RPC
		select {
		case rpc = <-c.in:
		case rpc = <-c.own:
		case <-c.stop:
			return
		}
		if c.holds(rpc) {
			continue
		}
		if req, ok := rpc.Command.(*raft.AppendEntriesRequest); ok && len(req.Entries) > 0 {
			if err := c.storage.refusal("store entries from the leader"); err != nil {
				rpc.Respond(nil, err)
				continue
			}
		}
		if err := c.inspect(rpc.Command); err != nil {
			c.refuse(err)
			rpc.Respond(nil, err)
			continue
		}
		select {
		case c.out <- rpc:
		case <-c.stop:
			return
		}
	}
}

// holds answers a vote request the hold refuses, and tells the hold of a
// leader's AppendEntries; it reports whether it answered the RPC.
func (c *entryCheck) holds(rpc raft.RPC) bool {
	if !c.hold.active() {
		return false
	}
	switch req := rpc.Command.(type) {
	case *raft.RequestVoteRequest:
		if c.hold.refuses(req.LastLogTerm, req.LastLogIndex) {
			c.hold.refused.Add(1)
			refuseVote(rpc, c.self, c.addr)
			return true
		}
	case *raft.RequestPreVoteRequest:
		if c.hold.refuses(req.LastLogTerm, req.LastLogIndex) {
			c.hold.refused.Add(1)
			refuseVote(rpc, c.self, c.addr)
			return true
		}
	case *raft.AppendEntriesRequest:
		c.hold.heardLeader(req.Term, max(req.LeaderCommitIndex, req.PrevLogEntry+uint64(len(req.Entries))))
		c.hold.nudge()
	case *raft.InstallSnapshotRequest:
		c.hold.heardLeader(req.Term, req.LastLogIndex)
		c.hold.nudge()
	case *raft.TimeoutNowRequest:
		// A leader hands leadership over only to a follower whose log
		// matches its own: one that held its vote has caught up, so the
		// hold ends now, before Raft stands for election.
		if c.checkHold != nil {
			c.checkHold()
		}
	}
	return false
}

// inspect checks the command entries of an AppendEntries.
func (c *entryCheck) inspect(cmd any) error {
	req, ok := cmd.(*raft.AppendEntriesRequest)
	if !ok || c.check == nil {
		return nil
	}
	for _, e := range req.Entries {
		if e.Type != raft.LogCommand {
			continue
		}
		if err := c.check(e.Data); err != nil {
			return fmt.Errorf("cluster: entry %d from leader %s refused, not stored: %w", e.Index, req.RPCHeader.Addr, err)
		}
	}
	return nil
}

func (c *entryCheck) refuse(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refused++
	now := c.now()
	if !c.logged.IsZero() && now.Sub(c.logged) < refusalLogEvery {
		c.skipped++
		return
	}
	c.log.Error("refused an entry this version cannot apply; if the leader runs a newer grapnel-server, upgrade this replica",
		"error", err, "refusals_not_logged", c.skipped)
	c.logged, c.skipped = now, 0
}

// Refused counts the AppendEntries RPCs refused so far.
func (c *entryCheck) Refused() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}
