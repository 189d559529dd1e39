package clustertest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/faultnet"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// Replica is one replica slot: its id, data directory and addresses stay
// the same across restarts; Node and FSM are those of the current run
// (nil while stopped).
type Replica struct {
	ID            string
	DataDir       string
	RaftAddress   string
	GossipAddress string
	// GRPCAddress is reserved for the replica and announced in gossip;
	// nothing listens on it unless a hook serves there.
	GRPCAddress string
	// Expect and Join are what the replica starts with.
	Expect int
	Join   []string
	Node   *cluster.Node
	FSM    *fsm.FSM

	// mem is the replica's store under InMemory, kept across restarts.
	mem       *cluster.MemoryStore
	drainStop chan struct{}
	drainDone chan struct{}
}

// Cluster is a set of replicas in this process.
type Cluster struct {
	t    testing.TB
	net  *faultnet.Network
	opts options
	root string

	mu       sync.Mutex
	replicas map[string]*Replica
	order    []string
}

// New starts n replicas at once, each with BootstrapExpect n (n > 1) and
// every other replica's gossip address to join, and registers Shutdown
// with t.Cleanup. It does not wait for a leader: call WaitLeader.
func New(t testing.TB, n int, opts ...Option) *Cluster {
	o := options{timing: FastTiming(), expect: n}
	if n == 1 {
		o.expect = 0
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logOutput == nil {
		o.logOutput = io.Discard
		if os.Getenv("CLUSTERTEST_LOG") != "" {
			o.logOutput, o.logLevel = os.Stderr, os.Getenv("CLUSTERTEST_LOG")
		}
	}
	c := &Cluster{t: t, net: faultnet.New(), opts: o, root: t.TempDir(), replicas: map[string]*Replica{}}
	t.Cleanup(c.Shutdown)
	var gossip []string
	for i := range n {
		r, err := c.newSlot(fmt.Sprintf("n%d", i+1))
		if err != nil {
			t.Fatalf("clustertest: %v", err)
		}
		r.Expect = o.expect
		gossip = append(gossip, r.GossipAddress)
	}
	for _, id := range c.order {
		r := c.replicas[id]
		for _, g := range gossip {
			if g != r.GossipAddress {
				r.Join = append(r.Join, g)
			}
		}
	}
	c.startAll(c.order)
	return c
}

func (c *Cluster) newSlot(id string) (*Replica, error) {
	raftAddr, err := freeTCP()
	if err != nil {
		return nil, err
	}
	grpcAddr, err := freeTCP()
	if err != nil {
		return nil, err
	}
	gossipAddr, err := freeTCPUDP()
	if err != nil {
		return nil, err
	}
	r := &Replica{
		ID: id, DataDir: filepath.Join(c.root, id), RaftAddress: raftAddr,
		GossipAddress: gossipAddr, GRPCAddress: grpcAddr,
	}
	if c.opts.inMemory {
		r.mem = cluster.NewMemoryStore()
	}
	c.mu.Lock()
	c.replicas[id] = r
	c.order = append(c.order, id)
	c.mu.Unlock()
	return r, nil
}

// startAll starts the given stopped replicas concurrently.
func (c *Cluster) startAll(ids []string) {
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.start(id)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.t.Fatalf("clustertest: %v", err)
	}
}

// start runs a stopped replica's node.
func (c *Cluster) start(id string) error {
	c.mu.Lock()
	r := c.replicas[id]
	running := r != nil && r.Node != nil
	c.mu.Unlock()
	if r == nil {
		return fmt.Errorf("no replica %q", id)
	}
	if running {
		return fmt.Errorf("replica %q is running", id)
	}
	f := fsm.New()
	cfg := cluster.Config{
		ID: r.ID, DataDir: r.DataDir, RaftAddress: r.RaftAddress, GRPCAddress: r.GRPCAddress,
		GossipAddress: r.GossipAddress, Version: "test", FSM: f, Timing: c.opts.timing,
		BootstrapExpect: r.Expect, Join: r.Join, CheckEntry: fsm.CheckType,
		LogOutput: c.opts.logOutput, LogLevel: c.opts.logLevel, LogStore: c.opts.logStore, MemoryStore: r.mem,
		RaftStreamLayer: func(ln net.Listener, _ net.Addr) raft.StreamLayer {
			return c.net.StreamLayer(r.ID, ln)
		},
		WrapGossipTransport: func(tr memberlist.Transport) memberlist.Transport {
			return c.net.GossipTransport(r.ID, tr)
		},
	}
	if c.opts.raftTLS != nil {
		cfg.RaftTLS = c.opts.raftTLS(r.ID)
		cfg.GossipKey = TestGossipKey
	}
	if c.opts.configure != nil {
		c.opts.configure(&cfg)
	}
	node, err := cluster.NewNode(cfg)
	if err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	c.mu.Lock()
	r.Node, r.FSM = node, f
	if !c.opts.keepLeaderCh {
		r.drainStop, r.drainDone = make(chan struct{}), make(chan struct{})
		go drain(node.LeaderCh(), r.drainStop, r.drainDone)
	}
	c.mu.Unlock()
	if c.opts.onStart != nil {
		c.opts.onStart(r)
	}
	return nil
}

// TryStart starts a stopped replica and returns why it did not start (a
// data directory its configuration refuses, say) instead of failing the
// test.
func (c *Cluster) TryStart(id string) error { return c.start(id) }

// drain reads a LeaderCh nobody else reads until stop closes.
func drain(ch <-chan bool, stop, done chan struct{}) {
	defer close(done)
	for {
		select {
		case <-ch:
		case <-stop:
			return
		}
	}
}

// Network is the fault network between the replicas.
func (c *Cluster) Network() *faultnet.Network { return c.net }

// IDs lists every replica slot, running or not, in creation order.
func (c *Cluster) IDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.order...)
}

// Running lists the running replicas in creation order.
func (c *Cluster) Running() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, id := range c.order {
		if c.replicas[id].Node != nil {
			out = append(out, id)
		}
	}
	return out
}

// Replica returns a copy of a replica slot (fatal for an unknown id).
func (c *Cluster) Replica(id string) Replica {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.replicas[id]
	if r == nil {
		c.t.Fatalf("clustertest: no replica %q", id)
	}
	return *r
}

// Node is a replica's running node, nil while stopped.
func (c *Cluster) Node(id string) *cluster.Node { return c.Replica(id).Node }

// FSM is a replica's running FSM, nil while stopped.
func (c *Cluster) FSM(id string) *fsm.FSM { return c.Replica(id).FSM }

// Leader is the running replica that leads in the highest term, or nil.
func (c *Cluster) Leader() *cluster.Node {
	var best *cluster.Node
	var bestTerm uint64
	for _, id := range c.Running() {
		n := c.Node(id)
		if n == nil || !n.IsLeader() {
			continue
		}
		if t := n.Raft().CurrentTerm(); best == nil || t > bestTerm {
			best, bestTerm = n, t
		}
	}
	return best
}

// WaitLeader waits until exactly one running replica leads and returns it.
func (c *Cluster) WaitLeader(timeout time.Duration) *cluster.Node {
	c.t.Helper()
	var leader *cluster.Node
	c.WaitFor("a single leader", timeout, func() bool {
		leader = nil
		count := 0
		for _, id := range c.Running() {
			if n := c.Node(id); n != nil && n.IsLeader() {
				leader = n
				count++
			}
		}
		return count == 1
	})
	return leader
}

// Followers are the running replicas other than the leader. It waits for
// a single leader first: between two leaders (a loaded machine can be
// there at any moment) every replica would pass for a follower.
func (c *Cluster) Followers() []*cluster.Node {
	c.t.Helper()
	leader := c.WaitLeader(15 * time.Second)
	var out []*cluster.Node
	for _, id := range c.Running() {
		if n := c.Node(id); n != nil && n != leader {
			out = append(out, n)
		}
	}
	return out
}

// Partition splits the replicas into groups that cannot reach each other.
func (c *Cluster) Partition(groups ...[]string) { c.net.Partition(groups...) }

// Isolate cuts one replica off from all others.
func (c *Cluster) Isolate(id string) { c.net.Isolate(id) }

// Freeze makes id's Raft connections stand still, as a stopped
// process's do (SIGSTOP); Thaw lets them go on.
func (c *Cluster) Freeze(id string) { c.net.Freeze(id) }

// Thaw undoes Freeze.
func (c *Cluster) Thaw(id string) { c.net.Thaw(id) }

// Heal restores every link.
func (c *Cluster) Heal() { c.net.Heal() }

// Stop shuts a replica down crash-like: no leave, no leadership transfer.
func (c *Cluster) Stop(id string) {
	c.t.Helper()
	if err := c.stop(id); err != nil {
		c.t.Fatalf("clustertest: stop %s: %v", id, err)
	}
}

func (c *Cluster) stop(id string) error {
	c.mu.Lock()
	r := c.replicas[id]
	var node *cluster.Node
	if r != nil {
		node = r.Node
	}
	c.mu.Unlock()
	if node == nil {
		return fmt.Errorf("replica %q is not running", id)
	}
	if c.opts.onStop != nil {
		c.opts.onStop(r)
	}
	err := node.Shutdown()
	c.mu.Lock()
	if r.drainStop != nil {
		close(r.drainStop)
		<-r.drainDone
		r.drainStop, r.drainDone = nil, nil
	}
	r.Node, r.FSM = nil, nil
	c.mu.Unlock()
	return err
}

// Restart starts a stopped replica again on its data directory and ports.
func (c *Cluster) Restart(id string) {
	c.t.Helper()
	c.startAll([]string{id})
}

// Wipe empties a stopped replica's data directory and makes it join the
// running replicas at its next start: the next Restart is a fresh replica
// under the same id and addresses (a replaced compute unit).
func (c *Cluster) Wipe(id string) {
	c.t.Helper()
	var join []string
	for _, o := range c.Running() {
		if o != id {
			join = append(join, c.Replica(o).GossipAddress)
		}
	}
	c.mu.Lock()
	r := c.replicas[id]
	running := r != nil && r.Node != nil
	if r != nil && !running {
		r.Join, r.Expect = join, 0
		if r.mem != nil {
			r.mem = cluster.NewMemoryStore()
		}
	}
	c.mu.Unlock()
	if r == nil || running {
		c.t.Fatalf("clustertest: wipe %s: not a stopped replica", id)
	}
	if err := os.RemoveAll(r.DataDir); err != nil {
		c.t.Fatalf("clustertest: wipe %s: %v", id, err)
	}
}

// RestartAll starts the given stopped replicas concurrently.
func (c *Cluster) RestartAll(ids ...string) {
	c.t.Helper()
	c.startAll(ids)
}

// Add starts a new replica that joins the running ones (no bootstrap) and
// returns its id; the leader adds it as a non-voter and promotes it.
func (c *Cluster) Add() string {
	c.t.Helper()
	var join []string
	for _, id := range c.Running() {
		join = append(join, c.Replica(id).GossipAddress)
	}
	r, err := c.newSlot(fmt.Sprintf("n%d", len(c.IDs())+1))
	if err != nil {
		c.t.Fatalf("clustertest: %v", err)
	}
	c.mu.Lock()
	r.Join = join
	c.mu.Unlock()
	c.startAll([]string{r.ID})
	return r.ID
}

// Apply proposes cmd through the current leader, retrying on a leadership
// change for up to 10 s, and returns the entry's index.
func (c *Cluster) Apply(cmd []byte) (uint64, error) {
	wall := clock.Real()
	deadline := wall.Now().Add(10 * time.Second)
	for {
		leader := c.Leader()
		var err error
		if leader != nil {
			var idx uint64
			if _, idx, err = leader.Apply(cmd, 2*time.Second); err == nil {
				return idx, nil
			}
			if !errors.Is(err, errs.ErrNotLeader) {
				return 0, err
			}
		}
		if wall.Now().After(deadline) {
			if err == nil {
				err = errors.New("no leader")
			}
			return 0, fmt.Errorf("clustertest: apply: %w", err)
		}
		clock.Sleep(wall, 20*time.Millisecond)
	}
}

// MustApply is Apply that fails the test on error.
func (c *Cluster) MustApply(cmd []byte) uint64 {
	c.t.Helper()
	idx, err := c.Apply(cmd)
	if err != nil {
		c.t.Fatal(err)
	}
	return idx
}

// WaitApplied waits until every running replica's FSM has applied the
// command at index (an index Apply returned). It asks the FSM, not Raft:
// Raft counts an entry applied when it hands it to the FSM goroutine.
func (c *Cluster) WaitApplied(index uint64) {
	c.t.Helper()
	c.WaitFor(fmt.Sprintf("index %d applied everywhere", index), 15*time.Second, func() bool {
		for _, id := range c.Running() {
			f := c.FSM(id)
			if f == nil || f.AppliedIndex() < index {
				return false
			}
		}
		return true
	})
}

// WaitConverged waits until every running replica holds the same state
// and returns it.
func (c *Cluster) WaitConverged() []byte {
	c.t.Helper()
	var same []byte
	c.WaitFor("equal FSM content on every replica", 15*time.Second, func() bool {
		same = nil
		for i, id := range c.Running() {
			got := c.Content(id)
			if i > 0 && !bytes.Equal(got, same) {
				return false
			}
			same = got
		}
		return true
	})
	return same
}

// Content is a replica's replicated state in the snapshot encoding without
// the applied index, so equal states give equal bytes on any replica.
func (c *Cluster) Content(id string) []byte {
	c.t.Helper()
	f := c.FSM(id)
	if f == nil {
		c.t.Fatalf("clustertest: replica %s is not running", id)
	}
	return Content(c.t, f)
}

// Content encodes an FSM's state without its applied index.
func Content(t testing.TB, f *fsm.FSM) []byte {
	var buf bytes.Buffer
	var err error
	f.Read(func(s *state.Store, _ uint64) { err = fsm.WriteSnapshot(&buf, s, 0) })
	if err != nil {
		t.Fatalf("clustertest: encode state: %v", err)
	}
	return buf.Bytes()
}

// WaitFor is testwait.For on the cluster's test: it polls cond until it
// holds, failing the test after timeout.
func (c *Cluster) WaitFor(what string, timeout time.Duration, cond func() bool) {
	c.t.Helper()
	testwait.For(c.t, timeout, cond, "clustertest: %s", what)
}

// Configuration is the Raft configuration as the given replica sees it:
// ids of voters and of non-voters, sorted.
func (c *Cluster) Configuration(id string) (voters, nonvoters []string) {
	c.t.Helper()
	n := c.Node(id)
	if n == nil {
		c.t.Fatalf("clustertest: replica %s is not running", id)
	}
	f := n.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		c.t.Fatalf("clustertest: configuration of %s: %v", id, err)
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters = append(voters, string(s.ID))
		} else {
			nonvoters = append(nonvoters, string(s.ID))
		}
	}
	sort.Strings(voters)
	sort.Strings(nonvoters)
	return voters, nonvoters
}

// LeaderConfiguration is Configuration as the current leader sees it; ok
// is false between two leaders, which a cluster under load can be in at
// any moment, so a wait's condition asks again instead of failing.
func (c *Cluster) LeaderConfiguration() (voters, nonvoters []string, ok bool) {
	c.t.Helper()
	l := c.Leader()
	if l == nil {
		return nil, nil, false
	}
	voters, nonvoters = c.Configuration(l.ID())
	return voters, nonvoters, true
}

// Shutdown stops every running replica concurrently; t.Cleanup calls it.
func (c *Cluster) Shutdown() {
	var wg sync.WaitGroup
	for _, id := range c.Running() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.stop(id); err != nil {
				c.t.Logf("clustertest: stop %s: %v", id, err)
			}
		}()
	}
	wg.Wait()
}
