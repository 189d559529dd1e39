package flashfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// inoKey names a backing inode (a file's data, a directory's entries).
type inoKey struct{ dev, ino uint64 }

func keyOf(dev, ino uint64) inoKey { return inoKey{dev: dev, ino: ino} }

type opKind int

const (
	opCreate   opKind = iota // a file, directory, node, symlink or hard link named a
	opRemove                 // a unlinked or rmdir'ed; the entry waits in trash
	opRename                 // a renamed to b; what b named before waits in trash
	opExchange               // a and b swapped (RENAME_EXCHANGE)
)

// nsOp is a namespace operation already applied to the backing
// directory, with what undoes it. Paths are relative to the backing root.
type nsOp struct {
	kind  opKind
	dir   bool // opCreate: a directory (its undo removes the tree)
	a, b  string
	trash string // absolute; "" when nothing was set aside
	// needs are the directories whose fsync the operation waits for.
	needs   []inoKey
	durable bool
}

func (op *nsOp) String() string {
	switch op.kind {
	case opCreate:
		return "create " + op.a
	case opRemove:
		return "remove " + op.a
	case opRename:
		return "rename " + op.a + " -> " + op.b
	default:
		return "exchange " + op.a + " <-> " + op.b
	}
}

func (op *nsOp) touches(o *nsOp) bool {
	mine := []string{op.a, op.b}
	return slices.Contains(mine, o.a) || (o.b != "" && slices.Contains(mine, o.b))
}

// nslog is the volatile layer of the namespace: the operations applied to
// the backing directory and not yet durable, oldest first. A durable
// operation stays while an older one is pending, because undoing the
// older one must see through the renames that came after it.
type nslog struct {
	root  string // the backing directory
	trash string // where removed entries wait: root/trashName
	ops   []*nsOp
	next  uint64 // the next trash name
	logf  func(string, ...any)
}

// trashName is the backing root's hidden directory of set-aside entries.
const trashName = ".flashfs-trash"

func (l *nslog) abs(rel string) string { return filepath.Join(l.root, rel) }

// setAside moves the entry at rel into the trash and returns where.
func (l *nslog) setAside(rel string) (string, error) {
	l.next++
	t := filepath.Join(l.trash, strconv.FormatUint(l.next, 10))
	if err := unix.Renameat2(unix.AT_FDCWD, l.abs(rel), unix.AT_FDCWD, t, unix.RENAME_NOREPLACE); err != nil {
		return "", err
	}
	return t, nil
}

func (l *nslog) add(op *nsOp) {
	l.ops = append(l.ops, op)
}

// synced applies an fsync of the directory key: every operation waiting
// only for it becomes durable.
func (l *nslog) synced(key inoKey) {
	for i, op := range l.ops {
		if op.durable {
			continue
		}
		op.needs = slices.DeleteFunc(op.needs, func(k inoKey) bool { return k == key })
		if len(op.needs) == 0 {
			l.makeDurable(i)
		}
	}
	l.trim()
}

// syncedAll makes every operation durable (a journal commit, a clean
// unmount).
func (l *nslog) syncedAll() {
	for i := range l.ops {
		if !l.ops[i].durable {
			l.makeDurable(i)
		}
	}
	l.trim()
}

// makeDurable marks ops[i] durable and drops what it set aside. An older
// pending operation on one of the same names is carried along: once a
// name's later state is durable, undoing an earlier change of that name
// would move the wrong entry.
func (l *nslog) makeDurable(i int) {
	op := l.ops[i]
	op.durable = true
	if op.trash != "" {
		if err := os.RemoveAll(op.trash); err != nil {
			l.logf("flashfs: dropping %s: %v", op.trash, err)
		}
		op.trash = ""
	}
	for j := i - 1; j >= 0; j-- {
		if !l.ops[j].durable && l.ops[j].touches(op) {
			l.makeDurable(j)
		}
	}
}

func (l *nslog) trim() {
	n := 0
	for n < len(l.ops) && l.ops[n].durable {
		n++
	}
	l.ops = l.ops[n:]
}

func (l *nslog) pending() int {
	n := 0
	for _, op := range l.ops {
		if !op.durable {
			n++
		}
	}
	return n
}

// pendingFor reports whether an operation waits for the directory key.
func (l *nslog) pendingFor(key inoKey) bool {
	for _, op := range l.ops {
		if !op.durable && slices.Contains(op.needs, key) {
			return true
		}
	}
	return false
}

// undo reverts every pending operation, newest first: the power cut.
// The paths an operation recorded are those of its time; the durable
// renames and removals that came after it moved or removed them, so they
// are translated through those first. It returns how many operations it
// undid and a line for each it could not.
func (l *nslog) undo() (int, []string) {
	var later []*nsOp // durable renames and removals after the current operation, newest first
	var problems []string
	undone := 0
	for i := len(l.ops) - 1; i >= 0; i-- {
		op := l.ops[i]
		if op.durable {
			if op.kind != opCreate {
				later = append(later, op)
			}
			continue
		}
		gone := ""
		tr := func(p string) string {
			for k := len(later) - 1; k >= 0 && gone == ""; k-- {
				var ok bool
				if p, ok = later[k].move(p); !ok {
					gone = later[k].String()
				}
			}
			return l.abs(p)
		}
		var err error
		switch op.kind {
		case opCreate:
			if p := tr(op.a); gone == "" {
				err = os.RemoveAll(p)
			}
		case opRemove:
			if p := tr(op.a); gone == "" {
				err = renameNoReplace(op.trash, p)
			}
		case opRename:
			a, b := tr(op.a), tr(op.b)
			if gone == "" {
				err = renameNoReplace(b, a)
			}
			if err == nil && gone == "" && op.trash != "" {
				err = renameNoReplace(op.trash, b)
			}
		case opExchange:
			a, b := tr(op.a), tr(op.b)
			if gone == "" {
				err = unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
			}
		}
		if gone != "" && (op.kind == opRemove || op.kind == opCreate) {
			// A directory above it was removed durably: the entry is
			// gone either way, as the undo would leave it
			// (os.RemoveAll, hashicorp/raft reaping a snapshot,
			// unlinks the files without syncing the directory, then
			// removes the directory, whose parent a later sync makes
			// durable).
			undone++
			continue
		}
		if gone != "" {
			err = fmt.Errorf("its entry went with the durable %s", gone)
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("undo %s: %v", op, err))
			continue
		}
		undone++
	}
	l.ops = nil
	return undone, problems
}

// move returns where the durable operation op (a rename, exchange or
// removal) took path p, and false when it removed it: a removal of p or
// of a directory above it, or a rename over it.
func (op *nsOp) move(p string) (string, bool) {
	under := func(dir string) (string, bool) {
		if p == dir {
			return "", true
		}
		rest, ok := strings.CutPrefix(p, dir+"/")
		return "/" + rest, ok
	}
	switch op.kind {
	case opRemove:
		if _, ok := under(op.a); ok {
			return "", false
		}
	case opRename:
		if rest, ok := under(op.a); ok {
			return op.b + rest, true
		}
		if _, ok := under(op.b); ok {
			return "", false // what b named was replaced
		}
	case opExchange:
		if rest, ok := under(op.a); ok {
			return op.b + rest, true
		}
		if rest, ok := under(op.b); ok {
			return op.a + rest, true
		}
	}
	return p, true
}

func renameNoReplace(from, to string) error {
	return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
}
