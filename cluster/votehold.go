package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/gossipmeta"
)

// A replica that lost part of its Raft log holds its vote (issue 29
// point 3, "Corrupted data" and "Replaced flash"; docs/operations.md,
// "Corrupted or lost data").
//
// Raft's safety rests on every replica keeping what it acknowledged: an
// entry is committed once a majority stored it, and a candidate wins only
// with the votes of a majority, each of which refuses a candidate whose
// log is behind its own. A replica that comes back with less than it
// acknowledged (a corrupted entry cut out of its log, an empty data
// directory on new flash) breaks that: with the votes of the replicas
// that never had an entry, it could help elect a leader that lacks it,
// and the entry would be lost although it was acknowledged. So such a
// replica holds its vote:
//
//   - after cutting its log (integrity.go) it knows the last entry it had,
//     and grants a vote only to a candidate whose log is at least as
//     current as that entry: exactly the vote it would have granted with
//     its log intact;
//   - starting empty (replaced flash, or a new replica not bootstrapping)
//     it knows nothing of what it had, and grants a vote only to a
//     candidate whose log holds nothing but a bootstrap configuration:
//     one that never heard from a leader, as in a cluster still forming,
//     where a replica that saw another bootstrap first waits to be
//     reached instead of bootstrapping too. (Such a candidate could lack
//     data only if it was down since the cluster formed and every replica
//     holding that data is down as well.)
//   - either way it does not stand for election itself (its election
//     timer is an hour long and its own vote requests are not sent, as
//     for failed storage), so it cannot vote for itself;
//   - it releases the hold once its log reaches what it had, or the
//     furthest a leader's log reached in what that leader sent it, which
//     holds every committed entry (heardLeader), or when a leader hands
//     it leadership (which it does only to a follower whose log matches
//     its own): then its log holds every entry it could have
//     acknowledged. A replica that lost its vote record too (empty) then
//     also refuses every other vote in the term it caught up in, as if
//     it had voted in it.
//
// The hold is a file in the data directory, written durably before the
// log is cut, so a restart in the middle keeps it. If no leader can be
// elected without this replica's vote (a majority lost the same entries),
// an operator releases it with `grapnel cluster repair REPLICA`, accepting
// that the entries only the held replicas had are gone.

// holdFile is the hold's file in the data directory.
const holdFile = "vote-hold.json"

// voteHold is what a held replica remembers of the log it lost.
type voteHold struct {
	// Reason says why, in a few words.
	Reason string `json:"reason"`
	// Empty: the replica started with no Raft state and knows nothing of
	// what it had. It grants no vote.
	Empty bool `json:"empty,omitempty"`
	// Index and Term are the last entry the replica had before it cut its
	// log (Term is the current term when that entry was unreadable).
	Index uint64 `json:"index,omitempty"`
	Term  uint64 `json:"term,omitempty"`
	// Since is when the hold began.
	Since time.Time `json:"since"`
}

// holdState is a node's vote hold: nil or released once it holds none.
type holdState struct {
	path string
	now  func() time.Time
	// held is the current hold; nil when none.
	held atomic.Pointer[voteHold]
	// target is the furthest a leader's log reached in what it sent (0:
	// nothing heard yet; heardLeader).
	target atomic.Uint64
	// lastIndex is Raft's last index (set once Raft runs); currentTerm
	// its current term (from the stable store).
	lastIndex   atomic.Pointer[func() uint64]
	currentTerm atomic.Pointer[func() uint64]
	// release runs once, when the hold ends (caught up or by an operator).
	mu       sync.Mutex
	released chan struct{}
	onEnd    func(how endHow, h *voteHold)
	// refused counts the votes refused under the hold.
	refused atomic.Uint64
	// poke asks observeRaft to check whether the log caught up
	// (coalesced).
	poke chan struct{}
	// since is when this run began to hold; announced is set once the
	// hold is older than holdAnnounceAfter (checkHold).
	since     time.Time
	announced atomic.Bool
}

func newHoldState(dataDir string, now func() time.Time) *holdState {
	return &holdState{path: filepath.Join(dataDir, holdFile), now: now, released: make(chan struct{}), poke: make(chan struct{}, 1)}
}

// nudge asks for a check of the catch-up, after the leader sent entries.
func (h *holdState) nudge() {
	select {
	case h.poke <- struct{}{}:
	default:
	}
}

// load reads the hold left by an earlier run, if any.
func (h *holdState) load() error {
	b, err := os.ReadFile(h.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster: vote hold: %w", err)
	}
	var v voteHold
	if err := json.Unmarshal(b, &v); err != nil {
		// A hold that cannot be read is the strictest one: a replica
		// that wrote it had lost entries.
		v = voteHold{Reason: fmt.Sprintf("%s unreadable (%v)", holdFile, err), Empty: true, Since: h.now()}
	}
	h.held.Store(&v)
	return nil
}

// hold begins (or widens) a hold and writes it durably before returning.
func (h *holdState) hold(v voteHold) error {
	if old := h.held.Load(); old != nil {
		v.Empty = v.Empty || old.Empty
		if old.Term > v.Term || (old.Term == v.Term && old.Index > v.Index) {
			v.Index, v.Term = old.Index, old.Term
		}
		v.Since = old.Since
		v.Reason = old.Reason + "; " + v.Reason
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := durable.WriteFile(h.path, b, dataFileMode); err != nil {
		return fmt.Errorf("cluster: vote hold: %w", err)
	}
	h.held.Store(&v)
	return nil
}

// Held is the current hold, or nil.
func (h *holdState) Held() *voteHold {
	if h == nil {
		return nil
	}
	return h.held.Load()
}

// active says whether the replica holds its vote.
func (h *holdState) active() bool { return h != nil && h.Held() != nil }

// refuses says whether a vote (or pre-vote) for a candidate whose last
// entry is (lastTerm, lastIndex) must be refused.
func (h *holdState) refuses(lastTerm, lastIndex uint64) bool {
	v := h.Held()
	if v == nil {
		return false
	}
	if v.Empty {
		// A candidate with nothing beyond a bootstrap configuration has
		// never heard from a leader: the cluster is forming (replicas
		// racing to bootstrap, some too late), and nothing was
		// acknowledged that it could lack.
		return lastIndex > 1 || lastTerm > 1
	}
	return lastTerm < v.Term || (lastTerm == v.Term && lastIndex < v.Index)
}

// heardLeader notes how far a leader's log reaches, from an AppendEntries
// or InstallSnapshot of the given term: the replica must catch up to the
// furthest seen. A leader's first AppendEntries to a follower names its
// last entry as the previous one (Raft starts a follower's next index
// after the leader's last), and a leader's log holds every committed
// entry, so once this replica's log reaches that far it holds everything
// it could have acknowledged. A replica that cut its log knows its term,
// and counts only a leader Raft will accept: one of that term or later
// (a deposed leader may lack what a later one committed). One that
// started empty knows no term. (Heartbeats carry no index; Raft's
// transport hands them to Raft directly.)
func (h *holdState) heardLeader(term, index uint64) {
	v := h.Held()
	if v == nil {
		return
	}
	if !v.Empty {
		if f := h.currentTerm.Load(); f != nil && term < (*f)() {
			return
		}
	}
	for {
		t := h.target.Load()
		if index <= t || h.target.CompareAndSwap(t, index) {
			return
		}
	}
}

// caughtUp says whether Raft's log now holds what the hold waits for:
// the furthest a leader's log reached (heardLeader), or, after a cut, the
// last entry the replica had, whichever comes first. (A cut hold's entry
// may be a bound past what it had, when the lost frames could not all be
// read: segcheck.go.)
func (h *holdState) caughtUp() bool {
	v := h.Held()
	if v == nil {
		return false
	}
	f := h.lastIndex.Load()
	if f == nil {
		return false
	}
	last := (*f)()
	if t := h.target.Load(); t > 0 && last >= t {
		return true
	}
	return !v.Empty && last >= v.Index
}

// endHow is how a hold ended.
type endHow int

const (
	endCaughtUp endHow = iota
	endBootstrapped
	endOperator
)

// end removes the hold (durably) and says so once.
func (h *holdState) end(how endHow) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := h.held.Load()
	if v == nil {
		return nil
	}
	if err := durable.Remove(h.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cluster: vote hold: %w", err)
	}
	h.held.Store(nil)
	close(h.released)
	if h.onEnd != nil {
		h.onEnd(how, v)
	}
	return nil
}

// Released is closed when the hold ends.
func (h *holdState) Released() <-chan struct{} { return h.released }

// refuseVote answers a vote or pre-vote request the hold refuses, without
// handing it to Raft: Raft would record the candidate's term and, with
// an empty or cut log, grant it.
func refuseVote(rpc raft.RPC, self raft.ServerID, addr raft.ServerAddress) {
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(self), Addr: []byte(addr)}
	switch req := rpc.Command.(type) {
	case *raft.RequestVoteRequest:
		rpc.Respond(&raft.RequestVoteResponse{RPCHeader: hdr, Term: req.Term, Granted: false}, nil)
	case *raft.RequestPreVoteRequest:
		rpc.Respond(&raft.RequestPreVoteResponse{RPCHeader: hdr, Term: req.Term, Granted: false}, nil)
	}
}

// VoteHold says whether this replica holds its vote and why, in a few
// words; empty when it does not.
func (n *Node) VoteHold() string {
	v := n.hold.Held()
	if v == nil {
		return ""
	}
	if v.Empty {
		if t := n.hold.target.Load(); t > 0 {
			return truncate(fmt.Sprintf("%s; catching up to index %d", v.Reason, t), maxHoldLen)
		}
		return truncate(v.Reason+"; waiting for a leader", maxHoldLen)
	}
	return truncate(fmt.Sprintf("%s; votes only for a log through index %d of term %d", v.Reason, v.Index, v.Term), maxHoldLen)
}

// maxHoldLen bounds VoteHold's text, which gossip carries.
const maxHoldLen = 160

// ErrNoHold is ReleaseVoteHold's answer when the replica holds no vote.
var ErrNoHold = errs.ErrNoVoteHold

// ReleaseVoteHold ends this replica's vote hold by an operator's
// decision (`grapnel cluster repair`): the entries only it had may be
// lost. It returns what the hold was.
func (n *Node) ReleaseVoteHold() (string, error) {
	what := n.VoteHold()
	if what == "" {
		return "", ErrNoHold
	}
	if err := n.hold.end(endOperator); err != nil {
		return "", err
	}
	return what, nil
}

// checkHold ends the hold once the log caught up, and announces one that
// lasts; observeRaft calls it at every AppendEntries the hold sees and at
// its ticks. It is cheap.
func (n *Node) checkHold() {
	if !n.hold.caughtUp() {
		if n.hold.active() && !n.hold.announced.Load() && n.now().Sub(n.hold.since) >= holdAnnounceAfter && n.clusterFormed() {
			n.hold.announced.Store(true)
			n.faultFeed.Notify()
			if n.gossip != nil {
				n.gossip.announce()
			}
		}
		return
	}
	v := n.hold.Held()
	if v != nil && v.Empty {
		// It may have voted in this term before it lost its record of
		// that: refuse every other vote in it, as Raft does after voting.
		term := n.raft.CurrentTerm()
		if err := n.store.SetUint64(stableKeys.lastVoteTerm, term); err != nil {
			n.logger.Warn("vote hold: could not record the term caught up in; holding on", "error", err)
			return
		}
		if err := n.store.Set(stableKeys.lastVoteCand, []byte(noCandidate)); err != nil {
			n.logger.Warn("vote hold: could not record the term caught up in; holding on", "error", err)
			return
		}
	}
	if err := n.hold.end(endCaughtUp); err != nil {
		n.logger.Warn("vote hold: could not end it; holding on", "error", err)
	}
}

// noCandidate is the vote recorded for the term an empty replica caught
// up in: no replica has this id, so Raft grants no vote in that term.
const noCandidate = "(caught up: no vote in this term)"

// onHoldEnd says why the hold ended and lets the replica stand again.
func (n *Node) onHoldEnd(how endHow, v *voteHold) {
	switch how {
	case endBootstrapped:
		n.logger.Info("bootstrapped a new cluster: this replica votes")
	case endCaughtUp:
		n.logger.Warn("vote hold ended: the log caught up from the leader; this replica votes and stands again",
			"reason", v.Reason, "since", v.Since, "refused_votes", n.hold.refused.Load())
	default:
		n.logger.Warn("vote hold released by an operator (grapnel cluster repair): entries only this replica had may be lost",
			"reason", v.Reason, "index", v.Index, "term", v.Term, "refused_votes", n.hold.refused.Load())
	}
	n.feed.Notify()
	n.faultFeed.Notify()
	if n.gossip != nil {
		n.gossip.announce()
	}
}

// holdAnnounceAfter is how long a hold lasts in this run before the
// replica announces it: a replica that joins, or that saw another
// bootstrap first, holds for the moment it takes to catch up, and a
// problem opened and closed at every formation would be a false alarm
// and two writes.
const holdAnnounceAfter = 2 * time.Second

// voteHoldMeta is the hold as gossip announces it; empty for none, and
// while it is younger than holdAnnounceAfter in this run.
func (n *Node) voteHoldMeta() string {
	v := n.hold.Held()
	if v == nil || !n.hold.announced.Load() {
		return ""
	}
	if v.Empty {
		return "started with no Raft state; catching up"
	}
	return truncate(fmt.Sprintf("log cut at a corrupt entry; votes for a log through %d (term %d)", v.Index, v.Term),
		gossipmeta.MaxVoteHoldLen)
}

// VoteHolds are the replicas that hold their votes, by id, with why in a
// few words: this one from its own hold, the others as their gossip
// metadata announces it while they are alive. StorageFaultChanges
// signals its changes too.
func (n *Node) VoteHolds() map[string]string {
	out := map[string]string{}
	for id, p := range n.peers.all() {
		if id != n.cfg.ID && p.Role == gossipmeta.RoleServer && p.GossipStatus == StatusAlive && p.VoteHold != "" {
			out[id] = p.VoteHold
		}
	}
	if h := n.voteHoldMeta(); h != "" {
		out[n.cfg.ID] = h
	}
	return out
}

// clusterFormed says whether this replica or a live server member has
// Raft state or sees a leader: a replica that holds its vote while the
// cluster still forms (it waits for --bootstrap-expect) does not announce
// it, since nothing was acknowledged yet.
func (n *Node) clusterFormed() bool {
	if n.hasState() {
		return true
	}
	for id, p := range n.peers.all() {
		if id != n.cfg.ID && p.Role == gossipmeta.RoleServer && p.GossipStatus == StatusAlive && (p.HasState || p.LeaderSeen != "") {
			return true
		}
	}
	return false
}
