package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/chaos/pki"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// ErrNotReady means a cluster did not reach the wanted condition in time.
var ErrNotReady = errors.New("cluster not ready")

// GrapnelConfig says how to start a Grapnel cluster.
type GrapnelConfig struct {
	// Bin is the grapnel-server binary.
	Bin string
	// Subcommand, when set, comes before the flags: "server" for Bin the
	// multi-call binary grapnel rather than its link grapnel-server.
	Subcommand string
	// Dir holds one data directory and one log file per replica.
	Dir string
	// Replicas is the cluster size; 1 starts a single replica that
	// bootstraps itself, more form a cluster with --bootstrap-expect.
	Replicas int
	// Extra flags for every replica, e.g. Raft timing knobs.
	Extra []string
	// Deferred leaves every replica unstarted; Start starts each.
	Deferred bool
	// PKI, when set, secures the cluster: mTLS on gRPC and Raft, gossip
	// encrypted; the bench's clients use PKI.Client. Nil is --insecure.
	PKI *pki.Set
	// UI serves each replica's dashboard (--ui-address) on an address of
	// its own, Replica.UIAddr.
	UI bool
	// TimerSlack, when not zero, is every replica's timer slack, as
	// TimerSlackNSec= in deploy/systemd/grapnel-server.service sets it.
	TimerSlack time.Duration
}

// Replica is one grapnel-server process and its addresses.
type Replica struct {
	Name       string
	Addr       string // gRPC, for CLIs and agents
	RaftAddr   string
	GossipAddr string
	// UIAddr is the dashboard's address, empty unless GrapnelConfig.UI.
	UIAddr  string
	DataDir string
	LogPath string
	args    []string
	// bin and extra, when bin is set, replace the cluster's binary and
	// its Extra flags at the next Start (SetBinary): an upgrade test
	// runs replicas of two releases, each with the flags it knows.
	bin    string
	extra  []string
	proc   *Process
	status *grpc.ClientConn
	// frozen is set from Freeze until Thaw (or the process ends): the
	// waits do not ask a frozen replica, whose Status would only hang.
	frozen atomic.Bool
}

// Grapnel is a cluster of grapnel-server processes on loopback, insecure.
// Status, Term, Frozen and the waits may run concurrently with each other;
// Start, Kill, Freeze, Thaw and Close must not run concurrently with
// anything.
type Grapnel struct {
	bin        string
	timerSlack time.Duration
	Replicas   []*Replica
	// ClientTLS is what clients connect with; nil: insecure.
	ClientTLS *rpc.TLSFiles
}

// ClientOptions are what a client of this cluster dials with: every
// replica's address and the cluster's security settings.
func (g *Grapnel) ClientOptions() client.Options {
	if g.ClientTLS == nil {
		return client.Options{Addrs: g.Addrs(), Insecure: true}
	}
	return client.Options{Addrs: g.Addrs(), TLS: *g.ClientTLS}
}

// statusTimeout bounds one Status call; a replica on loopback answers in
// well under a millisecond unless it is gone.
const statusTimeout = 500 * time.Millisecond

// StartGrapnel allocates ports and data directories and starts every
// replica. It does not wait for a leader (WaitLeader does).
func StartGrapnel(cfg GrapnelConfig) (*Grapnel, error) {
	if cfg.Replicas < 1 {
		return nil, fmt.Errorf("grapnel: %d replicas: need at least 1", cfg.Replicas)
	}
	per := 3
	if cfg.UI {
		per = 4
	}
	addrs, err := FreeAddrs(per * cfg.Replicas)
	if err != nil {
		return nil, err
	}
	g := &Grapnel{bin: cfg.Bin, timerSlack: cfg.TimerSlack}
	for i := range cfg.Replicas {
		r := &Replica{
			Name: fmt.Sprintf("r%d", i+1), Addr: addrs[per*i], RaftAddr: addrs[per*i+1], GossipAddr: addrs[per*i+2],
			DataDir: filepath.Join(cfg.Dir, fmt.Sprintf("r%d", i+1)),
			LogPath: filepath.Join(cfg.Dir, fmt.Sprintf("r%d.log", i+1)),
		}
		if err := os.MkdirAll(r.DataDir, 0o755); err != nil {
			return nil, err
		}
		r.args = []string{"--name", r.Name, "-a", r.Addr, "--raft-address", r.RaftAddr, "--data-dir", r.DataDir}
		if cfg.Subcommand != "" {
			r.args = append([]string{cfg.Subcommand}, r.args...)
		}
		if cfg.PKI == nil {
			r.args = append(r.args, "-k")
		} else {
			sec, err := cfg.PKI.ServerFlags(r.Name)
			if err != nil {
				return nil, err
			}
			r.args = append(r.args, sec...)
			g.ClientTLS = &cfg.PKI.Operator
		}
		if cfg.UI {
			r.UIAddr = addrs[per*i+3]
			r.args = append(r.args, "--ui-address", r.UIAddr)
		}
		g.Replicas = append(g.Replicas, r)
	}
	if cfg.Replicas > 1 {
		for i, r := range g.Replicas {
			r.args = append(r.args, "--gossip-address", r.GossipAddr, "--bootstrap-expect", strconv.Itoa(cfg.Replicas))
			for j, o := range g.Replicas {
				if j != i {
					r.args = append(r.args, "--join", o.GossipAddr)
				}
			}
		}
	}
	creds := insecure.NewCredentials()
	if g.ClientTLS != nil {
		tc, err := rpc.ClientTLSConfig(*g.ClientTLS, rpc.ServerName)
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(tc)
	}
	for _, r := range g.Replicas {
		r.extra = cfg.Extra
		r.status, err = grpc.NewClient(r.Addr,
			grpc.WithTransportCredentials(creds),
			// A killed replica comes back at the same address; the
			// default backoff (up to 2 minutes) would hide it.
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 200 * time.Millisecond},
				MinConnectTimeout: time.Second,
			}))
		if err != nil {
			g.Close()
			return nil, err
		}
	}
	for i := range g.Replicas {
		if cfg.Deferred {
			break
		}
		if err := g.Start(i); err != nil {
			g.Close()
			return nil, err
		}
	}
	return g, nil
}

// Addrs are the gRPC addresses of all replicas, in replica order.
func (g *Grapnel) Addrs() []string {
	out := make([]string, len(g.Replicas))
	for i, r := range g.Replicas {
		out[i] = r.Addr
	}
	return out
}

// Start starts replica i (again) with its original flags and data dir.
func (g *Grapnel) Start(i int) error {
	r := g.Replicas[i]
	if r.proc != nil && r.proc.Alive() {
		return fmt.Errorf("%s already runs", r.Name)
	}
	bin, args := g.command(i)
	p, err := StartProcessWith(r.Name, bin, args, r.LogPath, g.timerSlack)
	if err != nil {
		return err
	}
	r.proc = p
	return nil
}

// command is replica i's binary and flags as the next Start runs them.
func (g *Grapnel) command(i int) (string, []string) {
	r := g.Replicas[i]
	bin := g.bin
	if r.bin != "" {
		bin = r.bin
	}
	return bin, append(slices.Clip(r.args), r.extra...)
}

// SetBinary makes the next Start of replica i run bin with its own
// addresses, data dir and security flags plus extra (in place of the
// cluster's Extra): another release of grapnel-server on the same data
// dir. It does not stop or start anything.
func (g *Grapnel) SetBinary(i int, bin string, extra []string) {
	g.Replicas[i].bin, g.Replicas[i].extra = bin, slices.Clone(extra)
}

// Binary is the grapnel-server binary replica i runs (or runs next).
func (g *Grapnel) Binary(i int) string {
	bin, _ := g.command(i)
	return bin
}

// Stop ends replica i with SIGTERM, as systemd stops a unit, waits up to
// grace and SIGKILLs it after that. It says how it ended: nil for an exit
// of its own with status 0 within grace, otherwise an error naming the
// status, or that it had to be killed. The replica stays down until Start.
func (g *Grapnel) Stop(i int, grace time.Duration) error {
	p := g.Replicas[i].proc
	if p == nil || !p.Alive() {
		return fmt.Errorf("%s: %w before the stop", g.Replicas[i].Name, ErrExited)
	}
	err := p.StopWithin(grace)
	g.Replicas[i].proc = nil
	g.Replicas[i].frozen.Store(false)
	return err
}

// ExitErr says how replica i's process ended: nil while it runs (or
// before its first Start).
func (g *Grapnel) ExitErr(i int) error {
	if p := g.Replicas[i].proc; p != nil {
		return p.ExitErr()
	}
	return nil
}

// Pid is replica i's process id, 0 while it is down.
func (g *Grapnel) Pid(i int) int {
	if p := g.Replicas[i].proc; p != nil && p.Alive() {
		return p.Pid()
	}
	return 0
}

// Running says whether replica i's process runs.
func (g *Grapnel) Running(i int) bool {
	p := g.Replicas[i].proc
	return p != nil && p.Alive()
}

// Kill sends SIGKILL to replica i and waits until it is gone; it stays
// down (and is not waited for) until Start.
func (g *Grapnel) Kill(i int) {
	if p := g.Replicas[i].proc; p != nil {
		p.Kill()
		g.Replicas[i].proc = nil
	}
	g.Replicas[i].frozen.Store(false)
}

// Freeze stops replica i's process group with SIGSTOP: the gray failure of
// a hung host. The process lives, its connections stay open and its
// listeners still take connections into their backlog, but nothing
// answers, so neither its peers nor its clients hear of it from the
// kernel, as they do of a killed one. It stays frozen until Thaw; Kill,
// Stop and Close end a frozen replica as they end a running one. Whoever
// freezes a replica must thaw it on every way out, or the run leaves a
// stopped process behind.
func (g *Grapnel) Freeze(i int) error {
	r := g.Replicas[i]
	if r.proc == nil || !r.proc.Alive() {
		return fmt.Errorf("%s: %w before the freeze", r.Name, ErrExited)
	}
	// Marked first, so that no wait running meanwhile asks it.
	r.frozen.Store(true)
	if err := r.proc.Freeze(); err != nil {
		r.frozen.Store(false)
		return fmt.Errorf("%s: SIGSTOP: %w", r.Name, err)
	}
	return nil
}

// Thaw lets frozen replica i run again (SIGCONT).
func (g *Grapnel) Thaw(i int) error {
	r := g.Replicas[i]
	if r.proc == nil || !r.proc.Alive() {
		r.frozen.Store(false)
		return fmt.Errorf("%s: %w while frozen", r.Name, ErrExited)
	}
	if err := r.proc.Thaw(); err != nil {
		return fmt.Errorf("%s: SIGCONT: %w", r.Name, err)
	}
	r.frozen.Store(false)
	return nil
}

// Frozen says whether replica i is frozen (Freeze, not yet Thaw).
func (g *Grapnel) Frozen(i int) bool {
	return g.Replicas[i].frozen.Load()
}

// Close stops every replica (SIGTERM, then SIGKILL; a frozen one is
// thawed to act on the SIGTERM) and drops the status connections. It is
// safe to call more than once.
func (g *Grapnel) Close() {
	for _, r := range g.Replicas {
		if r.proc != nil {
			r.proc.Stop(5 * time.Second)
		}
		r.frozen.Store(false)
		if r.status != nil {
			r.status.Close()
			r.status = nil
		}
	}
}

// Status asks replica i for the replica set and the leader it sees.
func (g *Grapnel) Status(ctx context.Context, i int) (*grapnelpb.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	return grapnelpb.NewClusterClient(g.Replicas[i].status).Status(ctx, &grapnelpb.StatusRequest{})
}

// index returns the replica with the given name, or -1.
func (g *Grapnel) index(name string) int {
	for i, r := range g.Replicas {
		if r.Name == name {
			return i
		}
	}
	return -1
}

// checkAlive fails when a replica that should run (it was started and
// not killed) has exited; waiting for it would only time out.
func (g *Grapnel) checkAlive() error {
	for _, r := range g.Replicas {
		if r.proc != nil {
			if err := r.proc.ExitErr(); err != nil {
				return fmt.Errorf("%w\n%s", err, LogTail(r.LogPath, 20))
			}
		}
	}
	return nil
}

// poll calls cond every interval until it reports done, a replica dies, or
// ctx ends; the last reason cond gave goes into the timeout error.
func (g *Grapnel) poll(ctx context.Context, what string, cond func() (done bool, why string)) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	why := "not checked yet"
	for {
		if err := g.checkAlive(); err != nil {
			return err
		}
		var done bool
		if done, why = cond(); done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s: %s (%v)", ErrNotReady, what, why, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// WaitLeader waits until a running replica says it leads and a majority of
// the cluster's replicas report that same leader; it returns its index. A
// frozen replica is not asked: it would hold every round up for the
// Status timeout (and leave too little of ctx for the others). So the
// leader found is never a frozen one, which still thinks it leads.
func (g *Grapnel) WaitLeader(ctx context.Context) (int, error) {
	leader := -1
	err := g.poll(ctx, "a leader", func() (bool, string) {
		votes := map[string]int{}
		var self string
		for i, r := range g.Replicas {
			if !g.Running(i) || g.Frozen(i) {
				continue
			}
			st, err := g.Status(ctx, i)
			if err != nil {
				continue
			}
			if st.GetLeaderId() != "" {
				votes[st.GetLeaderId()]++
			}
			if st.GetLeaderId() == r.Name {
				self = r.Name
			}
		}
		if self == "" {
			return false, fmt.Sprintf("no replica says it leads (seen: %v)", votes)
		}
		if votes[self] <= len(g.Replicas)/2 {
			return false, fmt.Sprintf("%s leads but only %d replicas agree", self, votes[self])
		}
		leader = g.index(self)
		return true, ""
	})
	return leader, err
}

// WaitHealthy waits until every replica runs, all agree on one leader, the
// leader lists every replica as a healthy voter, and every replica has
// applied the log up to where the leader's commit index stood when the wait
// began, i.e. a restarted replica has caught up. It returns the leader.
func (g *Grapnel) WaitHealthy(ctx context.Context) (int, error) {
	for i, r := range g.Replicas {
		switch {
		case !g.Running(i):
			return -1, fmt.Errorf("%w: %s does not run", ErrNotReady, r.Name)
		case g.Frozen(i):
			return -1, fmt.Errorf("%w: %s is frozen", ErrNotReady, r.Name)
		}
	}
	leader := -1
	var target uint64
	err := g.poll(ctx, "a healthy cluster", func() (bool, string) {
		sts := make([]*grapnelpb.StatusResponse, len(g.Replicas))
		for i, r := range g.Replicas {
			st, err := g.Status(ctx, i)
			if err != nil {
				return false, fmt.Sprintf("%s: %v", r.Name, err)
			}
			sts[i] = st
		}
		lid := sts[0].GetLeaderId()
		l := g.index(lid)
		if l < 0 {
			return false, fmt.Sprintf("%s sees leader %q", g.Replicas[0].Name, lid)
		}
		for i, st := range sts {
			if st.GetLeaderId() != lid {
				return false, fmt.Sprintf("%s sees leader %q, %s sees %q", g.Replicas[i].Name, st.GetLeaderId(), g.Replicas[0].Name, lid)
			}
		}
		if target == 0 {
			target = sts[l].GetCommitIndex()
		}
		if len(g.Replicas) > 1 {
			ms := sts[l].GetMembers()
			if len(ms) != len(g.Replicas) {
				return false, fmt.Sprintf("leader %s lists %d members", lid, len(ms))
			}
			for _, m := range ms {
				if !m.GetVoter() || !m.GetHealthy() {
					return false, fmt.Sprintf("leader %s: member %s voter=%v healthy=%v", lid, m.GetId(), m.GetVoter(), m.GetHealthy())
				}
			}
		}
		for i, st := range sts {
			if st.GetAppliedIndex() < target {
				return false, fmt.Sprintf("%s applied %d of %d", g.Replicas[i].Name, st.GetAppliedIndex(), target)
			}
		}
		leader = l
		return true, ""
	})
	return leader, err
}

// LeaderFirst returns the gRPC addresses with the given replica's first,
// the others in replica order.
func (g *Grapnel) LeaderFirst(leader int) []string {
	out := []string{g.Replicas[leader].Addr}
	for i, r := range g.Replicas {
		if i != leader {
			out = append(out, r.Addr)
		}
	}
	return out
}

// Term is the highest Raft term any running replica that is not frozen
// reports; a change between two calls means the cluster held an election
// in between.
func (g *Grapnel) Term(ctx context.Context) uint64 {
	var term uint64
	for i := range g.Replicas {
		if !g.Running(i) || g.Frozen(i) {
			continue
		}
		if st, err := g.Status(ctx, i); err == nil {
			term = max(term, st.GetTerm())
		}
	}
	return term
}

// Cluster is a Cluster client of replica i alone (not leader-following),
// on the connection Status uses.
func (g *Grapnel) Cluster(i int) grapnelpb.ClusterClient {
	return grapnelpb.NewClusterClient(g.Replicas[i].status)
}
