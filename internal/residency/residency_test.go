//go:build linux

package residency

import (
	"encoding/binary"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReadOnlyMapping(t *testing.T) {
	const exe = "/usr/bin/grapnel-server"
	cases := []struct {
		line   string
		ok     bool
		lo, hi uintptr
	}{
		{"00400000-00c85000 r-xp 00000000 fe:00 1 /usr/bin/grapnel-server", true, 0x400000, 0xc85000},
		{"00c85000-015f4000 r--p 00885000 fe:00 1 /usr/bin/grapnel-server", true, 0xc85000, 0x15f4000},
		{"015f4000-01690000 rw-p 011f4000 fe:00 1 /usr/bin/grapnel-server", false, 0, 0},
		{"7f0aed62d000-7f0aed653000 r--p 00000000 fe:00 2 /usr/lib/libc.so.6", false, 0, 0},
		{"01690000-036d6000 rw-p 00000000 00:00 0", false, 0, 0},
		{"nonsense", false, 0, 0},
	}
	for _, c := range cases {
		lo, hi, ok := readOnlyMapping(c.line, exe)
		if ok != c.ok || lo != c.lo || hi != c.hi {
			t.Errorf("%q: %#x %#x %v, want %#x %#x %v", c.line, lo, hi, ok, c.lo, c.hi, c.ok)
		}
	}
	// A path with a space (a replaced binary shows " (deleted)").
	if _, _, ok := readOnlyMapping("00400000-00c85000 r-xp 00000000 fe:00 1 /x/y (deleted)", "/x/y (deleted)"); !ok {
		t.Error("a deleted executable's mapping was not found")
	}
}

// After the drop the process keeps running (the code it runs comes back)
// and its resident file-backed memory shrinks.
func TestDropExecutablePagesShrinksTheResidentSet(t *testing.T) {
	before := rssFile(t)
	d, err := DropExecutablePages()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFile(t)
	if after >= before {
		t.Fatalf("file-backed resident memory %d KiB before, %d KiB after dropping %d bytes", before, after, d.Bytes)
	}
	t.Logf("file-backed resident %d KiB -> %d KiB (%d KiB advised)", before, after, d.Bytes>>10)
}

// After the drop a page of the executable that the process reads again
// comes back alone, not with the 64 KiB around it (fault-around), on
// every kernel that has userfaultfd's asynchronous write-protect mode.
func TestDroppedPagesComeBackOneByOne(t *testing.T) {
	d, err := DropExecutablePages()
	if err != nil {
		t.Fatal(err)
	}
	if d.PageByPage != nil {
		if kernelAtLeast(t, 6, 7) {
			t.Fatalf("Linux %s has userfaultfd's asynchronous write-protect mode, yet: %v", kernelRelease(t), d.PageByPage)
		}
		t.Skipf("Linux %s: %v", kernelRelease(t), d.PageByPage)
	}
	spans, err := executableSpans()
	if err != nil {
		t.Fatal(err)
	}
	page := uintptr(os.Getpagesize())
	const window = 64 << 10 // the kernel's default fault_around_bytes
	pm, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	defer pm.Close()
	resident := func(lo, hi uintptr) int {
		buf := make([]byte, (hi-lo)/page*8)
		if _, err := pm.ReadAt(buf, int64(lo/page*8)); err != nil {
			t.Fatal(err)
		}
		n := 0
		for i := 0; i < len(buf); i += 8 {
			if binary.LittleEndian.Uint64(buf[i:])>>63 == 1 {
				n++
			}
		}
		return n
	}
	// A window of the executable's read-only data that nothing has
	// brought back since the drop.
	var lo uintptr
	for _, s := range slices.Backward(spans) {
		for w := (s[0] + window - 1) &^ (window - 1); w+window <= s[1] && lo == 0; w += window {
			if resident(w, w+window) == 0 {
				lo = w
			}
		}
	}
	if lo == 0 {
		t.Fatal("no 64 KiB window of the executable is out of the resident set after the drop")
	}
	// Read one byte of its middle: a pipe's write copies it from this
	// address space (the address is not Go memory).
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	if _, _, e := unix.Syscall(unix.SYS_WRITE, uintptr(p[1]), lo+window/2, 1); e != 0 {
		t.Fatal(e)
	}
	if n := resident(lo, lo+window); n != 1 {
		t.Fatalf("reading one byte brought back %d pages of the 64 KiB window at %#x, want 1", n, lo)
	}
}

func kernelRelease(t *testing.T) string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	return unix.ByteSliceToString(u.Release[:])
}

func kernelAtLeast(t *testing.T, major, minor int) bool {
	var got [2]int
	for i, f := range strings.SplitN(kernelRelease(t), ".", 3)[:2] {
		n, err := strconv.Atoi(strings.TrimFunc(f, func(r rune) bool { return r < '0' || r > '9' }))
		if err != nil {
			t.Fatalf("kernel release %q: %v", kernelRelease(t), err)
		}
		got[i] = n
	}
	return got[0] > major || got[0] == major && got[1] >= minor
}

func rssFile(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "RssFile:" {
			v, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}
