package campaign

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/chaos/check"
	"github.com/grapnel-io/grapnel/chaos/flashfs"
	"github.com/grapnel-io/grapnel/chaos/report"
)

// Bounds of a power cut.
const (
	// powerOffBound bounds the freeze and the kill of every process.
	powerOffBound = 10 * time.Second
	// workloadsBackBound bounds the wait for every stable workload to run
	// again after the power came back (the agents replace them).
	workloadsBackBound = 60 * time.Second
)

// A host's power domain is its network namespace: the campaign starts
// its replica and its agent there (nsenter --net), and the agent's shims
// and workloads inherit it. Every process whose /proc/PID/ns/net is the
// host's namespace is on the host's power, and nothing else is: the
// campaign, its flash mounts and its clients run in other namespaces.
//
// The agents are not in pid namespaces (a pid namespace would need
// /proc mounted again inside it, and the campaign reads the workloads'
// pids from the agents' records, which would then name other processes
// outside). Instead powerOff freezes every process of every host with
// SIGSTOP, scanning again until a scan finds nothing new (a process
// caught in fork has a child that the next scan finds), and only then
// SIGKILLs them all: no process sees another die, as in a power cut, where
// nothing runs after the instant of the cut.

// nsInode is the inode of a namespace file (/run/netns/NAME or
// /proc/PID/ns/net): two files name the same namespace when they have
// the same inode.
func nsInode(path string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// pidsIn lists the live processes whose network namespace has one of the
// inodes in nss, zombies left out (they hold no file).
func pidsIn(nss map[uint64]bool) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || pid == self {
			continue
		}
		ino, err := nsInode(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil || !nss[ino] || zombie(pid) {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// zombie says whether pid has ended (state Z or X) or is gone.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return true
	}
	return s[i+2] == 'Z' || s[i+2] == 'X'
}

// hostNamespaces are the inodes of the hosts' network namespaces; never
// the campaign's own.
func (c *cluster) hostNamespaces() (map[uint64]bool, error) {
	own, err := nsInode("/proc/self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("power off: this process's namespace: %w", err)
	}
	nss := map[uint64]bool{}
	for _, r := range c.reps {
		ino, err := nsInode(r.host.NS)
		if err != nil {
			return nil, fmt.Errorf("power off: namespace of %s: %w", r.host.Name, err)
		}
		// Never the campaign's own namespace: that would end every
		// process of the machine's.
		if ino == own {
			return nil, fmt.Errorf("power off: %s (%s) is this process's own network namespace", r.host.Name, r.host.NS)
		}
		nss[ino] = true
	}
	return nss, nil
}

// freeze stops every process of the namespaces nss with SIGSTOP, scanning
// again until a scan finds none it has not stopped, and returns them.
func freeze(nss map[uint64]bool, deadline time.Time) (map[int]bool, error) {
	frozen := map[int]bool{}
	for {
		found := 0
		for _, pid := range pidsIn(nss) {
			if !frozen[pid] {
				_ = syscall.Kill(pid, syscall.SIGSTOP)
				frozen[pid] = true
				found++
			}
		}
		if found == 0 {
			return frozen, nil
		}
		if time.Now().After(deadline) {
			return frozen, errors.New("power off: processes kept appearing in the hosts' namespaces")
		}
	}
}

func thaw(frozen map[int]bool) {
	for pid := range frozen {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
}

// Catching a write in flight: freeze up to catchTries times, letting the
// hosts run up to catchRun between two tries.
const (
	catchTries = 40
	catchRun   = 10 * time.Millisecond
)

// powerOff ends every process of every host at one instant: all frozen,
// then all killed, then waited for until none holds a file on the flash.
// Before the kill it tries to catch a write in flight: while inFlight
// (nil: never) says that no flash mount holds unsynced data, it thaws
// everything, lets it run a random moment below catchRun and freezes it
// again, catchTries times at most. A replica fsyncs each append before it
// answers, so a cut at an arbitrary instant nearly always finds nothing
// unsynced; one caught between a write and its fsync is what tests the
// torn write. It returns how many processes it ended and how many
// freezes it took.
func (c *cluster) powerOff(inFlight func() bool) (n, freezes int, err error) {
	nss, err := c.hostNamespaces()
	if err != nil {
		return 0, 0, err
	}
	deadline := time.Now().Add(powerOffBound)
	var frozen map[int]bool
	for freezes = 1; ; freezes++ {
		if frozen, err = freeze(nss, deadline); err != nil {
			break
		}
		if inFlight == nil || inFlight() || freezes == catchTries {
			break
		}
		thaw(frozen)
		time.Sleep(time.Duration(rand.Int64N(int64(catchRun))))
	}
	for pid := range frozen {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if err != nil {
		return len(frozen), freezes, err
	}
	// The campaign's own children: reap them and forget them.
	for i := range c.reps {
		c.killReplica(i)
	}
	for _, a := range c.agents {
		a.p.kill()
		a.p = nil
	}
	for {
		left := pidsIn(nss)
		if len(left) == 0 {
			return len(frozen), freezes, nil
		}
		if time.Now().After(deadline) {
			return len(frozen), freezes, fmt.Errorf("power off: processes %v still alive after SIGKILL", left)
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// unsynced says whether a mount of f holds data not yet fsynced.
func (f *flash) unsynced() bool {
	for _, m := range f.mounts {
		if st := m.Status(); st.PendingBytes > 0 || st.PendingFiles > 0 {
			return true
		}
	}
	return false
}

// powerCut is a power cut of the whole vehicle: every replica, agent,
// shim and workload of every host dies at one instant (powerOff), then
// every flash mount loses what was not durable, tearing its last unsynced
// write (flashfs Group.PowerCut), and after s.Hold the power comes back:
// every replica and agent starts again on what its flash kept. The
// clients keep running in their own namespace, so their history goes on
// across the cut, and the linearizability and lost-write checks judge
// the reads after it against the writes acknowledged before it. The
// fault ends (Repaired) when the cluster has settled and every stable
// workload runs again: the agents replace the workloads the cut ended
// (docs/agent.md, Power cycles), so their pids change, and the campaign
// takes the new ones as the stable ids from then on (idsBefore and
// idsAfter).
func powerCut(ctx context.Context, c *cluster, s Step) (injected, error) {
	if c.flash == nil {
		return injected{}, fmt.Errorf("%w: a power cut needs the flash file system", ErrNoFlash)
	}
	in := newFault(s.Kind, "every host")
	in.idsBefore = c.stableIDs(ctx)
	in.fault.At = time.Now()
	inFlight := false
	n, freezes, err := c.powerOff(func() bool { inFlight = c.flash.unsynced(); return inFlight })
	off := time.Since(in.fault.At)
	if err != nil {
		return in, err
	}
	// An fsync the kernel had sent before the freeze may still complete
	// before the cut: what was caught in flight may be synced by then.
	caught := fmt.Sprintf("unsynced data caught at freeze %d", freezes)
	if !inFlight {
		caught = fmt.Sprintf("nothing unsynced in %d freezes", freezes)
	}
	for _, m := range c.flash.mounts {
		c.logf("power cut: %s", m.Status())
	}
	rep, cutErr := c.flash.group.PowerCut(flashfs.PowerCutOptions{Tear: true, TearKeep: -1})
	in.fault.PowerCut = powerCutReport(rep)
	sleep(ctx, s.Hold)
	in.fault.Healed = time.Now() // the power is back; the units boot
	var errs []error
	if cutErr != nil {
		errs = append(errs, cutErr)
	}
	for i := range c.reps {
		if err := c.startReplica(i); err != nil {
			errs = append(errs, err)
		}
	}
	for i := range c.agents {
		if err := c.startAgent(i); err != nil {
			errs = append(errs, err)
		}
	}
	in.fault.Detail = fmt.Sprintf("%d processes frozen and killed in %v (%s), power back after %v; %s",
		n, off.Round(time.Millisecond), caught, in.fault.Healed.Sub(in.fault.At).Round(time.Millisecond), rep)
	if err := errors.Join(errs...); err != nil {
		return in, err
	}
	if err := c.waitSettled(ctx, settleBound); err != nil {
		in.markAllCut(c)
		return in, err
	}
	after, back, err := c.waitStableRunning(ctx, in.idsBefore, workloadsBackBound)
	if err != nil {
		in.markAllCut(c)
		return in, err
	}
	in.fault.Repaired = back
	in.idsAfter = after
	in.fault.Detail += fmt.Sprintf("; cluster settled and every stable workload running again %v after the power came back",
		back.Sub(in.fault.Healed).Round(time.Millisecond))
	in.markAllCut(c)
	return in, nil
}

// markAllCut records every agent as cut off from the power cut until it
// was back (Repaired, or Healed when it never was).
func (in *injected) markAllCut(c *cluster) {
	to := in.fault.Repaired
	if to.IsZero() {
		to = time.Now()
	}
	for _, a := range c.agents {
		in.cuts = append(in.cuts, check.Cut{Agent: a.name, From: in.fault.At, To: to})
	}
}

// powerCutReport is flashfs's report as the campaign's report keeps it.
func powerCutReport(rep flashfs.PowerCutReport) []report.MountLoss {
	var out []report.MountLoss
	for _, m := range rep.Mounts {
		l := report.MountLoss{Mount: m.Name, FilesDropped: m.FilesDropped, BytesDropped: m.BytesDropped,
			OpsUndone: m.OpsUndone, Problems: m.Problems}
		if t := m.Torn; t != nil {
			l.Torn = fmt.Sprintf("%s at %d: %d of %d bytes kept", t.Path, t.Off, t.Kept, t.Len)
		}
		out = append(out, l)
	}
	return out
}

// stableIDs reads the stable workloads' pids through the leader; nil
// when it cannot (the caller then checks nothing against them).
func (c *cluster) stableIDs(ctx context.Context) map[string]string {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	states, err := bench.WorkloadStatesWith(qctx, c.clientOptions())
	if err != nil {
		return nil
	}
	ids, err := bench.HostIDs(c.benchAgents(), states)
	if err != nil {
		return nil
	}
	return ids
}

// waitStableRunning waits until every stable workload runs on its agent
// in a process that is alive and is none of the processes in gone (the
// pids before a power cut, all killed: the states the cluster kept from
// before the cut say Running until the agents report again), and
// returns their pids and when that was first seen.
func (c *cluster) waitStableRunning(ctx context.Context, gone map[string]string, bound time.Duration) (map[string]string, time.Time, error) {
	deadline := time.Now().Add(bound)
	why := "not read"
	for ctx.Err() == nil && time.Now().Before(deadline) {
		ids, err := c.runningAgain(ctx, gone)
		if err == nil {
			return ids, time.Now(), nil
		}
		why = err.Error()
		sleep(ctx, pollEvery)
	}
	return nil, time.Now(), fmt.Errorf("%w: stable workloads not running again within %v: %s", ErrNotSettled, bound, why)
}

// runningAgain reads the stable workloads' states and pids once and
// says why they do not all run in new, live processes.
func (c *cluster) runningAgain(ctx context.Context, gone map[string]string) (map[string]string, error) {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	states, err := bench.WorkloadStatesWith(qctx, c.clientOptions())
	if err != nil {
		return nil, err
	}
	if res := check.Converged(c.stable, states); !res.OK {
		return nil, errors.New(res.Detail)
	}
	ids, err := bench.HostIDs(c.benchAgents(), states)
	if err != nil {
		return nil, err
	}
	for inst, id := range ids {
		var pid int
		if _, err := fmt.Sscanf(id, "pid %d", &pid); err != nil {
			return nil, fmt.Errorf("%s: %s is not a pid", inst, id)
		}
		if id == gone[inst] || zombie(pid) {
			return nil, fmt.Errorf("%s: pid %d from before the power cut or not alive", inst, pid)
		}
	}
	if len(ids) < len(c.stable) {
		return nil, fmt.Errorf("%d of %d stable workloads have a pid", len(ids), len(c.stable))
	}
	return ids, nil
}
