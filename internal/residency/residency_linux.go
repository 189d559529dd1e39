//go:build linux

package residency

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DropExecutablePages advises the kernel that the read-only mappings of
// the running executable are not needed now, and asks it to bring them
// back page by page (see Dropped.PageByPage). Writable mappings (data,
// bss, the heap) are left alone.
func DropExecutablePages() (Dropped, error) {
	spans, err := executableSpans()
	if err != nil {
		return Dropped{}, err
	}
	d := Dropped{PageByPage: pageByPage(spans)}
	for _, s := range spans {
		// The span is not Go memory, so it is passed as addresses, not
		// as a slice.
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, s[0], s[1]-s[0], unix.MADV_DONTNEED); e != 0 {
			return d, fmt.Errorf("madvise %#x-%#x: %w", s[0], s[1], e)
		}
		d.Bytes += int(s[1] - s[0])
	}
	if d.Bytes == 0 {
		return d, errors.New("no read-only mapping of the executable in /proc/self/maps")
	}
	return d, nil
}

// executableSpans lists the read-only mappings of the running executable.
func executableSpans() ([][2]uintptr, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return nil, err
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var spans [][2]uintptr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if lo, hi, ok := readOnlyMapping(sc.Text(), exe); ok {
			spans = append(spans, [2]uintptr{lo, hi})
		}
	}
	return spans, sc.Err()
}

// The userfaultfd ABI (linux/userfaultfd.h); the same numbers on every
// architecture.
const (
	uffdUserModeOnly   = 1       // UFFD_USER_MODE_ONLY: no privilege needed
	uffdAPI            = 0xAA    // UFFD_API
	uffdFeatureWPAsync = 1 << 15 // UFFD_FEATURE_WP_ASYNC, Linux 6.7
	uffdRegisterModeWP = 1 << 1  // UFFDIO_REGISTER_MODE_WP
	uffdioAPI          = 0xC018AA3F
	uffdioRegister     = 0xC020AA00
)

// registered is the process's one registration: its descriptor stays
// open for the life of the process, since closing it would undo the
// registration.
var registered struct {
	once sync.Once
	fd   int
	err  error
}

// pageByPage turns fault-around off for spans: the kernel then maps only
// the page a fault asks for. It registers them once per process with a
// userfaultfd in asynchronous write-protect mode, the one registration
// that accepts a file mapping and that needs no thread to answer faults:
// nothing in these mappings is ever written or write-protected, so the
// registration has no effect but that one (mm/memory.c,
// should_fault_around).
func pageByPage(spans [][2]uintptr) error {
	registered.once.Do(func() { registered.fd, registered.err = register(spans) })
	return registered.err
}

func register(spans [][2]uintptr) (int, error) {
	fd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|unix.O_NONBLOCK|uffdUserModeOnly, 0, 0)
	if e != 0 {
		return -1, fmt.Errorf("userfaultfd: %w", e)
	}
	api := struct{ api, features, ioctls uint64 }{uffdAPI, uffdFeatureWPAsync, 0}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, uffdioAPI, uintptr(unsafe.Pointer(&api))); e != 0 {
		unix.Close(int(fd))
		return -1, fmt.Errorf("userfaultfd asynchronous write-protect mode (Linux 6.7): %w", e)
	}
	for _, s := range spans {
		reg := struct{ start, len, mode, ioctls uint64 }{uint64(s[0]), uint64(s[1] - s[0]), uffdRegisterModeWP, 0}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, uffdioRegister, uintptr(unsafe.Pointer(&reg))); e != 0 {
			unix.Close(int(fd)) // unregisters what was registered
			return -1, fmt.Errorf("userfaultfd register %#x-%#x: %w", s[0], s[1], e)
		}
	}
	return int(fd), nil
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
