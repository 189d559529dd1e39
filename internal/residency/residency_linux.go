//go:build linux

package residency

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// DropExecutablePages advises the kernel that the read-only mappings of
// the running executable are not needed now, and returns how many bytes
// they span. Writable mappings (data, bss, the heap) are left alone.
func DropExecutablePages() (int, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var spans [][2]uintptr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lo, hi, ok := readOnlyMapping(sc.Text(), exe)
		if ok {
			spans = append(spans, [2]uintptr{lo, hi})
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	n := 0
	for _, s := range spans {
		// The span is not Go memory, so it is passed as addresses, not
		// as a slice.
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, s[0], s[1]-s[0], unix.MADV_DONTNEED); e != 0 {
			return n, fmt.Errorf("madvise %#x-%#x: %w", s[0], s[1], e)
		}
		n += int(s[1] - s[0])
	}
	return n, nil
}

// readOnlyMapping parses one line of /proc/self/maps ("lo-hi perms offset
// dev inode path") and reports the span of a mapping of path that is not
// writable.
func readOnlyMapping(line, path string) (lo, hi uintptr, ok bool) {
	fields := strings.Fields(line)
	if len(fields) < 6 || strings.Join(fields[5:], " ") != path || strings.Contains(fields[1], "w") {
		return 0, 0, false
	}
	from, to, found := strings.Cut(fields[0], "-")
	if !found {
		return 0, 0, false
	}
	l, err1 := strconv.ParseUint(from, 16, 64)
	h, err2 := strconv.ParseUint(to, 16, 64)
	if err1 != nil || err2 != nil || h <= l {
		return 0, 0, false
	}
	return uintptr(l), uintptr(h), true
}
