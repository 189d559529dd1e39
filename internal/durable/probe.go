package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Probe checks that dir takes new data again after a write failed in it
// (a full or read-only file system, an I/O error): it creates a file in
// dir, reserves reserve bytes for it (fallocate, which writes nothing:
// what a new segment of a log needs before its first entry), writes and
// fsyncs a block, removes the file and fsyncs dir. It returns the first
// step that failed, as an *Error; nil means the whole sequence worked.
//
// A successful Probe does not make what failed before durable: pages the
// kernel could not write may have been dropped or marked clean. See
// Uncache.
func Probe(dir string, reserve int64) error {
	const op = "probe"
	path := filepath.Join(dir, ".probe")
	f, err := os.CreateTemp(dir, ".probe.tmp*")
	if err != nil {
		return &Error{op, path, "create a file", err}
	}
	tmp := f.Name()
	fail := func(step string, err error) error {
		f.Close()
		os.Remove(tmp)
		return &Error{op, tmp, step, err}
	}
	if reserve > 0 {
		// A file system that cannot reserve (EOPNOTSUPP) is probed by the
		// write alone.
		if err := unix.Fallocate(int(f.Fd()), 0, 0, reserve); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
			return fail("reserve bytes", err)
		}
	}
	block := make([]byte, 4096)
	if _, err := f.Write(block); err != nil {
		return fail("write", err)
	}
	if err := f.Sync(); err != nil {
		return fail("fsync", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return &Error{op, tmp, "close", err}
	}
	if err := os.Remove(tmp); err != nil {
		return &Error{op, tmp, "remove", err}
	}
	if err := OS.SyncDir(dir); err != nil {
		return &Error{op, dir, "fsync the directory", err}
	}
	return nil
}

// Uncache drops from the page cache what the kernel holds of every
// regular file under dir (posix_fadvise DONTNEED), so that the next
// reader reads them from the disk. After a failed fsync the kernel may
// have marked the pages it could not write clean while keeping their new
// content in memory: a process that reopens the files would read data
// that is not on the disk, and take it for durable (the PostgreSQL fsync
// lesson). Dirty pages the kernel still hopes to write, and pages a
// process maps, stay; so Uncache is called once every file under dir is
// closed. It returns the first error and goes on with the other files.
func Uncache(dir string) error {
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			keep(err)
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			keep(err)
			return nil
		}
		defer f.Close()
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			keep(&Error{"uncache", path, "fadvise DONTNEED", err})
		}
		return nil
	})
	if err != nil {
		keep(err)
	}
	return first
}
