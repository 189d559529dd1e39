package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/grapnel-io/grapnel/internal/changefeed"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/durable"
)

// ErrFailed is wrapped by every error Check returns for a failure of the
// run folder's storage.
var ErrFailed = errors.New("run folder failed")

// Defaults of Config: the replicas' probe pacing
// (cluster.Timing.StorageProbeMin and StorageProbeMax).
const (
	DefaultProbeMin = time.Second
	DefaultProbeMax = 30 * time.Second
)

// MaxFaultLen bounds Fault.Short, what the agent tells the leader and
// systemd: the replicas' bound for their own storage faults
// (gossipmeta.MaxStorageFailedLen).
const MaxFaultLen = 160

// Config configures a Guard.
type Config struct {
	// Dir is the run folder.
	Dir    string
	Logger *slog.Logger
	// Clock paces the probes and dates the faults; nil is the system
	// clock.
	Clock clock.Clock
	// ProbeMin and ProbeMax bound the wait between two probes: it starts
	// at ProbeMin and doubles up to ProbeMax; zero is the default.
	ProbeMin, ProbeMax time.Duration
	// Probe checks that Dir takes data again; nil is DefaultProbe.
	Probe func(dir string) error
}

// DefaultProbe makes dir if it is missing (a run folder that could not
// be made at start) and probes it with durable.Probe: a file created,
// written and fsynced, removed, the directory fsynced.
func DefaultProbe(dir string) error {
	if err := durable.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return durable.Probe(dir, 0)
}

// Fault is the first write of the run folder that failed since it last
// worked.
type Fault struct {
	// Op is the update or system call that failed ("replace", "mkdir",
	// "unlinkat"); empty when the error names none.
	Op string
	// Path is the file the error names, relative to the run folder; empty
	// when the error names none.
	Path string
	// Err is the error the write returned.
	Err error
	// At is when it failed.
	At time.Time
}

// Cause is the errno's text ("no space left on device").
func (f *Fault) Cause() string {
	if errno, ok := storageErrno(f.Err); ok {
		return errno.Error()
	}
	return f.Err.Error()
}

// Short is the fault in a few words, at most MaxFaultLen bytes: the file
// and the cause. The leader's problem and systemd STATUS show it.
func (f *Fault) Short() string {
	where := strings.TrimSpace(f.Op + " " + f.Path)
	s := f.Cause()
	if where != "" {
		s = where + ": " + s
	}
	return Truncate(s, MaxFaultLen)
}

// Truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	s = s[:max(n-len(mark), 0)]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + mark
}

// Error is a write that failed because the run folder's storage did. It
// wraps ErrFailed and the write's own error (with its errno).
type Error struct {
	Dir string
	Err error
}

func (e *Error) Error() string {
	return "run folder " + e.Dir + " failed: " + e.Err.Error()
}

func (e *Error) Unwrap() []error { return []error{ErrFailed, e.Err} }

// Guard watches one run folder; see the package doc. A nil Guard passes
// every error through and never fails.
type Guard struct {
	cfg   Config
	dir   string // Config.Dir, absolute and clean
	clk   clock.Clock
	log   *slog.Logger
	feed  *changefeed.Feed
	stop  chan struct{}
	wg    sync.WaitGroup
	close sync.Once

	mu    sync.Mutex
	fault *Fault
	// healed is closed when the run folder works again; a new one is
	// made at each new fault.
	healed chan struct{}
	// redo are the writes to make again, whole, once it works, by key;
	// redoSeq numbers them, so that one replaced meanwhile is kept.
	redo    map[string]redoWrite
	redoSeq uint64
	// wait is the next probe's delay; it starts over at ProbeMin only
	// when the run folder has worked for ProbeMax since it last healed,
	// so that a folder that fails again at once is not probed faster.
	wait     time.Duration
	healedAt time.Time
	// failures counts the writes and probes that failed.
	failures uint64
}

// New returns a Guard of a working run folder.
func New(cfg Config) *Guard {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ProbeMin <= 0 {
		cfg.ProbeMin = DefaultProbeMin
	}
	if cfg.ProbeMax < cfg.ProbeMin {
		cfg.ProbeMax = max(DefaultProbeMax, cfg.ProbeMin)
	}
	if cfg.Probe == nil {
		cfg.Probe = DefaultProbe
	}
	dir := cfg.Dir
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	closed := make(chan struct{})
	close(closed)
	return &Guard{cfg: cfg, dir: filepath.Clean(dir), clk: cfg.Clock, log: cfg.Logger, feed: changefeed.New(),
		stop: make(chan struct{}), healed: closed, redo: map[string]redoWrite{}, wait: cfg.ProbeMin}
}

// storageErrno is err's errno when it is one the storage fails with: a
// full file system or quota, a read-only one, an I/O error, a file size
// limit (RLIMIT_FSIZE).
func storageErrno(err error) (syscall.Errno, bool) {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return 0, false
	}
	switch errno {
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EIO, syscall.EFBIG:
		return errno, true
	}
	return 0, false
}

// pathOf is the file err names, "" when it names none.
func pathOf(err error) string {
	_, path := opOf(err)
	return path
}

// opOf is the update or system call err comes from and the file it
// names; "" when it names none.
func opOf(err error) (op, path string) {
	var de *durable.Error
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &de):
		return de.Op, de.Path
	case errors.As(err, &pe):
		return pe.Op, pe.Path
	case errors.As(err, &le):
		return le.Op, le.New
	}
	return "", ""
}

// inside says whether path is the run folder or under it.
func (g *Guard) inside(path string) bool {
	rel, err := filepath.Rel(g.dir, filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// IsFailure says whether err is a failure of the run folder's storage:
// an errno the storage fails with, of a file in the run folder (or of no
// named file). An error Check returned is one.
func (g *Guard) IsFailure(err error) bool {
	if err == nil || g == nil {
		return false
	}
	if errors.Is(err, ErrFailed) {
		return true
	}
	if _, ok := storageErrno(err); !ok {
		return false
	}
	p := pathOf(err)
	return p == "" || g.inside(p)
}

// Check returns err as it is unless it is a failure of the run folder's
// storage (IsFailure). Such a failure becomes the fault when the run
// folder worked until now: the agent logs it, tells the leader and
// systemd, and probes the run folder until it works again. Check then
// returns an *Error naming the run folder.
func (g *Guard) Check(err error) error {
	if !g.IsFailure(err) {
		return err
	}
	var already *Error
	if errors.As(err, &already) {
		return err
	}
	g.fail(err)
	return &Error{Dir: g.dir, Err: err}
}

// fail records err as the fault unless one is recorded, and starts the
// probe loop at the first.
func (g *Guard) fail(err error) {
	g.mu.Lock()
	g.failures++
	if g.fault != nil {
		g.mu.Unlock()
		return
	}
	op, p := opOf(err)
	f := &Fault{Op: op, Err: err, At: g.clk.Now()}
	if p != "" {
		if rel, rerr := filepath.Rel(g.dir, p); rerr == nil && g.inside(p) {
			f.Path = rel
		} else {
			f.Path = p
		}
	}
	g.fault = f
	g.healed = make(chan struct{})
	if g.healedAt.IsZero() || clock.Since(g.clk, g.healedAt) >= g.cfg.ProbeMax {
		g.wait = g.cfg.ProbeMin
	}
	wait := g.wait
	g.mu.Unlock()
	g.log.Error("run folder failed: the agent keeps its workloads running, makes no change that needs the run folder "+
		"and probes it; it resumes once the run folder works again", "run_folder", g.dir, "error", err, "next_probe_in", wait)
	g.feed.Notify()
	g.wg.Add(1)
	go g.probeLoop()
}

// Failed is a closed channel and nil while the run folder works; after
// a failure it is a channel closed once the run folder works again and
// the fault as an *Error.
func (g *Guard) Failed() (healed <-chan struct{}, failed error) {
	if g == nil {
		closed := make(chan struct{})
		close(closed)
		return closed, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fault == nil {
		return g.healed, nil
	}
	return g.healed, &Error{Dir: g.dir, Err: g.fault.Err}
}

// Fault is the fault, or nil while the run folder works.
func (g *Guard) Fault() *Fault {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fault
}

// Short is the fault in a few words (Fault.Short), "" while the run
// folder works.
func (g *Guard) Short() string {
	if f := g.Fault(); f != nil {
		return f.Short()
	}
	return ""
}

// Failures counts the writes and probes of the run folder that failed.
func (g *Guard) Failures() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.failures
}

// Dir is the run folder, absolute.
func (g *Guard) Dir() string { return g.dir }

// Changes is signalled (coalescing) whenever the run folder fails or
// works again; cancel ends the subscription.
func (g *Guard) Changes() (<-chan struct{}, func()) { return g.feed.Subscribe() }

// Redo keeps a write to make again once the run folder works, before
// the fault is cleared: the write that failed, made whole, never on top
// of what it left. A later Redo under the same key replaces it. fn
// returning a failure of the storage keeps the run folder failed, and
// it is made again after the next probe that works; any other error is
// logged and the write dropped.
func (g *Guard) Redo(key string, fn func() error) {
	g.mu.Lock()
	g.redoSeq++
	g.redo[key] = redoWrite{fn: fn, seq: g.redoSeq}
	g.mu.Unlock()
}

// redoWrite is one write kept by Redo.
type redoWrite struct {
	fn  func() error
	seq uint64
}

// Close stops probing; it waits for the probe loop.
func (g *Guard) Close() {
	if g == nil {
		return
	}
	g.close.Do(func() { close(g.stop) })
	g.wg.Wait()
}

// probeLoop probes the run folder with backoff until a probe works and
// the writes to make again are made, then clears the fault.
func (g *Guard) probeLoop() {
	defer g.wg.Done()
	last := ""
	for {
		g.mu.Lock()
		wait := g.wait
		g.mu.Unlock()
		t := clock.NewTimer(g.clk, wait)
		select {
		case <-t.C:
		case <-g.stop:
			t.Stop()
			return
		}
		g.mu.Lock()
		g.wait = min(2*g.wait, g.cfg.ProbeMax)
		next := g.wait
		g.mu.Unlock()
		err := g.cfg.Probe(g.dir)
		if err == nil {
			err = g.redoAll()
		}
		if err == nil {
			g.heal()
			return
		}
		g.mu.Lock()
		g.failures++
		g.mu.Unlock()
		if err.Error() != last {
			last = err.Error()
			g.log.Warn("run folder still fails", "run_folder", g.dir, "probe", err, "next_probe_in", next)
		}
	}
}

// redoAll makes the writes kept by Redo, in the order of their keys; it
// returns the first failure of the storage, keeping that write and the
// ones not made yet.
func (g *Guard) redoAll() error {
	g.mu.Lock()
	keys := make([]string, 0, len(g.redo))
	for k := range g.redo {
		keys = append(keys, k)
	}
	g.mu.Unlock()
	slices.Sort(keys)
	for _, k := range keys {
		g.mu.Lock()
		w, ok := g.redo[k]
		g.mu.Unlock()
		if !ok {
			continue
		}
		err := w.fn()
		if g.IsFailure(err) {
			return fmt.Errorf("%s: %w", k, err)
		}
		if err != nil {
			g.log.Warn("a write to make again once the run folder works failed otherwise; dropped", "write", k, "error", err)
		}
		g.mu.Lock()
		// Only the write that was made: a newer one under the key stays.
		if cur, ok := g.redo[k]; ok && cur.seq == w.seq {
			delete(g.redo, k)
		}
		g.mu.Unlock()
	}
	return nil
}

// heal clears the fault and wakes whoever waits for the run folder.
func (g *Guard) heal() {
	g.mu.Lock()
	f := g.fault
	g.fault = nil
	g.healedAt = g.clk.Now()
	close(g.healed)
	g.mu.Unlock()
	g.log.Warn("run folder works again (a file was written, fsynced and removed in it): the agent resumes the changes that waited",
		"run_folder", g.dir, "failed_for", clock.Since(g.clk, f.At).Round(time.Millisecond))
	g.feed.Notify()
}
