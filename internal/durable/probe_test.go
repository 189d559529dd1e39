package durable

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Requirement (issue 29 point 3): the probe of a failed storage writes,
// reserves and fsyncs a file, and leaves nothing behind either way.
func TestProbeLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	if err := Probe(dir, 1<<20); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the probe left %v", left)
	}
	err := Probe(filepath.Join(dir, "missing"), 0)
	var de *Error
	if !errors.As(err, &de) || de.Step != "create a file" || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("probe of a missing directory: %v, want the create step failing", err)
	}
}

// Requirement (issue 29 point 3): a write the kernel refuses fails the
// probe, naming the step and the errno. RLIMIT_FSIZE 0 makes every write
// of this process at any offset fail with EFBIG (the SIGXFSZ that comes
// with it Go ignores), a real kernel refusal without a special file
// system; it is put back before the test ends.
func TestProbeFailsOnARefusedWrite(t *testing.T) {
	dir := t.TempDir()
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	limited := old
	limited.Cur = 0
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &limited); err != nil {
		t.Fatal(err)
	}
	err := Probe(dir, 0)
	if rerr := unix.Setrlimit(unix.RLIMIT_FSIZE, &old); rerr != nil {
		t.Fatal(rerr)
	}
	if !errors.Is(err, syscall.EFBIG) || !strings.Contains(err.Error(), "probe") || !strings.Contains(err.Error(), ": write: ") {
		t.Fatalf("probe under RLIMIT_FSIZE 0: %v, want the write step failing with EFBIG", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the failed probe left %v", left)
	}
}

// Requirement (issue 29 point 3): after Uncache the kernel no longer
// holds the files' pages, so that a reader gets what the disk holds.
func TestUncacheDropsThePages(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "f")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1<<20)
	if err := WriteFile(path, data, 0o600); err != nil { // synced: the pages are clean
		t.Fatal(err)
	}
	if _, err := os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	resident := func() int {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m, err := unix.Mmap(int(f.Fd()), 0, len(data), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		vec := make([]byte, (len(data)+os.Getpagesize()-1)/os.Getpagesize())
		// x/sys has no Mincore; the system call is mincore(2).
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatal(errno)
		}
		n := 0
		for _, v := range vec {
			n += int(v & 1)
		}
		return n
	}
	if resident() == 0 {
		t.Skip("the file system keeps no pages in the page cache to drop (tmpfs?)")
	}
	if err := Uncache(dir); err != nil {
		t.Fatal(err)
	}
	if n := resident(); n != 0 {
		t.Fatalf("%d pages still cached after Uncache", n)
	}
	if err := Uncache(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("Uncache of a missing directory returned nil")
	}
}
