// Package shim is the process runtime's shim: the small process that
// starts one workload, logs its output, forwards SIGTERM and SIGINT to it
// and records how it ended (see package process for the record). It runs
// as the command grapnel-process-shim, or inside grapnel-agent when no
// such command is installed next to it.
//
// The package uses the standard library and small internal packages
// only, so that the shim binary stays small and starts quickly: a
// vehicle's power-on starts a shim for every process workload at once.
package shim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/grapnel-io/grapnel/internal/residency"
	"golang.org/x/sys/unix"
)

// Env is the environment variable that turns a process into a shim; its
// value is the record directory of the instance.
const Env = "GRAPNEL_PROCESS_SHIM"

// ReadyEnv names the descriptor, inherited from the agent, of a pipe's
// write end that the shim closes once it has recorded the workload's pid
// or why the workload did not start: the agent waits for the pipe's end
// instead of reading the records over and over. The workload does not
// inherit it (closeInheritedOnExec).
const ReadyEnv = "GRAPNEL_PROCESS_SHIM_READY_FD"

// The runtime's variables, the same as agent/runtime's ControlInterfaceEnv
// and FilesEnv (the process runtime's tests check it); that package is
// not imported here, to keep the shim small.
const (
	ControlInterfaceEnv = "ANKAIOS_CONTROL_INTERFACE"
	FilesEnv            = "GRAPNEL_FILES"
)

const (
	// drainTimeout bounds how long the shim keeps reading output after
	// the workload exited, for a background child still holding a pipe.
	drainTimeout = 2 * time.Second
	// trimAfter is how long after the workload started the shim drops
	// its start-up code from its resident set (internal/residency): the
	// shim then holds the workload for hours on a few pages.
	trimAfter = 2 * time.Second
)

// MaxLine is the longest line the shim logs: it splits longer output
// lines, bounding its memory.
const MaxLine = 64 << 10

// RunIfRequested runs the shim and exits when the process was started as
// one (Env is set); otherwise it returns at once. It must be the first
// call in main.
func RunIfRequested() {
	dir := os.Getenv(Env)
	if dir == "" {
		return
	}
	os.Exit(Run(dir))
}

// closeInheritedOnExec marks every descriptor above stderr that the shim
// inherited close-on-exec: the workload gets stdin, stdout and stderr,
// not what its agent happened to hold without close-on-exec (descriptors
// the agent's own parent passed it). Go opens its own close-on-exec
// already. close_range needs Linux 5.11; before it, each open
// descriptor is marked.
func closeInheritedOnExec() {
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// Run starts the workload described in the record directory dir, logs
// its output, and records its pid and, at the end, how it exited; it
// returns the shim's exit code.
func Run(dir string) int {
	closeInheritedOnExec()
	ready := readyPipe()
	// Create already made us a session leader (then this fails with
	// EPERM); a shim started any other way leaves the caller's session
	// here, so that a signal to that session or group cannot reach it.
	_, _ = syscall.Setsid()
	// Caught, not ignored: an ignored signal would stay ignored in the
	// workload across exec. A full channel drops them.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP, syscall.SIGPIPE)
	// Signals that arrive while the workload starts wait in the channel
	// and are forwarded as soon as it runs.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	var sp Spec
	if err := ReadJSON(filepath.Join(dir, SpecFile), &sp); err != nil {
		return failStart(dir, fmt.Errorf("reading the spec: %w", err))
	}
	out, err := os.OpenFile(filepath.Join(dir, LogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return failStart(dir, fmt.Errorf("opening the log: %w", err))
	}
	defer out.Close()
	lw := &lineWriter{f: out}

	start := startChild
	if wantsSDKPath(&sp) {
		start = startWithSDKPath
	}
	cmd, pipes, err := start(&sp)
	if err != nil {
		return failStart(dir, err)
	}
	child := ProcRef{PID: cmd.Process.Pid, BootID: sp.BootID}
	if child.StartTime, err = StartTime(child.PID); err == nil {
		shim := ProcRef{PID: os.Getpid(), BootID: sp.BootID}
		if shim.StartTime, err = StartTime(shim.PID); err == nil {
			err = WriteBootRecord(filepath.Join(dir, RecordFile),
				ChildRecord{ProcRef: child, Shim: shim, StartedAt: shimClock.Now().UTC()})
		}
	}
	if err != nil {
		// Without a record nobody could find the workload again.
		_ = syscall.Kill(-child.PID, syscall.SIGKILL)
		_ = cmd.Wait()
		return failStart(dir, fmt.Errorf("recording the workload's pid: %w", err))
	}
	if ready != nil {
		// The record is written; on the start errors above, the
		// shim's exit closes it, after failStart wrote why.
		ready.Close()
	}

	go func() {
		for s := range sigs {
			child.SignalGroup(s.(syscall.Signal), sp.BootID)
		}
	}()
	trim := shimClock.AfterFunc(trimAfter, func() { _, _ = residency.DropExecutablePages() })
	defer trim.Stop()
	var pumps sync.WaitGroup
	for _, p := range pipes {
		pumps.Add(1)
		go func() {
			defer pumps.Done()
			pump(p.r, p.stream, lw)
		}()
	}

	waitErr := cmd.Wait()
	drained := make(chan struct{})
	go func() { pumps.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-clock.After(shimClock, drainTimeout):
		for _, p := range pipes {
			p.r.Close() // ends the pumps' reads
		}
		<-drained
	}

	ex := ExitRecord{At: shimClock.Now().UTC()}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		ex.Signal = int(ws.Signal())
	case ok:
		ex.Code = ws.ExitStatus()
	default:
		ex.Code = cmd.ProcessState.ExitCode()
	}
	if err := WriteJSON(filepath.Join(dir, ExitFile), ex); err != nil {
		fmt.Fprintf(os.Stderr, "grapnel process shim: recording the exit (%v): %v\n", waitErr, err)
		return 1
	}
	return 0
}

// readyPipe is the pipe end that ReadyEnv names, or nil when the agent
// passed none (an agent of an earlier release: it reads the records until
// one says how the start went).
func readyPipe() *os.File {
	fd, err := strconv.Atoi(os.Getenv(ReadyEnv))
	if err != nil || fd <= 2 {
		return nil
	}
	return os.NewFile(uintptr(fd), "ready")
}

// failStart records why the workload did not start, for Create to report.
func failStart(dir string, err error) int {
	fmt.Fprintf(os.Stderr, "grapnel process shim: %v\n", err)
	if werr := durable.WriteFile(filepath.Join(dir, StartErrorFile), []byte(err.Error()+"\n"), 0o600); werr != nil {
		fmt.Fprintf(os.Stderr, "grapnel process shim: recording the start error: %v\n", werr)
	}
	return 1
}

type outPipe struct {
	r      *os.File
	stream string
}

// startChild starts the workload in its own process group, stdin on
// /dev/null and stdout and stderr on pipes the shim reads.
func startChild(sp *Spec) (*exec.Cmd, []outPipe, error) {
	env := childEnv(os.Environ(), sp)
	dir := sp.WorkingDir
	if dir == "" {
		dir = sp.Home
	}
	if dir == "" {
		dir = "/"
	} else if err := checkDir(dir); err != nil {
		// Checked here: exec reports a failed chdir as if the command
		// were missing.
		return nil, nil, fmt.Errorf("runtimeConfig.workingDir %q: %w", dir, err)
	}
	path, err := lookCommand(sp.Command, env, dir)
	if err != nil {
		return nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, nil, err
	}
	attr := &syscall.SysProcAttr{Setpgid: true}
	if u := sp.User; u != nil {
		// No supplementary groups: the agent's (root's) would follow
		// the workload otherwise.
		attr.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: []uint32{}}
	}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        append([]string{sp.Command}, sp.Args...),
		Env:         env,
		Dir:         dir,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: attr,
	}
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, nil, fmt.Errorf("starting %q: %w", sp.Command, err)
	}
	return cmd, []outPipe{{outR, "stdout"}, {errR, "stderr"}}, nil
}

// DefaultPath is the workload's PATH unless its runtimeConfig sets one:
// fixed, so that nothing of the agent's own PATH reaches it.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// passedOn says whether a variable of the agent's environment reaches
// the workload: only the locale and the time zone. Everything else of
// the agent's — its key's path, GRAPNEL_* and ANK* settings, proxies —
// stays with the agent.
func passedOn(name string) bool {
	switch name {
	case "LANG", "LANGUAGE", "TZ":
		return true
	}
	return strings.HasPrefix(name, "LC_")
}

// childEnv is the workload's environment: PATH (DefaultPath) and HOME,
// the locale and time zone of the agent (base), then the configured
// variables, then the runtime's variables for this instance, which the
// configuration cannot override.
func childEnv(base []string, sp *Spec) []string {
	vars := map[string]string{"PATH": DefaultPath}
	if sp.Home != "" {
		vars["HOME"] = sp.Home
	}
	for _, kv := range base {
		if k, v, ok := strings.Cut(kv, "="); ok && passedOn(k) {
			vars[k] = v
		}
	}
	maps.Copy(vars, sp.Env)
	delete(vars, ControlInterfaceEnv)
	delete(vars, FilesEnv)
	delete(vars, Env)
	if sp.ControlInterface != "" {
		vars[ControlInterfaceEnv] = sp.ControlInterface
	}
	if sp.FilesDir != "" {
		vars[FilesEnv] = sp.FilesDir
	}
	env := make([]string, 0, len(vars))
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// lookCommand resolves the command as a shell would, but with the PATH
// the workload gets rather than the shim's. A command with a slash is
// taken relative to the working directory.
func lookCommand(command string, env []string, dir string) (string, error) {
	if strings.Contains(command, "/") {
		path := command
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		if err := CheckExecutable(path); err != nil {
			return "", fmt.Errorf("command %q: %w", command, err)
		}
		return path, nil
	}
	pathVar := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = v
		}
	}
	for _, d := range filepath.SplitList(pathVar) {
		if !filepath.IsAbs(d) {
			continue // a relative PATH entry would depend on the working directory
		}
		path := filepath.Join(d, command)
		if CheckExecutable(path) == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("command %q not found in PATH %q", command, pathVar)
}

func checkDir(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("no such file or directory")
	case err != nil:
		return err
	case !fi.IsDir():
		return errors.New("not a directory")
	}
	return nil
}

// CheckExecutable checks that path is a file with an execute bit.
func CheckExecutable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		if errors.Is(err, fs.ErrNotExist) {
			return errors.New("no such file")
		}
		return err
	case fi.IsDir():
		return errors.New("is a directory")
	case fi.Mode()&0o111 == 0:
		return errors.New("not executable")
	}
	return nil
}

// shimClock is the shim's clock. The shim is a process of its own, started
// by the runtime, so nothing injects one: it is the system clock.
var shimClock = clock.Real()

// lineWriter appends timestamped lines to the log; each line is one
// write, so a reader never sees two streams interleaved within a line.
type lineWriter struct {
	mu sync.Mutex // guards f
	f  *os.File
}

func (w *lineWriter) line(stream string, text []byte) {
	buf := make([]byte, 0, len(text)+48)
	buf = shimClock.Now().UTC().AppendFormat(buf, time.RFC3339Nano)
	buf = append(buf, ' ')
	buf = append(buf, stream...)
	buf = append(buf, ' ')
	buf = append(buf, text...)
	buf = append(buf, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.Write(buf); err != nil {
		fmt.Fprintf(os.Stderr, "grapnel process shim: writing the log: %v\n", err)
	}
}

// pump copies one stream into the log line by line until it ends.
func pump(r io.ReadCloser, stream string, w *lineWriter) {
	defer r.Close()
	br := bufio.NewReaderSize(r, MaxLine)
	for {
		b, err := br.ReadSlice('\n')
		if len(b) > 0 {
			w.line(stream, trimNewline(b))
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

func trimNewline(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		return b[:n-1]
	}
	return b
}
