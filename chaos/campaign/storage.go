package campaign

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/chaos/flashfs"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// Bounds of a storage fault.
const (
	// detectBound is how long after the injection a storage fault may
	// take to show as a StorageFailed problem; the fault is held until
	// then at most.
	detectBound = 20 * time.Second
	// repairBound is how long after the heal the replica may take to be
	// a healthy voter again: its probe backs off from 1 s to 30 s
	// (cluster Timing.StorageProbeMax), then it restarts in place and
	// catches up.
	repairBound = 60 * time.Second
	// pollEvery paces the problems and status polls of a storage fault.
	pollEvery = 100 * time.Millisecond
)

// storageFailedKind is the problem kind a replica whose storage failed
// raises (server/problems StorageFailed, docs/problems.md).
const storageFailedKind = "StorageFailed"

// injectStorage puts s.Kind's fault on d's mount and returns what heals
// it: ENOSPC (disk-full), EROFS (read-only), or EIO on the fsyncs of the
// WAL's segments and of its metadata database (fsync-error).
func injectStorage(k Kind, d dataDir) (what string, heal func(), err error) {
	m := d.mount
	switch k {
	case DiskFull:
		m.SetFull(true)
		return "ENOSPC on every write of " + m.Name(), m.Heal, nil
	case ReadOnly:
		m.SetReadOnly(true)
		return "EROFS on every change of " + m.Name(), m.Heal, nil
	case FsyncError:
		globs := []string{path.Join(d.rel, "wal", "*.wal"), path.Join(d.rel, "wal", "wal-meta.db")}
		if d.bolt {
			globs = []string{path.Join(d.rel, "raft.db")}
		}
		for _, g := range globs {
			if err := m.AddEIO(flashfs.EIORule{Glob: g, Fsync: true}); err != nil {
				m.Heal()
				return "", nil, err
			}
		}
		return "EIO on fsync of " + m.Name() + ":" + strings.Join(globs, ", "), m.Heal, nil
	}
	return "", nil, fmt.Errorf("%w: %s is not a storage fault", ErrConfig, k)
}

// storageFault fails the storage of one replica while it runs: the leader
// on even picks, a follower on odd ones. The writers keep writing, so the
// replica's next Raft write fails; it must report StorageFailed (the
// fault is held for s.Hold, and on until the problem shows, detectBound
// at most), then the fault is healed and the replica must come back as a
// healthy voter by itself: no process of the campaign's is restarted
// (grapnel-server probes its data dir and executes itself again in
// place). The fault's Detected and Repaired times are the figures; the
// replica's log tells how often it restarted in place.
func storageFault(ctx context.Context, c *cluster, s Step) (injected, error) {
	l, f, err := findLeader(ctx, c, s.Pick/2)
	if err != nil {
		return injected{}, err
	}
	i, role := f, "follower"
	if s.Pick%2 == 0 {
		i, role = l, "leader"
	}
	d, err := c.dataDirOf(i)
	if err != nil {
		return injected{}, err
	}
	name := c.replicaName(i)
	logPath := c.replicaLog(i)
	execsBefore := restartsInPlace(logPath)
	in := newFault(s.Kind, name+" ("+role+")")
	what, heal, err := injectStorage(s.Kind, d)
	if err != nil {
		return in, err
	}
	hold := time.After(s.Hold)
	detected, seen := waitProblem(ctx, c, name, in.fault.At, in.fault.At.Add(detectBound), hold)
	heal()
	in.fault.Healed = time.Now()
	in.fault.Detected = detected
	in.fault.Detail = fmt.Sprintf("%s, healed after %v; ", what, in.fault.Healed.Sub(in.fault.At).Round(time.Millisecond))
	if detected.IsZero() {
		in.fault.Detail += fmt.Sprintf("no StorageFailed problem for %s within %v; ", name, detectBound)
	} else {
		in.fault.Detail += fmt.Sprintf("StorageFailed after %v (%q); ", detected.Sub(in.fault.At).Round(time.Millisecond), seen)
	}
	repaired, why := waitRepaired(ctx, c, i, in.fault.Healed.Add(repairBound))
	in.fault.Repaired = repaired
	if repaired.IsZero() {
		in.fault.Detail += fmt.Sprintf("not a healthy voter within %v of the heal: %s; ", repairBound, why)
	} else {
		in.fault.Detail += fmt.Sprintf("a healthy voter again %v after the heal; ", repaired.Sub(in.fault.Healed).Round(time.Millisecond))
	}
	in.fault.Detail += fmt.Sprintf("restarted itself in place %d times", restartsInPlace(logPath)-execsBefore)
	if c.replicaProc(i) == nil {
		return in, fmt.Errorf("%s exited during its storage fault", name)
	}
	return in, nil
}

// replicaLog is replica i's log file.
func (c *cluster) replicaLog(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reps[i].logPath
}

// restartsInPlace counts the times grapnel-server executed itself again
// (cmd/internal/servercmd restartInPlace) in the log at logPath.
func restartsInPlace(logPath string) int {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "grapnel-server: executing /proc/self/exe")
}

// openStorageFailed returns the open StorageFailed problem naming replica,
// opened at or after since, as the leader answers it; "" when there is
// none or no leader answers.
func openStorageFailed(ctx context.Context, c *cluster, replica string, since time.Time) (string, error) {
	l, _ := c.leader(ctx)
	if l < 0 {
		return "", errors.New("no leader")
	}
	qctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	resp, err := grapnelpb.NewProblemsClient(c.reps[l].conn).List(qctx, &grapnelpb.ProblemsListRequest{})
	if err != nil {
		return "", err
	}
	for _, p := range resp.GetProblems() {
		if p.GetKind() != storageFailedKind || p.GetSinceMs() < since.Add(-time.Second).UnixMilli() {
			continue
		}
		for _, o := range p.GetObjects() {
			if o.GetName() == replica {
				return p.GetSummary(), nil
			}
		}
	}
	return "", nil
}

// waitProblem polls the leader's problems until a StorageFailed problem
// names replica, or until; it returns when it saw it (zero if never) and
// its summary, but not before hold fires: the fault lasts the hold
// whenever it is seen.
func waitProblem(ctx context.Context, c *cluster, replica string, since, until time.Time, hold <-chan time.Time) (time.Time, string) {
	var at time.Time
	var summary string
	held := false
	for ctx.Err() == nil {
		if at.IsZero() {
			if s, err := openStorageFailed(ctx, c, replica, since); err == nil && s != "" {
				at, summary = time.Now(), s
			}
		}
		if held && (!at.IsZero() || time.Now().After(until)) {
			return at, summary
		}
		select {
		case <-hold:
			held = true
		case <-time.After(pollEvery):
		case <-ctx.Done():
		}
	}
	return at, summary
}

// waitRepaired polls until replica i is back: its process runs (the
// one the campaign started, executed again in place), the leader lists
// it as a healthy voter and no StorageFailed problem names it. It returns
// when that was first seen, or zero and why not by until.
func waitRepaired(ctx context.Context, c *cluster, i int, until time.Time) (time.Time, string) {
	name := c.replicaName(i)
	why := "not checked"
	for ctx.Err() == nil && time.Now().Before(until) {
		if c.replicaProc(i) == nil {
			return time.Time{}, name + " exited: " + c.replicaExit(i)
		}
		why = healthyVoter(ctx, c, name)
		if why == "" {
			if s, err := openStorageFailed(ctx, c, name, time.Time{}); err != nil {
				why = "problems: " + err.Error()
			} else if s != "" {
				why = "the StorageFailed problem is still open: " + s
			} else {
				return time.Now(), ""
			}
		}
		sleep(ctx, pollEvery)
	}
	return time.Time{}, why
}

// healthyVoter says why the leader does not list name as a healthy
// voter, "" when it does.
func healthyVoter(ctx context.Context, c *cluster, name string) string {
	sts := c.statuses(ctx)
	l := leaderOf(sts)
	if l < 0 {
		return "no leader"
	}
	for _, m := range sts[l].GetMembers() {
		if m.GetId() == name {
			if m.GetVoter() && m.GetHealthy() {
				return ""
			}
			return fmt.Sprintf("leader %s lists %s voter=%v healthy=%v", sts[l].GetReplicaId(), name, m.GetVoter(), m.GetHealthy())
		}
	}
	return fmt.Sprintf("leader %s does not list %s", sts[l].GetReplicaId(), name)
}

// replicaExit is how replica i's last process ended, with its log's tail.
func (c *cluster) replicaExit(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reps[i]
	if r.p == nil {
		return "not started"
	}
	return fmt.Sprintf("%v", r.p.err)
}
