package campaign

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// The upgrade fault (docs/upgrade.md, docs/chaos.md): a campaign whose
// plan has an upgrade starts one replica on the previous release, so the
// cluster bootstraps at cluster version 0 and runs mixed, as while an
// over-the-air update takes days. Each upgrade stops one replica
// gracefully and starts the other release's binary on its data dir;
// after the plan's last one, with every replica on this build, the
// campaign finalizes and the cluster runs at cluster version 1.

// Bounds of the upgrade's waits.
const (
	// upgradeStopGrace is how long a replica may take to exit on SIGTERM
	// before it is killed (and the fault reported): it needs well under
	// a second; systemd would wait 90 s.
	upgradeStopGrace = 15 * time.Second
	// finalizeBound bounds the finalize, retried while the leader has
	// not yet heard from gossip that the last replica moved
	// (RELEASE_BEHIND) or leadership moves.
	finalizeBound = 30 * time.Second
	// versionBound bounds reading the cluster version.
	versionBound = 10 * time.Second
)

// upgradeFault swaps the build of the replica the step picks: the
// previous release for this build or the other way round. On odd picks
// (upgradeLeads) leadership is handed to it first, so that about half
// the upgrades stop the leader.
func upgradeFault(ctx context.Context, c *cluster, s Step) (injected, error) {
	if c.prev == nil {
		return injected{}, fmt.Errorf("%w: an upgrade needs the previous release", ErrConfig)
	}
	l, _, err := findLeader(ctx, c, s.Pick)
	if err != nil {
		return injected{}, err
	}
	t := upgradeTarget(s, len(c.reps))
	var handover string
	if t != l && upgradeLeads(s, len(c.reps)) {
		if err := c.handLeadership(ctx, l, t); err != nil {
			handover = fmt.Sprintf("leadership not handed to it (%v); ", err)
		} else {
			handover = fmt.Sprintf("leadership handed to it from %s first; ", c.replicaName(l))
			l = t
		}
	}
	in, err := swapRelease(ctx, c, s.Kind, t, t == l, s.Hold)
	in.fault.Detail = handover + in.fault.Detail
	return in, err
}

// swapRelease stops replica i gracefully (SIGTERM, and waits for it to
// exit), waits hold, starts the other build on the same data dir with the
// same name and flags (less those the previous release lacks), and waits
// until the cluster is healthy again.
func swapRelease(ctx context.Context, c *cluster, k Kind, i int, leader bool, hold time.Duration) (injected, error) {
	c.mu.Lock()
	toPrevious, finalized := !c.reps[i].previous, c.finalized
	c.mu.Unlock()
	role := "follower"
	if leader {
		role = "leader"
	}
	if toPrevious && finalized {
		// Never reached by a plan: the campaign finalizes after the
		// last upgrade.
		return injected{}, fmt.Errorf("%s: the cluster version was raised: the previous release refuses its data (docs/upgrade.md)", c.replicaName(i))
	}
	from := c.release(i)
	in := newFault(k, c.replicaName(i)+" ("+role+")")
	took, killed := c.stopGracefully(i, upgradeStopGrace)
	sleep(ctx, hold)
	c.mu.Lock()
	c.reps[i].previous = toPrevious
	c.mu.Unlock()
	err := c.startReplica(i)
	in.fault.Healed = time.Now()
	in.fault.Detail = fmt.Sprintf("%s to %s: SIGTERM, exited in %v; started on the same data dir %v after the SIGTERM",
		from, c.release(i), took.Round(time.Millisecond), in.fault.Healed.Sub(in.fault.At).Round(time.Millisecond))
	if killed {
		in.fault.Detail += fmt.Sprintf(" (it had not exited within %v: SIGKILLed)", upgradeStopGrace)
		err = errors.Join(err, fmt.Errorf("%s did not exit within %v of SIGTERM", c.replicaName(i), upgradeStopGrace))
	}
	if err != nil {
		return in, err
	}
	if err := c.waitSettled(ctx, settleBound); err != nil {
		return in, err
	}
	in.fault.Detail += fmt.Sprintf("; cluster healthy %v after the start", time.Since(in.fault.Healed).Round(time.Millisecond))
	c.mu.Lock()
	dropped := c.dropped
	c.mu.Unlock()
	if toPrevious && len(dropped) > 0 {
		in.fault.Detail += "; without " + strings.Join(dropped, " ") + " (the previous release has no such flags)"
	}
	if v, err := c.clusterVersion(ctx); err == nil {
		in.fault.Detail += fmt.Sprintf("; cluster version %d", v)
	}
	return in, nil
}

// handLeadership asks leader l to hand leadership to replica t and waits
// up to 10 s for t to lead.
func (c *cluster) handLeadership(ctx context.Context, l, t int) error {
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := grapnelpb.NewClusterClient(c.reps[l].conn).TransferLeadership(tctx, &grapnelpb.TransferLeadershipRequest{To: c.replicaName(t)})
	cancel()
	if err != nil {
		return errors.New(status.Convert(err).Message())
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if now, _ := c.leader(ctx); now == t {
			return nil
		}
		sleep(ctx, 50*time.Millisecond)
	}
	return fmt.Errorf("%s did not lead within 10 s", c.replicaName(t))
}

// clusterVersion asks a replica of this build (the leader first) for the
// replicated cluster version (Cluster/UpgradeStatus; any replica
// answers). With every replica on the previous release, which knows no
// cluster version, it is 0: that release refuses a store above it.
func (c *cluster) clusterVersion(ctx context.Context) (uint32, error) {
	deadline := time.Now().Add(versionBound)
	var last error
	for ctx.Err() == nil && time.Now().Before(deadline) {
		order := make([]int, 0, len(c.reps))
		if l, _ := c.leader(ctx); l >= 0 {
			order = append(order, l)
		}
		for i := range c.reps {
			if len(order) == 0 || order[0] != i {
				order = append(order, i)
			}
		}
		current := 0
		for _, i := range order {
			if c.isPrevious(i) {
				continue
			}
			current++
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			resp, err := grapnelpb.NewClusterClient(c.reps[i].conn).UpgradeStatus(qctx, &grapnelpb.UpgradeStatusRequest{})
			cancel()
			if err == nil {
				return resp.GetClusterVersion(), nil
			}
			last = err
		}
		if current == 0 {
			return state.ClusterVersionBaseline, nil
		}
		sleep(ctx, 200*time.Millisecond)
	}
	if last == nil {
		last = ctx.Err()
	}
	return 0, fmt.Errorf("the cluster version: no replica of this build answered within %v: %v", versionBound, last)
}

func (c *cluster) isPrevious(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reps[i].previous
}

// stopGracefully sends replica i SIGTERM and waits for it to exit; killed
// says it had to be SIGKILLed after grace.
func (c *cluster) stopGracefully(i int, grace time.Duration) (took time.Duration, killed bool) {
	c.mu.Lock()
	p := c.reps[i].p
	c.reps[i].p = nil
	c.mu.Unlock()
	start := time.Now()
	p.stop(grace)
	took = time.Since(start)
	return took, p != nil && took >= grace
}

// finalize asks the leader to finalize the upgrade (Cluster/UpgradeFinalize,
// as `grapnel cluster upgrade finalize`), again while it answers that a
// voter is behind (gossip has not yet told it that the last replica moved)
// or leadership moves, and waits until every replica reports the raised
// cluster version. Every replica must run this build.
func finalize(ctx context.Context, c *cluster) (injected, error) {
	in := newFault(UpgradeFinalize, "the leader")
	if prev := c.onPrevious(); len(prev) > 0 {
		return injected{}, fmt.Errorf("%s still runs the previous release", c.replicaName(prev[0]))
	}
	deadline := time.Now().Add(finalizeBound)
	var (
		resp  *grapnelpb.UpgradeFinalizeResponse
		last  error
		first string
		tries int
		by    string
	)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		l, _ := c.leader(ctx)
		if l < 0 {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		tries++
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := grapnelpb.NewClusterClient(c.reps[l].conn).UpgradeFinalize(qctx, &grapnelpb.UpgradeFinalizeRequest{})
		cancel()
		if err == nil {
			resp, by = r, c.replicaName(l)
			break
		}
		last = err
		if first == "" {
			first = status.Convert(err).Message()
		}
		if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded && !errors.Is(rpc.FromStatus(err), errs.ErrReleaseBehind) {
			break
		}
		sleep(ctx, 200*time.Millisecond)
	}
	if resp == nil {
		in.fault.Healed = time.Now()
		in.fault.Detail = fmt.Sprintf("not finalized after %d tries: %v", tries, errText(last))
		return in, fmt.Errorf("finalize: %s", errText(last))
	}
	in.fault.Target = by + " (leader)"
	c.mu.Lock()
	c.finalized = true
	c.mu.Unlock()
	answered := time.Since(in.fault.At)
	err := c.waitVersion(ctx, resp.GetTo(), versionBound)
	in.fault.Healed = time.Now()
	in.fault.Detail = fmt.Sprintf("UpgradeFinalize: cluster version %d to %d, answered in %v after %d tries", resp.GetFrom(), resp.GetTo(),
		answered.Round(time.Millisecond), tries)
	if first != "" {
		in.fault.Detail += " (first answer: " + first + ")"
	}
	if err != nil {
		return in, err
	}
	in.fault.Detail += fmt.Sprintf("; every replica at %d after %v", resp.GetTo(), in.fault.Healed.Sub(in.fault.At).Round(time.Millisecond))
	return in, nil
}

// waitVersion waits until every replica reports cluster version v.
func (c *cluster) waitVersion(ctx context.Context, v uint32, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	behind := "none asked"
	for ctx.Err() == nil && time.Now().Before(deadline) {
		var lag []string
		for i := range c.reps {
			qctx, cancel := context.WithTimeout(ctx, time.Second)
			resp, err := grapnelpb.NewClusterClient(c.reps[i].conn).UpgradeStatus(qctx, &grapnelpb.UpgradeStatusRequest{})
			cancel()
			switch {
			case err != nil:
				lag = append(lag, c.replicaName(i)+": "+errText(err))
			case resp.GetClusterVersion() < v:
				lag = append(lag, fmt.Sprintf("%s at %d", c.replicaName(i), resp.GetClusterVersion()))
			}
		}
		if len(lag) == 0 {
			return nil
		}
		behind = strings.Join(lag, ", ")
		sleep(ctx, 100*time.Millisecond)
	}
	return fmt.Errorf("not every replica at cluster version %d within %v: %s", v, bound, behind)
}
