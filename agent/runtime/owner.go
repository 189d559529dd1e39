package runtime

import (
	"os"
	"syscall"

	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/grapnel-io/grapnel/state"
)

// Owner is the user a workload's processes, files and control
// interface FIFOs belong to, so that no other workload can open them.
type Owner struct {
	UID, GID uint32
}

// Owners is implemented by a runtime that runs each workload under a
// user of its own (the process runtime). The agent asks it before it
// writes the instance's files and FIFOs, and gives them to that user;
// for a runtime without it they belong to the agent's user, in
// directories no other user can enter.
type Owners interface {
	// Owner is the user the instance runs as; nil when it runs as the
	// agent's user. The error wraps ErrBadConfig and names the field
	// (runtimeConfig.user) when the workload asks for a user it may not
	// have.
	Owner(inst state.InstanceName, w *state.Workload) (*Owner, error)
}

// Modes of what the agent keeps for an instance. The directories stay
// the agent's (root's), so that a workload can neither rename nor
// replace an entry the agent later opens; the workload's group may enter
// them, and the files in them are the workload's own.
const (
	// TraverseMode is the run folder's and <agent>_io's mode when
	// workloads run under their own uids: they pass through to their
	// own directories, and can list nothing.
	TraverseMode os.FileMode = 0o711
	// PrivateDirMode is a directory of the agent alone.
	PrivateDirMode os.FileMode = 0o700
	// runDirMode is an instance's run directory with an owner: the
	// workload's group passes through, nobody else.
	runDirMode os.FileMode = 0o710
	// groupDirMode is a directory of the agent that the workload's
	// group may list and enter (its files, its FIFOs).
	groupDirMode os.FileMode = 0o750
)

// PrepareRunDir makes an instance's run directory: the agent's, 0710
// with the workload's group when it has an owner, else 0700. It is made
// durable (its name synced into its parent when it is made, and so on
// up to the run folder, which the agent made durable at its start), so
// that the records and the workload's own files synced under it survive
// a power cut with it. One that exists is taken as made so
// (durable.MkdirMissing): every start of an instance prepares it again.
func PrepareRunDir(dir string, o *Owner) error {
	return agentDir(durable.MkdirMissing, dir, o, runDirMode)
}

// PrepareGroupDir makes a directory of the agent that the workload's
// group may list and enter (0750), or 0700 without an owner. What it
// holds (the workload's files, its control interface's FIFOs) is made
// again at every start, so its name is not synced.
func PrepareGroupDir(dir string, o *Owner) error {
	return agentDir(os.MkdirAll, dir, o, groupDirMode)
}

func agentDir(mkdirAll func(string, os.FileMode) error, dir string, o *Owner, mode os.FileMode) error {
	if err := mkdirAll(dir, PrivateDirMode); err != nil {
		return err
	}
	if o == nil {
		return own(dir, -1, -1, PrivateDirMode)
	}
	return own(dir, os.Geteuid(), int(o.GID), mode)
}

// GiveFile hands a file the agent made to the workload with mode; a nil
// owner leaves it the agent's.
func GiveFile(path string, o *Owner, mode os.FileMode) error {
	if o == nil {
		return own(path, -1, -1, mode)
	}
	return own(path, int(o.UID), int(o.GID), mode)
}

// own gives path the owner (uid and gid; -1 keeps one) and the mode,
// changing only what differs: an instance adopted after an agent
// restart, whose directories and FIFOs are as they were made, then
// costs no write, not even of metadata, and a read-only run folder
// still serves it (agent/storage). A link is changed as before, without
// a look: Lchown changes the link, Chmod what it points to.
func own(path string, uid, gid int, mode os.FileMode) error {
	fi, err := os.Lstat(path)
	st, ok := statOf(fi)
	if err != nil || !ok || fi.Mode()&os.ModeSymlink != 0 {
		if uid >= 0 || gid >= 0 {
			if err := os.Lchown(path, uid, gid); err != nil {
				return err
			}
		}
		return os.Chmod(path, mode)
	}
	if (uid >= 0 && int(st.Uid) != uid) || (gid >= 0 && int(st.Gid) != gid) {
		if err := os.Lchown(path, uid, gid); err != nil {
			return err
		}
		// chown may clear the set-id bits: look again.
		if fi, err = os.Lstat(path); err != nil {
			return err
		}
	}
	if fi.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky) == mode {
		return nil
	}
	return os.Chmod(path, mode)
}

// statOf is fi's stat_t; false when fi is nil or has none.
func statOf(fi os.FileInfo) (*syscall.Stat_t, bool) {
	if fi == nil {
		return nil, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return st, ok
}
