package durable

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// FS is the system calls an update sequence makes. OS uses the real ones;
// package crashfs models what a crash keeps of them.
type FS interface {
	// CreateTemp creates a new file, mode 0600, in dir, named from
	// pattern as os.CreateTemp names it.
	CreateTemp(dir, pattern string) (File, error)
	Rename(oldpath, newpath string) error
	// Link gives the file oldname a second name, newname; it fails with
	// fs.ErrExist when newname exists.
	Link(oldname, newname string) error
	Remove(path string) error
	Mkdir(path string, perm fs.FileMode) error
	Stat(path string) (fs.FileInfo, error)
	// SyncDir fsyncs the directory dir.
	SyncDir(dir string) error
}

// File is an open file of an FS, written from its start.
type File interface {
	Name() string
	Write(p []byte) (int, error)
	Chmod(mode fs.FileMode) error
	Sync() error
	Close() error
}

// Files makes its updates through one FS.
type Files struct{ fs FS }

// OS makes its updates on the real file system.
var OS = Files{fs: osFS{}}

// On makes its updates through fsys.
func On(fsys FS) Files { return Files{fs: fsys} }

// WriteFile replaces path with data, mode perm (whatever the umask), on
// the real file system (Files.WriteFile).
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return OS.WriteFile(path, data, perm)
}

// Replace replaces path with what fill writes, on the real file system
// (Files.Replace).
func Replace(path string, perm fs.FileMode, fill func(io.Writer) error) error {
	return OS.Replace(path, perm, fill)
}

// Create makes path with data, never replacing a file, on the real file
// system (Files.Create).
func Create(path string, data []byte, perm fs.FileMode) error {
	return OS.Create(path, data, perm)
}

// Rename renames oldpath to newpath on the real file system
// (Files.Rename).
func Rename(oldpath, newpath string) error { return OS.Rename(oldpath, newpath) }

// Remove removes path on the real file system (Files.Remove).
func Remove(path string) error { return OS.Remove(path) }

// MkdirAll makes path and its missing parents on the real file system
// (Files.MkdirAll).
func MkdirAll(path string, perm fs.FileMode) error { return OS.MkdirAll(path, perm) }

// WriteFileUnsynced replaces path with data on the real file system,
// without a sync (Files.WriteFileUnsynced).
func WriteFileUnsynced(path string, data []byte, perm fs.FileMode) error {
	return OS.WriteFileUnsynced(path, data, perm)
}

// MkdirMissing makes the missing directories of path on the real file
// system (Files.MkdirMissing).
func MkdirMissing(path string, perm fs.FileMode) error { return OS.MkdirMissing(path, perm) }

// SyncDir fsyncs the directory dir on the real file system
// (Files.SyncDir).
func SyncDir(dir string) error { return OS.SyncDir(dir) }

// Error is a failed step of an update: Op is the update ("replace",
// "create", "rename", "remove", "mkdir"), Path the file it was for, Step
// the system call that failed.
type Error struct {
	Op, Path, Step string
	Err            error
}

func (e *Error) Error() string {
	// The step names the file already; an os error would repeat it.
	err := e.Err
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	return e.Op + " " + e.Path + ": " + e.Step + ": " + err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// WriteFile replaces path with data, mode perm whatever the umask: after
// a crash a reader finds the old file (or none, if there was none) or
// the new one, and once WriteFile returns nil the new one survives a
// power cut.
func (f Files) WriteFile(path string, data []byte, perm fs.FileMode) error {
	return f.Replace(path, perm, dataFill(data))
}

// WriteFileUnsynced replaces path with data, mode perm whatever the
// umask, as WriteFile does, but syncs nothing: a reader sees the old file
// or the new one, whole, and the new one survives a crash of the writer
// (the page cache keeps it), but after a power cut or a crash of the
// kernel the old file, the new one, or one empty or torn may be found.
// It is for records of the running boot's processes, which a power cut
// ends with them, whose reader knows what an earlier boot left for what
// it is: two syncs a record, each a journal commit the writer waits for,
// were most of a workload's start.
func (f Files) WriteFileUnsynced(path string, data []byte, perm fs.FileMode) error {
	return f.replace(path, perm, dataFill(data), false)
}

// Replace is WriteFile for content that is streamed: fill writes it. An
// error fill returns that is not the file's own is returned as it is,
// and path is left as it was.
func (f Files) Replace(path string, perm fs.FileMode, fill func(io.Writer) error) error {
	return f.replace(path, perm, fill, true)
}

// replace writes a temporary file with fill and renames it over path;
// sync syncs the file before the rename and the directory after it.
func (f Files) replace(path string, perm fs.FileMode, fill func(io.Writer) error, sync bool) error {
	const op = "replace"
	tmp, err := f.written(op, path, perm, fill, sync)
	if err != nil {
		return err
	}
	if err := f.fs.Rename(tmp, path); err != nil {
		f.fs.Remove(tmp)
		return &Error{op, path, "rename " + tmp + " over it", err}
	}
	if !sync {
		return nil
	}
	if err := f.fs.SyncDir(filepath.Dir(path)); err != nil {
		return &Error{op, path, "fsync the directory", err}
	}
	return nil
}

// Create makes path with data, mode perm whatever the umask, and fails
// with an error matching fs.ErrExist when path exists. The data is
// synced under a temporary name and linked to path, so that after a
// crash path is missing or whole, never empty; once Create returns nil
// it survives a power cut.
func (f Files) Create(path string, data []byte, perm fs.FileMode) error {
	const op = "create"
	dir := filepath.Dir(path)
	tmp, err := f.written(op, path, perm, dataFill(data), true)
	if err != nil {
		return err
	}
	if err := f.fs.Link(tmp, path); err != nil {
		f.fs.Remove(tmp)
		return &Error{op, path, "link " + tmp + " to it", err}
	}
	if err := f.fs.Remove(tmp); err != nil {
		return &Error{op, path, "remove " + tmp, err}
	}
	if err := f.fs.SyncDir(dir); err != nil {
		return &Error{op, path, "fsync the directory", err}
	}
	return nil
}

// written makes a temporary file next to path holding what fill writes,
// mode perm, synced (unless sync is false) and closed, and returns its
// name. On an error the file is gone.
func (f Files) written(op, path string, perm fs.FileMode, fill func(io.Writer) error, sync bool) (string, error) {
	file, err := f.fs.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return "", &Error{op, path, "create a temporary file", err}
	}
	tmp := file.Name()
	fail := func(step string, err error) (string, error) {
		file.Close()
		f.fs.Remove(tmp)
		if step == "" {
			return "", err
		}
		return "", &Error{op, path, step, err}
	}
	if perm != 0o600 { // CreateTemp's mode
		if err := file.Chmod(perm); err != nil {
			return fail("chmod "+tmp, err)
		}
	}
	w := &fileWriter{f: file}
	if err := fill(w); err != nil {
		if w.err != nil {
			return fail("write "+tmp, w.err)
		}
		return fail("", err)
	}
	if sync {
		if err := file.Sync(); err != nil {
			return fail("fsync "+tmp, err)
		}
	}
	if err := file.Close(); err != nil {
		f.fs.Remove(tmp)
		return "", &Error{op, path, "close " + tmp, err}
	}
	return tmp, nil
}

// dataFill is a fill function that writes data.
func dataFill(data []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}
}

// fileWriter remembers the file's own write error, to tell it from an
// error of the source fill copies from.
type fileWriter struct {
	f   File
	err error
}

func (w *fileWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil && w.err == nil {
		w.err = err
	}
	return n, err
}

// Rename renames oldpath to newpath and fsyncs the directories of both,
// so that once it returns nil the rename survives a power cut.
func (f Files) Rename(oldpath, newpath string) error {
	const op = "rename"
	if err := f.fs.Rename(oldpath, newpath); err != nil {
		return &Error{op, oldpath, "rename to " + newpath, err}
	}
	dirs := []string{filepath.Dir(newpath)}
	if d := filepath.Dir(oldpath); d != dirs[0] {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := f.fs.SyncDir(d); err != nil {
			return &Error{op, oldpath, "fsync the directory " + d, err}
		}
	}
	return nil
}

// Remove removes path, if it exists, and fsyncs its directory either
// way: a removal an earlier run made may not have been synced yet.
func (f Files) Remove(path string) error {
	const op = "remove"
	if err := f.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &Error{op, path, "remove", err}
	}
	if err := f.fs.SyncDir(filepath.Dir(path)); err != nil {
		return &Error{op, path, "fsync the directory", err}
	}
	return nil
}

// MkdirAll makes the directory path and its missing parents, mode perm
// less the umask as os.MkdirAll does, and fsyncs the parent of each
// directory it makes, and of path when path exists already: its name may
// have been made by a writer that did not sync it.
func (f Files) MkdirAll(path string, perm fs.FileMode) error {
	return f.mkdirAll(path, perm, true, nil)
}

// Dirs makes directories as MkdirAll does, but syncs each parent
// directory at most once: a replica's start makes three directories
// under its data directory (the data directory, snapshots/, wal/), and
// MkdirAll synced the data directory's parent three times and the data
// directory twice. A directory fsync is a journal commit on a vehicle's
// flash. One Dirs is for one start: a parent it synced is synced again
// only for a directory it makes in it, not for what others change there.
type Dirs struct {
	f      Files
	synced map[string]bool
}

// Dirs returns a Dirs on f.
func (f Files) Dirs() *Dirs { return &Dirs{f: f, synced: map[string]bool{}} }

// NewDirs returns a Dirs on the real file system.
func NewDirs() *Dirs { return OS.Dirs() }

// MkdirAll is Files.MkdirAll, without a sync of a parent this Dirs has
// synced already.
func (d *Dirs) MkdirAll(path string, perm fs.FileMode) error {
	return d.f.mkdirAll(path, perm, true, d.synced)
}

// mkdirAll makes path and its missing parents, syncing the name of each
// directory it makes into its parent; syncExisting also syncs the name
// of each one that exists. A parent in synced is not synced again; one
// that is synced is added to it (nil: every parent is synced).
func (f Files) mkdirAll(path string, perm fs.FileMode, syncExisting bool, synced map[string]bool) error {
	const op = "mkdir"
	path = filepath.Clean(path)
	fi, err := f.fs.Stat(path)
	switch {
	case err == nil && !fi.IsDir():
		return &Error{op, path, "stat", syscall.ENOTDIR}
	case err == nil && !syncExisting:
		return nil
	case err == nil:
		// Another writer may have made it without syncing its name (an
		// installer, systemd's StateDirectory=, a harness): sync it now.
		// Once per start of what uses it, never at idle.
		if parent := filepath.Dir(path); parent != path {
			if err := f.syncParent(parent, synced); err != nil {
				return &Error{op, path, "fsync the directory " + parent, err}
			}
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return &Error{op, path, "stat", err}
	}
	parent := filepath.Dir(path)
	if parent != path {
		if err := f.mkdirAll(parent, perm, syncExisting, synced); err != nil {
			return err
		}
	}
	if err := f.fs.Mkdir(path, perm); err != nil {
		// Made meanwhile by someone else, as os.MkdirAll allows.
		if fi, serr := f.fs.Stat(path); serr == nil && fi.IsDir() {
			return nil
		}
		return &Error{op, path, "mkdir", err}
	}
	if synced != nil {
		// A name was added to parent since any sync of it.
		delete(synced, parent)
	}
	if err := f.syncParent(parent, synced); err != nil {
		return &Error{op, path, "fsync the directory " + parent, err}
	}
	return nil
}

// syncParent fsyncs dir unless synced holds it, and adds it.
func (f Files) syncParent(dir string, synced map[string]bool) error {
	if synced[dir] {
		return nil
	}
	if err := f.fs.SyncDir(dir); err != nil {
		return err
	}
	if synced != nil {
		synced[dir] = true
	}
	return nil
}

// MkdirMissing is MkdirAll for directories that, where they exist, this
// program made durable itself (MkdirAll at its start, or an earlier
// MkdirMissing): it syncs the name of each directory it makes into its
// parent, and nothing for one that exists. An instance's start makes its
// directories under the run folder this way; MkdirAll's sync of a path
// that exists cost every start one to two fsyncs per directory, each a
// journal commit and a cache flush that the start waited for, although
// the agent made those directories durable when it started.
func (f Files) MkdirMissing(path string, perm fs.FileMode) error {
	return f.mkdirAll(path, perm, false, nil)
}

// SyncDir fsyncs the directory dir, for names another writer made in it
// (a library that syncs its files but not their names).
func (f Files) SyncDir(dir string) error {
	if err := f.fs.SyncDir(dir); err != nil {
		return &Error{"sync", dir, "fsync the directory", err}
	}
	return nil
}

// osFS is the real file system.
type osFS struct{}

func (osFS) CreateTemp(dir, pattern string) (File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err // not a File holding a nil *os.File
	}
	return f, nil
}

func (osFS) Rename(oldpath, newpath string) error      { return os.Rename(oldpath, newpath) }
func (osFS) Link(oldname, newname string) error        { return os.Link(oldname, newname) }
func (osFS) Remove(path string) error                  { return os.Remove(path) }
func (osFS) Mkdir(path string, perm fs.FileMode) error { return os.Mkdir(path, perm) }
func (osFS) Stat(path string) (fs.FileInfo, error)     { return os.Stat(path) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
