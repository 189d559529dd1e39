package campaign

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/chaos/netns"
	"github.com/grapnel-io/grapnel/chaos/pki"
	"github.com/grapnel-io/grapnel/chaos/upgrade"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// Ports every replica uses on its host's address; each host is its own
// namespace, so they never collide.
const (
	GRPCPort   = 25551
	RaftPort   = 25561
	GossipPort = 25571
)

// statusTimeout bounds one Status call: a frozen or cut-off replica must
// not hold up a 50 ms observation.
const statusTimeout = 250 * time.Millisecond

// replica is one grapnel-server in host i's namespace. name and gen change
// when the replica is replaced by a fresh one.
type replica struct {
	host    *netns.Host
	name    string
	gen     int
	dataDir string
	logPath string
	conn    *grpc.ClientConn
	p       *proc
	// previous is set while the replica runs the previous release's
	// binary (Config.Previous); the upgrade fault swaps it.
	previous bool
}

// agent is one grapnel-agent next to a replica.
type agent struct {
	host      *netns.Host
	name      string
	runFolder string
	logPath   string
	p         *proc
}

// cluster is the replicas and agents of a campaign. mu guards the
// replicas' processes and names, which faults change while the observer
// reads them.
type cluster struct {
	net   *netns.Net
	bins  map[string]string
	dir   string
	grace time.Duration
	// pki holds every certificate and the gossip key; nil runs the
	// cluster insecure (Config.Insecure).
	pki *pki.Set
	// selfBin is the grapnel-chaos binary, run in the client namespace
	// as the intruder.
	selfBin string
	// prev is the previous release, nil when the campaign has no
	// upgrade; logf reports progress.
	prev *Previous
	logf func(format string, args ...any)

	mu sync.Mutex
	// dropped are the flags the previous release's grapnel-server lacks
	// that were left off its command line, once reported.
	dropped []string
	// removedAt maps a removed replica's certificate (its file) to the
	// cluster version at its removal: only a removal at
	// state.ClusterVersionRevocation or above revokes it.
	removedAt map[string]uint32
	// finalized is set once the campaign raised the cluster version.
	finalized bool
	extra     []string // Raft timing flags of the current phase
	logStore  string   // --raft-log-store, "" for the server's default
	reps      []*replica
	agents    []*agent
	// stable maps the stable workloads to their agents (runner.want),
	// for a power cut to wait until they run again.
	stable map[string]string
	// flash holds every host's data dirs and run folder; nil runs them
	// on the run directory's own disk (Config.Flash off or unavailable).
	flash *flash
}

func hostAddr(h *netns.Host, port int) string {
	return net.JoinHostPort(h.Addr, fmt.Sprint(port))
}

// newCluster prepares (does not start) a replica and an agent per host;
// every address is checked to route over the bridge first. With fl, host
// i's replica data dir and agent run folder are on its flash mount.
func newCluster(n *netns.Net, bins map[string]string, dir string, grace time.Duration, extra []string, secure bool, fl *flash) (*cluster, error) {
	c := &cluster{net: n, bins: bins, dir: dir, grace: grace, extra: extra, removedAt: map[string]uint32{},
		logf: func(string, ...any) {}, flash: fl}
	creds := insecure.NewCredentials()
	if secure {
		var names, agents []string
		for i := range n.Hosts() {
			names = append(names, fmt.Sprintf("r%d", i+1))
			agents = append(agents, fmt.Sprintf("agent_h%d", i+1))
		}
		var err error
		if c.pki, err = pki.Make(filepath.Join(dir, "pki"), names, agents, 7*24*time.Hour); err != nil {
			return nil, fmt.Errorf("certificates: %w", err)
		}
		tc, err := rpc.ClientTLSConfig(c.pki.Operator, rpc.ServerName)
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(tc)
	}
	for i, h := range n.Hosts() {
		if err := n.CheckRoute(h.Addr); err != nil {
			return nil, err
		}
		conn, err := grpc.NewClient(hostAddr(h, GRPCPort),
			grpc.WithTransportCredentials(creds),
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 200 * time.Millisecond},
				MinConnectTimeout: time.Second,
			}))
		if err != nil {
			c.close()
			return nil, err
		}
		name := fmt.Sprintf("r%d", i+1)
		c.reps = append(c.reps, &replica{host: h, name: name, conn: conn,
			dataDir: filepath.Join(c.storeRoot(i), name), logPath: filepath.Join(dir, name+".log")})
		an := fmt.Sprintf("agent_h%d", i+1)
		c.agents = append(c.agents, &agent{host: h, name: an,
			runFolder: filepath.Join(c.storeRoot(i), an+"-run"), logPath: filepath.Join(dir, an+".log")})
	}
	return c, nil
}

// storeRoot is where host i keeps its replica data dirs and its agent's
// run folder: its flash mount, or the run directory. Logs stay in the
// run directory, off the flash, so that a power cut never takes them.
func (c *cluster) storeRoot(i int) string {
	if m := c.flash.mount(i); m != nil {
		return m.Mountpoint()
	}
	return c.dir
}

// addrs are the replicas' gRPC addresses.
func (c *cluster) addrs() []string {
	var out []string
	for _, r := range c.reps {
		out = append(out, hostAddr(r.host, GRPCPort))
	}
	return out
}

func (c *cluster) agentNames() []string {
	var out []string
	for _, a := range c.agents {
		out = append(out, a.name)
	}
	return out
}

// benchAgents describes the agents the way bench.HostIDs reads them.
func (c *cluster) benchAgents() []*bench.Agent {
	var out []*bench.Agent
	for _, a := range c.agents {
		out = append(out, &bench.Agent{Name: a.name, RunFolder: a.runFolder, LogPath: a.logPath})
	}
	return out
}

// clientOptions are the options of a campaign client (the operator's
// certificate, or insecure).
func (c *cluster) clientOptions() client.Options {
	if c.pki == nil {
		return bench.Insecure(c.addrs())
	}
	return client.Options{Addrs: c.addrs(), TLS: c.pki.Operator}
}

// securityArgs are the flags that give a program its certificate (and a
// replica the gossip key), or -k.
func (c *cluster) securityArgs(f rpc.TLSFiles, gossip bool) []string {
	if c.pki == nil {
		return []string{"-k"}
	}
	args := []string{"--ca_pem", f.CA, "--crt_pem", f.Cert, "--key_pem", f.Key}
	if gossip {
		args = append(args, "--gossip-key-file", c.pki.GossipKey)
	}
	return args
}

// replicaArgs are replica i's flags: host addresses, the others to join,
// its certificate (or insecure), the grace and the phase's Raft timing.
func (c *cluster) replicaArgs(i int) ([]string, error) {
	r := c.reps[i]
	var files rpc.TLSFiles
	if c.pki != nil {
		var err error
		if files, err = c.pki.Replica(r.name); err != nil {
			return nil, err
		}
	}
	args := append(c.securityArgs(files, true), "--name", r.name, "--log-level", "info",
		"-a", hostAddr(r.host, GRPCPort), "--raft-address", hostAddr(r.host, RaftPort),
		"--gossip-address", hostAddr(r.host, GossipPort), "--bootstrap-expect", fmt.Sprint(len(c.reps)),
		"--data-dir", r.dataDir, "--agent-reconnect-grace", c.grace.String(),
		// Snapshots within a short campaign (a corrupt-snapshot fault
		// needs one), and a scrub that finds data rotting at rest.
		"--raft-snapshot-threshold", "1024", "--scrub-interval", "30s")
	if c.logStore != "" {
		args = append(args, "--raft-log-store", c.logStore)
	}
	args = append(args, boundFlags()...)
	for j, o := range c.reps {
		if j != i {
			args = append(args, "--join", hostAddr(o.host, GossipPort))
		}
	}
	return append(args, c.extra...), nil
}

// startReplica starts replica i (again) with its data dir.
func (c *cluster) startReplica(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reps[i]
	if r.p.alive() {
		return fmt.Errorf("%s already runs", r.name)
	}
	if err := mkdirDurable(r.dataDir); err != nil {
		return err
	}
	args, err := c.replicaArgs(i)
	if err != nil {
		return err
	}
	bin := c.bins["grapnel-server"]
	if r.previous {
		bin = c.prev.Server
		var dropped []string
		if args, dropped = PreviousArgs(args, c.prev.Flags); len(dropped) > 0 && c.dropped == nil {
			c.dropped = dropped
			c.logf("the previous release %s has no %s: left off its command line", short(c.prev.Commit), strings.Join(dropped, ", "))
		}
	}
	p, err := startProc(r.name, c.net.Command(r.host, bin, args...), r.logPath)
	if err != nil {
		return err
	}
	r.p = p
	return nil
}

// PreviousArgs are args for the previous release's grapnel-server, whose
// flags are f: every flag f lacks is left out with its value ("--flag
// value", the value being the next argument when it does not start with
// "-", or "--flag=value"), and dropped names them, each once. The
// campaign gives a replica no flag without a value but -k, which the
// previous release has.
func PreviousArgs(args []string, f upgrade.Flags) (kept, dropped []string) {
	unknown := f.Unknown(args)
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(a, "=")
		if !strings.HasPrefix(a, "-") || !slices.Contains(unknown, name) {
			kept = append(kept, a)
			continue
		}
		if !slices.Contains(dropped, name) {
			dropped = append(dropped, name)
		}
		if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++
		}
	}
	return kept, dropped
}

// short is a commit's first 7 digits.
func short(commit string) string { return commit[:min(7, len(commit))] }

// release names what replica i runs: "the previous release 50f62c3" or
// "this build".
func (c *cluster) release(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reps[i].previous {
		return "the previous release " + short(c.prev.Commit)
	}
	return "this build"
}

// onPrevious lists the replicas running the previous release.
func (c *cluster) onPrevious() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i, r := range c.reps {
		if r.previous {
			out = append(out, i)
		}
	}
	return out
}

// replicaProc is replica i's process, nil when it does not run.
func (c *cluster) replicaProc(i int) *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.reps[i].p; p.alive() {
		return p
	}
	return nil
}

func (c *cluster) replicaName(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reps[i].name
}

func (c *cluster) startAgent(i int) error {
	a := c.agents[i]
	if err := mkdirDurable(a.runFolder); err != nil {
		return err
	}
	var files rpc.TLSFiles
	if c.pki != nil {
		files = c.pki.Agents[a.name]
	}
	args := append(c.securityArgs(files, false), "--name", a.name, "--server-url", strings.Join(c.addrs(), ","),
		"--run-folder", a.runFolder, "--runtimes", "process", "--log-level", "info")
	p, err := startProc(a.name, c.net.Command(a.host, c.bins["grapnel-agent"], args...), a.logPath)
	if err != nil {
		return err
	}
	a.p = p
	return nil
}

// status asks replica i for its view; an error when it does not run or
// does not answer in statusTimeout.
func (c *cluster) status(ctx context.Context, i int) (*grapnelpb.StatusResponse, error) {
	if c.replicaProc(i) == nil {
		return nil, fmt.Errorf("%s: not running", c.replicaName(i))
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	return grapnelpb.NewClusterClient(c.reps[i].conn).Status(ctx, &grapnelpb.StatusRequest{})
}

// statuses asks every replica at once; nil entries did not answer.
func (c *cluster) statuses(ctx context.Context) []*grapnelpb.StatusResponse {
	out, _ := c.statusesAt(ctx)
	return out
}

// statusesAt is statuses with the time each answer arrived.
func (c *cluster) statusesAt(ctx context.Context) ([]*grapnelpb.StatusResponse, []time.Time) {
	out := make([]*grapnelpb.StatusResponse, len(c.reps))
	at := make([]time.Time, len(c.reps))
	var wg sync.WaitGroup
	for i := range c.reps {
		wg.Go(func() {
			if st, err := c.status(ctx, i); err == nil {
				out[i], at[i] = st, time.Now()
			}
		})
	}
	wg.Wait()
	return out, at
}

// leaderOf picks, among answers, the replica that says it leads in the
// highest term: -1 when none does.
func leaderOf(sts []*grapnelpb.StatusResponse) int {
	l := -1
	for i, st := range sts {
		if st == nil || st.GetLeaderId() == "" || st.GetLeaderId() != st.GetReplicaId() {
			continue
		}
		if l < 0 || st.GetTerm() > sts[l].GetTerm() {
			l = i
		}
	}
	return l
}

// leader is the index of the replica leading now, or -1.
func (c *cluster) leader(ctx context.Context) (int, uint64) {
	sts := c.statuses(ctx)
	l := leaderOf(sts)
	if l < 0 {
		return -1, 0
	}
	return l, sts[l].GetTerm()
}

// settled says whether every replica runs and answers, all name the same
// leader, the leader lists every replica as a healthy voter, and every
// agent is attached to it; why tells what is missing.
func (c *cluster) settled(ctx context.Context) (bool, string) {
	sts := c.statuses(ctx)
	l := leaderOf(sts)
	if l < 0 {
		return false, "no leader"
	}
	lid := sts[l].GetReplicaId()
	for i, st := range sts {
		if st == nil {
			return false, c.replicaName(i) + " does not answer"
		}
		if st.GetLeaderId() != lid {
			return false, fmt.Sprintf("%s sees leader %q, not %s", st.GetReplicaId(), st.GetLeaderId(), lid)
		}
	}
	// Every replica a healthy voter; a removed one may linger in the
	// list (gossip keeps it until it is reaped) but must not vote.
	want := map[string]bool{}
	for i := range c.reps {
		want[c.replicaName(i)] = true
	}
	found := 0
	for _, m := range sts[l].GetMembers() {
		switch {
		case want[m.GetId()] && (!m.GetVoter() || !m.GetHealthy()):
			return false, fmt.Sprintf("member %s voter=%v healthy=%v", m.GetId(), m.GetVoter(), m.GetHealthy())
		case want[m.GetId()]:
			found++
		case m.GetVoter():
			return false, fmt.Sprintf("leader %s still counts %s as a voter", lid, m.GetId())
		}
	}
	if found != len(c.reps) {
		return false, fmt.Sprintf("leader %s lists %d of the %d replicas", lid, found, len(c.reps))
	}
	for _, a := range c.agentNames() {
		if !slices.Contains(sts[l].GetAttachedAgents(), a) {
			return false, fmt.Sprintf("agent %s not attached to %s (attached: %v)", a, lid, sts[l].GetAttachedAgents())
		}
	}
	return true, ""
}

// waitSettled polls settled every 50 ms until it holds or d has passed.
func (c *cluster) waitSettled(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	why := "not checked"
	for {
		var ok bool
		if ok, why = c.settled(ctx); ok {
			return nil
		}
		if err := c.checkAlive(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: cluster not settled within %v: %s", ErrNotSettled, d, why)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// checkAlive fails when a replica that should run has exited.
func (c *cluster) checkAlive() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.reps {
		if r.p != nil && !r.p.alive() {
			return fmt.Errorf("%w: %s exited: %v\n%s", ErrNotSettled, r.name, r.p.err, bench.LogTail(r.logPath, 20))
		}
	}
	return nil
}

// killReplica SIGKILLs replica i and waits until it is gone.
func (c *cluster) killReplica(i int) {
	c.mu.Lock()
	p := c.reps[i].p
	c.reps[i].p = nil
	c.mu.Unlock()
	p.kill()
}

// stopReplica ends replica i with SIGTERM.
func (c *cluster) stopReplica(i int) {
	c.mu.Lock()
	p := c.reps[i].p
	c.reps[i].p = nil
	c.mu.Unlock()
	p.stop(10 * time.Second)
}

// setExtra replaces the Raft timing flags used by the next starts.
func (c *cluster) setExtra(extra []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.extra = extra
}

// close stops agents and replicas and ends the workloads they left.
func (c *cluster) close() {
	for _, a := range c.agents {
		a.p.stop(5 * time.Second)
	}
	for i := range c.reps {
		c.stopReplica(i)
	}
	bench.RemoveWorkloads(c.benchAgents())
	for _, r := range c.reps {
		if r.conn != nil {
			r.conn.Close()
		}
	}
}
