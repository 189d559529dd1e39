//go:build linux

package residency

import (
	"os"
	"strconv"
	"strings"
	"testing"
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
	n, err := DropExecutablePages()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no read-only executable mapping found")
	}
	after := rssFile(t)
	if after >= before {
		t.Fatalf("file-backed resident memory %d KiB before, %d KiB after dropping %d bytes", before, after, n)
	}
	t.Logf("file-backed resident %d KiB -> %d KiB (%d KiB advised)", before, after, n>>10)
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
