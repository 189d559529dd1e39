package campaign

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/grapnel-io/grapnel/chaos/flashfs"
	"github.com/grapnel-io/grapnel/internal/durable"
)

// ErrNoFlash means the campaign was required to run on the flash file
// system (Config.RequireFlash) and could not mount it.
var ErrNoFlash = errors.New("campaign: the flash file system is not available")

// flash is a campaign's flash: one flashfs group in this process, with a
// mount per host that holds the host's replica data dirs and its agent's
// run folder. The netns hosts share the root mount namespace, so every
// process of a host sees its mount. The backing directories stay in the
// run directory after the run, cleanly unmounted (everything durable).
type flash struct {
	group  *flashfs.Group
	model  flashfs.Model
	mounts []*flashfs.Mount // by host
}

// flashDirs are host i's backing directory and mount point: both under
// the run directory, so a campaign never mounts over anything of the
// machine's.
func flashDirs(dir string, i int) (backing, mountpoint string) {
	return filepath.Join(dir, "flash", fmt.Sprintf("h%d", i+1)), filepath.Join(dir, "mnt", fmt.Sprintf("h%d", i+1))
}

// newFlash mounts a flashfs group with one mount per host. The mount
// points must be free: something mounted on one of them (or below it)
// other than a dead flashfs mount of an earlier run is refused.
func newFlash(dir string, hosts int, seed int64, model flashfs.Model, logf func(string, ...any)) (*flash, error) {
	f := &flash{model: model, group: flashfs.NewGroup(flashfs.Options{Model: model, Seed: uint64(seed), Logf: logf})}
	for i := range hosts {
		backing, mp := flashDirs(dir, i)
		if err := mountedOver(mp); err != nil {
			f.close()
			return nil, err
		}
		if err := os.MkdirAll(backing, 0o755); err != nil {
			f.close()
			return nil, err
		}
		m, err := f.group.Mount(fmt.Sprintf("h%d", i+1), backing, mp)
		if err != nil {
			f.close()
			return nil, err
		}
		f.mounts = append(f.mounts, m)
	}
	return f, nil
}

// mountedOver fails when something is mounted on mp or below it, unless
// it is a flashfs mount whose server died (Group.Mount detaches those).
func mountedOver(mp string) error {
	file, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source ...
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		at := unescapeMountinfo(f[4])
		if at != mp && !strings.HasPrefix(at, mp+"/") {
			continue
		}
		fstype := ""
		for j, x := range f {
			if x == "-" && j+1 < len(f) {
				fstype = f[j+1]
			}
		}
		if _, err := os.Stat(at); fstype == "fuse.flashfs" && errors.Is(err, syscall.ENOTCONN) {
			continue
		}
		return fmt.Errorf("%w: %s is mounted on %s already: not mounting over it", ErrNoFlash, fstype, at)
	}
	return sc.Err()
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of a
// mountinfo path.
func unescapeMountinfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%3o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// close unmounts every mount cleanly (everything becomes durable, as at
// a clean shutdown); a mount still busy after 10 s is detached.
func (f *flash) close() {
	if f == nil {
		return
	}
	done := make(chan error, 1)
	go func() { done <- f.group.Close() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		f.detach()
	}
}

// detach lazily detaches every mount point; for an interrupted run that
// must exit at once.
func (f *flash) detach() {
	if f == nil {
		return
	}
	for _, m := range f.mounts {
		_ = syscall.Unmount(m.Mountpoint(), syscall.MNT_DETACH)
	}
}

// mount is host i's mount, nil without flash.
func (f *flash) mount(i int) *flashfs.Mount {
	if f == nil {
		return nil
	}
	return f.mounts[i]
}

// mkdirDurable makes dir and syncs its name: a harness that made the data
// dir or the run folder without syncing it would lose it at the first
// power cut, with everything in it, which an installer does not do.
func mkdirDurable(dir string) error { return durable.MkdirAll(dir, 0o755) }

// dataDir is a replica's data dir as a fault on its flash sees it: the
// mount and the path relative to the mount's root (what the Mount's
// methods and its fault globs take). The kernel caches names on the mount
// for a second: change the data dir only through the mount point (path)
// or the Mount's methods, never behind the mount's back in its backing
// directory.
type dataDir struct {
	mount *flashfs.Mount
	rel   string
	// bolt: the replica keeps its Raft log in raft.db (--raft-log-store
	// bolt), not in wal/.
	bolt bool
}

// path is the data dir as the replica sees it, on the mount point.
func (d dataDir) path() string { return filepath.Join(d.mount.Mountpoint(), d.rel) }

// dataDirOf is replica i's data dir on its host's mount.
func (c *cluster) dataDirOf(i int) (dataDir, error) {
	m := c.flash.mount(i)
	if m == nil {
		return dataDir{}, fmt.Errorf("%w: no flash mount for %s", ErrNoFlash, c.replicaName(i))
	}
	c.mu.Lock()
	dir := c.reps[i].dataDir
	c.mu.Unlock()
	rel, err := filepath.Rel(m.Mountpoint(), dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return dataDir{}, fmt.Errorf("%s's data dir %s is not on its mount %s", c.replicaName(i), dir, m.Mountpoint())
	}
	return dataDir{mount: m, rel: rel, bolt: c.logStore == LogStoreBolt}, nil
}

// whileStopped stops replica i (SIGKILL, as a crash; a unit that is
// repaired or whose flash decays does not shut down cleanly), waits
// until it is gone, runs act on its data dir, and starts it again on the
// same data dir under the same name. It is the frame of the faults on
// the data of a stopped replica (a flipped bit in a sealed log segment or
// a snapshot, a replaced flash): each is its act.
func whileStopped(c *cluster, i int, act func(d dataDir) error) error {
	d, err := c.dataDirOf(i)
	if err != nil {
		return err
	}
	c.killReplica(i)
	actErr := act(d)
	if err := c.startReplica(i); err != nil {
		return errors.Join(actErr, err)
	}
	return actErr
}
