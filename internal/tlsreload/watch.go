package tlsreload

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Watcher reloads a Store when one of its files changes. It waits on
// inotify (no polling, nothing runs at idle): the directories holding the
// files are watched, so a file replaced by a rename (as rotation tools
// and Kubernetes secret mounts do) is seen as well as one rewritten in
// place.
type Watcher struct {
	f    *os.File
	done chan struct{}
}

// watchMask is what counts as a change: written and closed, moved in,
// created, removed, attributes (mode) changed.
const watchMask = unix.IN_CLOSE_WRITE | unix.IN_MOVED_TO | unix.IN_CREATE | unix.IN_DELETE | unix.IN_ATTRIB

// Watch starts following the stores' files; each store reloads when an
// event names one of its files. Stop ends it. Stores with no files are
// skipped; with none at all Watch returns a Watcher that does nothing.
func Watch(stores ...*Store) (*Watcher, error) {
	w := &Watcher{done: make(chan struct{})}
	names := map[string][]*Store{} // base name -> stores reading a file so named
	dirs := map[string]bool{}
	for _, s := range stores {
		if s == nil {
			continue
		}
		for _, p := range s.files {
			if p == "" {
				continue
			}
			abs, err := filepath.Abs(p)
			if err != nil {
				return nil, fmt.Errorf("tlsreload: %s: %w", p, err)
			}
			dirs[filepath.Dir(abs)] = true
			b := filepath.Base(abs)
			if !slices.Contains(names[b], s) {
				names[b] = append(names[b], s)
			}
		}
	}
	if len(dirs) == 0 {
		close(w.done)
		return w, nil
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("tlsreload: inotify: %w", err)
	}
	for d := range dirs {
		if _, err := unix.InotifyAddWatch(fd, d, watchMask); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("tlsreload: watching %s: %w", d, err)
		}
	}
	// Non-blocking, so the runtime's poller parks the reader and Close
	// wakes it.
	w.f = os.NewFile(uintptr(fd), "inotify")
	go w.run(names)
	return w, nil
}

// run reads events until Stop; a batch of events reloads each store named
// in it once.
func (w *Watcher) run(names map[string][]*Store) {
	defer close(w.done)
	buf := make([]byte, 16*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				for _, ss := range names {
					for _, s := range ss {
						if s.onError != nil {
							s.onError(fmt.Errorf("tlsreload: inotify read: %w; certificates reload on SIGHUP only", err))
							return
						}
					}
				}
			}
			return
		}
		var hit []*Store
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			end := off + unix.SizeofInotifyEvent + int(ev.Len)
			if end > n {
				break
			}
			name := string(buf[off+unix.SizeofInotifyEvent : end])
			for i := 0; i < len(name); i++ {
				if name[i] == 0 {
					name = name[:i]
					break
				}
			}
			for _, s := range names[name] {
				if !slices.Contains(hit, s) {
					hit = append(hit, s)
				}
			}
			off = end
		}
		for _, s := range hit {
			s.reloadReporting()
		}
	}
}

// Stop ends the watch and waits for its goroutine.
func (w *Watcher) Stop() {
	if w.f != nil {
		w.f.Close()
	}
	<-w.done
}
