package campaign

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/chaos/check"
	"github.com/grapnel-io/grapnel/chaos/netns"
	"github.com/grapnel-io/grapnel/chaos/report"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// injected is one fault as it happened: the report entry and the agents
// it cut off (for DisconnectedOnlyWhenCut and the attachment measure).
type injected struct {
	fault report.Fault
	cuts  []check.Cut
	// intrusion is what the intruder fault found; nil for other faults.
	intrusion *check.IntruderFinding
	// idsBefore and idsAfter are the stable workloads' pids just before
	// a power cut and once they run again after it; nil for other
	// faults (and idsBefore when they could not be read).
	idsBefore, idsAfter map[string]string
}

// faultFunc injects one fault, holds it for s.Hold and heals it.
type faultFunc func(ctx context.Context, c *cluster, s Step) (injected, error)

// faults maps every kind to its function.
var faults = map[Kind]faultFunc{
	LeaderKill:        leaderKill,
	FollowerKill:      followerKill,
	LeaderStop:        leaderStop,
	LeaderPartition:   leaderPartition,
	MinorityPartition: minorityPartition,
	OneWayPartition:   oneWayPartition,
	AgentCutShort:     agentCut,
	AgentCutLong:      agentCut,
	ClusterRestart:    clusterRestart,
	ReplaceReplica:    replaceReplica,
	PacketLoss:        packetLoss,
	Latency:           latency,
	Intruder:          intrude,
	Upgrade:           upgradeFault,
	PowerCut:          powerCut,
	DiskFull:          storageFault,
	ReadOnly:          storageFault,
	FsyncError:        storageFault,
	CorruptLog:        dataFault,
	CorruptSnapshot:   dataFault,
	FlashReplaced:     dataFault,
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// findLeader waits up to 10 s for a leader and returns it and a follower
// chosen by pick.
func findLeader(ctx context.Context, c *cluster, pick int) (leader, follower int, err error) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if l, _ := c.leader(ctx); l >= 0 {
			var others []int
			for i := range c.reps {
				if i != l {
					others = append(others, i)
				}
			}
			return l, others[pick%len(others)], nil
		}
		sleep(ctx, 50*time.Millisecond)
	}
	return -1, -1, fmt.Errorf("%w: no leader to inject a fault into", ErrNotSettled)
}

// othersOf is every host but c.reps[i]'s.
func othersOf(c *cluster, i int) []*netns.Host {
	var out []*netns.Host
	for j, r := range c.reps {
		if j != i {
			out = append(out, r.host)
		}
	}
	return out
}

func newFault(k Kind, target string) injected {
	return injected{fault: report.Fault{Kind: string(k), Target: target, At: time.Now()}}
}

// cutAgent records the agent on replica i's host as cut off for the fault.
func (in *injected) cutAgent(c *cluster, i int) {
	in.cuts = append(in.cuts, check.Cut{Agent: c.agents[i].name, From: in.fault.At, To: in.fault.Healed})
}

func leaderKill(ctx context.Context, c *cluster, s Step) (injected, error) {
	return kill(ctx, c, s, true)
}

func followerKill(ctx context.Context, c *cluster, s Step) (injected, error) {
	return kill(ctx, c, s, false)
}

// kill SIGKILLs the leader or a follower and restarts it after the hold
// with the same data dir.
func kill(ctx context.Context, c *cluster, s Step, leader bool) (injected, error) {
	l, f, err := findLeader(ctx, c, s.Pick)
	if err != nil {
		return injected{}, err
	}
	i := f
	if leader {
		i = l
	}
	in := newFault(s.Kind, c.replicaName(i))
	c.killReplica(i)
	sleep(ctx, s.Hold)
	err = c.startReplica(i)
	in.fault.Healed = time.Now()
	in.fault.Detail = fmt.Sprintf("SIGKILL, restarted after %v", in.fault.Healed.Sub(in.fault.At).Round(time.Millisecond))
	return in, err
}

// leaderStop freezes the leader with SIGSTOP: the gray failure in which
// its connections stay open but nothing answers.
func leaderStop(ctx context.Context, c *cluster, s Step) (injected, error) {
	l, _, err := findLeader(ctx, c, s.Pick)
	if err != nil {
		return injected{}, err
	}
	p := c.replicaProc(l)
	in := newFault(s.Kind, c.replicaName(l))
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return in, err
	}
	sleep(ctx, s.Hold)
	err = p.signal(syscall.SIGCONT)
	in.fault.Healed = time.Now()
	in.fault.Detail = fmt.Sprintf("SIGSTOP, SIGCONT after %v", in.fault.Healed.Sub(in.fault.At).Round(time.Millisecond))
	return in, err
}

// partition cuts replica i's host from the other two (both ways, or only
// its outgoing packets when oneWay), holds and heals. The agent on that
// host counts as cut: it keeps only its own replica.
func partition(ctx context.Context, c *cluster, s Step, i int, oneWay bool) (injected, error) {
	in := newFault(s.Kind, c.reps[i].host.Name+" ("+c.replicaName(i)+")")
	var err error
	if oneWay {
		err = c.net.OneWay([]*netns.Host{c.reps[i].host}, othersOf(c, i))
		in.fault.Detail = "packets from it to the others dropped"
	} else {
		err = c.net.Partition([]*netns.Host{c.reps[i].host}, othersOf(c, i))
		in.fault.Detail = "cut from the others both ways"
	}
	if err != nil {
		return in, err
	}
	sleep(ctx, s.Hold)
	err = c.net.Heal()
	in.fault.Healed = time.Now()
	in.cutAgent(c, i)
	return in, err
}

func leaderPartition(ctx context.Context, c *cluster, s Step) (injected, error) {
	l, _, err := findLeader(ctx, c, s.Pick)
	if err != nil {
		return injected{}, err
	}
	return partition(ctx, c, s, l, false)
}

func minorityPartition(ctx context.Context, c *cluster, s Step) (injected, error) {
	_, f, err := findLeader(ctx, c, s.Pick)
	if err != nil {
		return injected{}, err
	}
	return partition(ctx, c, s, f, false)
}

func oneWayPartition(ctx context.Context, c *cluster, s Step) (injected, error) {
	l, _, err := findLeader(ctx, c, s.Pick)
	if err != nil {
		return injected{}, err
	}
	return partition(ctx, c, s, l, true)
}

// agentCut isolates a follower's host — its agent and its replica — for
// s.Hold, shorter or longer than the grace depending on the kind.
func agentCut(ctx context.Context, c *cluster, s Step) (injected, error) {
	_, f, err := findLeader(ctx, c, s.Pick)
	if err != nil {
		return injected{}, err
	}
	h := c.reps[f].host
	in := newFault(s.Kind, c.agents[f].name+" on "+h.Name)
	if err := c.net.Isolate(h); err != nil {
		return in, err
	}
	sleep(ctx, s.Hold)
	err = c.net.Heal()
	in.fault.Healed = time.Now()
	in.fault.Detail = fmt.Sprintf("host isolated %v (grace %v)", in.fault.Healed.Sub(in.fault.At).Round(time.Millisecond), c.grace)
	in.cutAgent(c, f)
	return in, err
}

// clusterRestart stops every replica with SIGTERM at once and starts them
// again after the hold; agents keep running.
func clusterRestart(ctx context.Context, c *cluster, s Step) (injected, error) {
	in := newFault(s.Kind, "all replicas")
	done := make(chan struct{}, len(c.reps))
	for i := range c.reps {
		go func() { c.stopReplica(i); done <- struct{}{} }()
	}
	for range c.reps {
		<-done
	}
	stopped := time.Since(in.fault.At)
	sleep(ctx, s.Hold)
	var errs []error
	for i := range c.reps {
		if err := c.startReplica(i); err != nil {
			errs = append(errs, err)
		}
	}
	in.fault.Healed = time.Now()
	in.fault.Detail = fmt.Sprintf("SIGTERM all (stopped in %v), started after %v", stopped.Round(time.Millisecond), in.fault.Healed.Sub(in.fault.At).Round(time.Millisecond))
	if len(errs) > 0 {
		return in, errs[0]
	}
	return in, nil
}

// replaceReplica kills a follower, removes it from the Raft configuration
// while leadership changes in the middle of the removal, and starts a
// fresh replica under the same id (empty data dir, and with security on
// a new certificate: the removal revoked the old one) on the same host
// that joins through gossip. On even picks the leader hands leadership to the
// other follower right after the removal is proposed; on odd ones it is
// SIGKILLed then and started again at once. The removal is asked again on
// whichever replica leads until it answers (it is idempotent), as
// `grapnel cluster remove` does after "outcome unknown".
func replaceReplica(ctx context.Context, c *cluster, s Step) (injected, error) {
	l, f, err := findLeader(ctx, c, s.Pick)
	if err != nil {
		return injected{}, err
	}
	old := c.replicaName(f)
	other := l
	for i := range c.reps {
		if i != l && i != f {
			other = i
			break
		}
	}
	in := newFault(s.Kind, old)
	c.killReplica(f)
	first := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := grapnelpb.NewClusterClient(c.reps[l].conn).RemoveReplica(rctx, &grapnelpb.RemoveReplicaRequest{Id: old})
		first <- err
	}()
	// In the middle: the removal is on its way to the leader, or proposed.
	sleep(ctx, time.Duration(s.Pick%4)*time.Millisecond)
	change := "leadership handed to " + c.replicaName(other)
	if s.Pick%2 == 0 {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, terr := grapnelpb.NewClusterClient(c.reps[l].conn).TransferLeadership(tctx, &grapnelpb.TransferLeadershipRequest{To: c.replicaName(other)})
		cancel()
		if terr != nil {
			change += " (" + status.Convert(terr).Message() + ")"
		}
	} else {
		change = "leader " + c.replicaName(l) + " SIGKILLed and restarted"
		c.killReplica(l)
		if err := c.startReplica(l); err != nil {
			return in, err
		}
	}
	firstErr := <-first
	tries, already, err := removeUntilAnswered(ctx, c, old, 30*time.Second)
	if err != nil {
		in.fault.Healed = time.Now()
		in.fault.Detail = fmt.Sprintf("%s; first removal: %v; not removed after %d tries", change, errText(firstErr), tries)
		return in, fmt.Errorf("remove %s: %w", old, err)
	}
	// Only a removal at the revocation's cluster version revokes the
	// removed replica's certificates: the intruder owes its key's
	// refusal to that alone.
	version, verr := c.clusterVersion(ctx)
	removedAt := fmt.Sprintf("removed at cluster version %d", version)
	if verr != nil {
		version = state.ClusterVersionRevocation
		removedAt = fmt.Sprintf("cluster version at the removal unknown (%v): its key is expected refused", verr)
	}
	sleep(ctx, s.Hold)
	c.mu.Lock()
	r := c.reps[f]
	r.gen++
	r.dataDir = filepath.Join(c.storeRoot(f), fmt.Sprintf("%s-g%d", r.name, r.gen))
	r.logPath = filepath.Join(c.dir, fmt.Sprintf("%s-g%d.log", r.name, r.gen))
	c.mu.Unlock()
	if err := os.RemoveAll(r.dataDir); err != nil {
		return in, err
	}
	if c.pki != nil {
		// The removal revoked the old certificate: the fresh unit gets
		// its own, as a replacement unit would.
		oldFiles, err := c.pki.Replica(r.name)
		if err != nil {
			return in, err
		}
		if _, err := c.pki.Reissue(r.name, r.gen); err != nil {
			return in, err
		}
		c.mu.Lock()
		c.removedAt[oldFiles.Cert] = version
		c.mu.Unlock()
	}
	err = c.startReplica(f)
	in.fault.Healed = time.Now()
	in.fault.Detail = fmt.Sprintf("%s; first removal: %s; asked again until answered (%d rounds, already removed: %v); %s; fresh %s joined on an empty data dir",
		change, errText(firstErr), tries, already, removedAt, old)
	return in, err
}

// removeUntilAnswered asks whichever replica leads to remove id until one
// answers, for up to bound: removal is idempotent, so a retry after a
// lost leadership or a lost answer is safe. It returns the number of calls
// and whether the last found the replica already removed.
func removeUntilAnswered(ctx context.Context, c *cluster, id string, bound time.Duration) (int, bool, error) {
	deadline := time.Now().Add(bound)
	var last error
	for tries := 1; ctx.Err() == nil && time.Now().Before(deadline); tries++ {
		if l, _ := c.leader(ctx); l >= 0 {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := grapnelpb.NewClusterClient(c.reps[l].conn).RemoveReplica(rctx, &grapnelpb.RemoveReplicaRequest{Id: id})
			cancel()
			if err == nil {
				return tries, resp.GetAlreadyRemoved(), nil
			}
			last = err
			if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded && code != codes.FailedPrecondition {
				return tries, false, err
			}
		}
		sleep(ctx, 200*time.Millisecond)
	}
	if last == nil {
		last = fmt.Errorf("%w: no leader to remove %s", ErrNotSettled, id)
	}
	return 0, false, last
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return status.Convert(err).Message()
}

// packetLoss drops s.Percent of the packets between the leader's host and
// a follower's, both ways.
func packetLoss(ctx context.Context, c *cluster, s Step) (injected, error) {
	l, f, err := findLeader(ctx, c, s.Pick)
	if err != nil {
		return injected{}, err
	}
	in := newFault(s.Kind, c.reps[l].host.Name+" <-> "+c.reps[f].host.Name)
	if err := c.net.Loss(c.reps[l].host, c.reps[f].host, s.Percent); err != nil {
		return in, err
	}
	sleep(ctx, s.Hold)
	err = c.net.Heal()
	in.fault.Healed = time.Now()
	in.fault.Detail = fmt.Sprintf("%d%% loss for %v", s.Percent, in.fault.Healed.Sub(in.fault.At).Round(time.Millisecond))
	// The follower host's agent reaches the leader over the lossy link
	// only; with 20–30 % loss its stream may stall past the heartbeat.
	in.cutAgent(c, f)
	in.cuts[len(in.cuts)-1].Partial = true
	return in, err
}

// latency delays the leader's Raft connections to a follower by s.Delay
// each way. The proxy only sees new connections, so the follower is
// restarted (SIGKILL, at once) to make the leader dial it again.
func latency(ctx context.Context, c *cluster, s Step) (injected, error) {
	l, f, err := findLeader(ctx, c, s.Pick)
	if err != nil {
		return injected{}, err
	}
	in := newFault(s.Kind, c.replicaName(l)+" -> "+c.replicaName(f)+" raft")
	undo, err := c.net.Delay(c.reps[l].host, c.reps[f].host, RaftPort, s.Delay)
	if err != nil {
		return in, err
	}
	c.killReplica(f)
	if err := c.startReplica(f); err != nil {
		_ = undo()
		return in, err
	}
	sleep(ctx, s.Hold)
	err = undo()
	in.fault.Healed = time.Now()
	in.fault.Detail = fmt.Sprintf("+%v per chunk on the Raft link, follower restarted to use it", s.Delay)
	return in, err
}
