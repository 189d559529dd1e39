package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

// A power domain is a pid namespace (unshare --pid --fork --mount-proc)
// whose pid 1 is a small init: the bench binary itself, re-executed with
// PowerInitEnv naming a PowerSpec. The init starts every command of the
// spec at once and reaps whatever ends in the namespace. SIGKILL to that
// pid 1 from outside is a power loss: the kernel kills everything in the
// namespace at once, replicas, agents, shims and workloads, while their
// data directories and run folders stay on disk for the next power-on.

// PowerInitEnv names the spec file when the bench binary runs as the init
// of a power domain; RunPowerInitIfRequested acts on it.
const PowerInitEnv = "GRAPNEL_BENCH_POWER_INIT"

// PowerCommand is one process the init starts: Args[0] is the binary,
// stdout and stderr are appended to Log. Nice, when not zero, is the
// process's nice value, as a unit file's Nice= sets it (its children
// inherit it); TimerSlack, when not zero, its timer slack, as
// TimerSlackNSec= sets it.
type PowerCommand struct {
	Name       string        `json:"name"`
	Args       []string      `json:"args"`
	Log        string        `json:"log"`
	Nice       int           `json:"nice,omitempty"`
	TimerSlack time.Duration `json:"timer_slack,omitempty"`
}

// PowerSpec is what a power domain runs.
type PowerSpec struct {
	Commands []PowerCommand `json:"commands"`
}

// WritePowerSpec writes spec to path for the init to read.
func WritePowerSpec(path string, spec PowerSpec) error {
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// Command is replica i's command line, binary first, for a process that
// another one starts (a power domain's init).
func (g *Grapnel) Command(i int) []string {
	bin, args := g.command(i)
	return append([]string{bin}, args...)
}

// Command is the agent's command line, binary first.
func (a *Agent) Command() []string {
	return append([]string{a.bin}, a.args...)
}

// RunPowerInitIfRequested runs the process as the init of a power domain
// when PowerInitEnv is set, and never returns then; otherwise it returns
// at once. A bench command calls it first thing in main.
func RunPowerInitIfRequested() {
	path, ok := os.LookupEnv(PowerInitEnv)
	if !ok {
		return
	}
	os.Exit(powerInit(path))
}

// powerInit starts the spec's commands and reaps children until none is
// left, which ends the domain: the bench then sees it power off on its own.
func powerInit(specPath string) int {
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s power init: "+format+"\n", append([]any{time.Now().Format(time.RFC3339Nano)}, args...)...)
	}
	data, err := os.ReadFile(specPath)
	if err != nil {
		logf("%v", err)
		return 1
	}
	var spec PowerSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		logf("%s: %v", specPath, err)
		return 1
	}
	env := withoutEnv(os.Environ(), PowerInitEnv)
	names := map[int]string{}
	for _, c := range spec.Commands {
		pid, err := startLogged(c, env)
		if err != nil {
			logf("starting %s: %v", c.Name, err)
			return 1
		}
		names[pid] = c.Name
	}
	logf("started %d processes", len(names))
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.ECHILD):
			logf("every process of the domain has ended")
			return 1
		case err != nil:
			logf("wait: %v", err)
			return 1
		}
		if n, ok := names[pid]; ok {
			logf("%s (pid %d) ended: %v", n, pid, exitText(ws))
		}
	}
}

func exitText(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "signal " + ws.Signal().String()
	}
	return "exit status " + strconv.Itoa(ws.ExitStatus())
}

// startLogged starts c with its output appended to its log and returns
// its pid; the init reaps it with the orphans.
func startLogged(c PowerCommand, env []string) (int, error) {
	if len(c.Args) == 0 {
		return 0, errors.New("no command")
	}
	log, err := os.OpenFile(c.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer log.Close()
	fmt.Fprintf(log, "=== %s start (power domain) %s %q\n", time.Now().Format(time.RFC3339Nano), c.Args[0], c.Args[1:])
	null, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer null.Close()
	args := c.Args
	if c.Nice != 0 {
		// nice(1) sets it before the exec: set afterwards, it would miss
		// the threads the Go runtime starts at once (Linux keeps a nice
		// value per thread).
		nice, err := exec.LookPath("nice")
		if err != nil {
			return 0, err
		}
		args = append([]string{nice, "-n", strconv.Itoa(c.Nice)}, args...)
	}
	var p *os.Process
	err = withTimerSlack(c.TimerSlack, func() (err error) {
		p, err = os.StartProcess(args[0], args, &os.ProcAttr{Env: env, Files: []*os.File{null, log, log}})
		return err
	})
	if err != nil {
		return 0, err
	}
	pid := p.Pid
	_ = p.Release() // reaped by Wait4(-1)
	return pid, nil
}

func withoutEnv(env []string, name string) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		if !strings.HasPrefix(e, name+"=") {
			out = append(out, e)
		}
	}
	return out
}

// PowerDomain is one powered-on domain, seen from outside.
type PowerDomain struct {
	// Started is the power-on instant: just before unshare was started.
	Started time.Time
	// Init is the namespace's pid 1 as this process sees it.
	Init int
	// NS is the pid namespace, as /proc/PID/ns/pid names it.
	NS string

	cmd  *exec.Cmd // unshare, outside the namespace
	done chan struct{}
}

// PowerOn starts a power domain that runs the spec at specPath, with the
// init's and unshare's output appended to logPath. It returns once the
// namespace's pid 1 is known (a few milliseconds), not when its processes
// are up. The domain also ends when this process dies: unshare gets
// SIGKILL then and passes it on to the pid 1 (--kill-child).
func PowerOn(ctx context.Context, specPath, logPath string) (*PowerDomain, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	args := []string{"unshare", "--pid", "--fork", "--kill-child", "--mount-proc", self}
	if base, ok := baseNice(); ok {
		if own, err := niceOf("/proc/thread-self/stat"); err == nil && own != base {
			// The domain runs at the priority this process had before
			// SetNice raised it.
			args = append([]string{"nice", "-n", strconv.Itoa(base - own)}, args...)
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(withoutEnv(os.Environ(), PowerInitEnv), PowerInitEnv+"="+specPath)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	d := &PowerDomain{cmd: cmd, done: make(chan struct{})}
	d.Started = time.Now()
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("power on: %w", err)
	}
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(d.done)
	}()
	own, _ := os.Readlink("/proc/self/ns/pid")
	u := cmd.Process.Pid
	err = PollUntil(ctx, time.Millisecond, func() (bool, error) {
		select {
		case <-d.done:
			return false, fmt.Errorf("power on: unshare ended: %v\n%s", cmd.ProcessState, LogTail(logPath, 10))
		default:
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", u, u))
		if err != nil {
			return false, nil
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return false, nil
		}
		pid, _ := strconv.Atoi(f[0])
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
		if err != nil || ns == own {
			return false, nil
		}
		d.Init, d.NS = pid, ns
		return true, nil
	})
	if err != nil {
		d.kill()
		return nil, err
	}
	return d, nil
}

// SetNice gives every thread of this process the nice value n and
// returns the value the main thread had. Linux keeps a nice value per
// thread, and a thread started later inherits it from the thread that
// starts it, so every thread has it from then on. A bench that measures
// a domain starved of CPU raises its own priority so that its clock
// readings and requests are not late; PowerOn still runs the domain at
// nice 0. Raising the priority needs CAP_SYS_NICE.
func SetNice(n int) (int, error) {
	prev, err := niceOf("/proc/self/stat")
	if err != nil {
		return 0, err
	}
	niceBefore.Lock()
	if !niceBefore.set {
		niceBefore.set, niceBefore.v = true, prev
	}
	niceBefore.Unlock()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return prev, err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, n); err != nil && !errors.Is(err, syscall.ESRCH) {
			return prev, fmt.Errorf("nice %d: %w", n, err)
		}
	}
	return prev, nil
}

// niceBefore is this process's nice value before the first SetNice.
var niceBefore struct {
	sync.Mutex
	set bool
	v   int
}

// baseNice is the nice value this process had before the first SetNice;
// false when it was never called.
func baseNice() (int, bool) {
	niceBefore.Lock()
	defer niceBefore.Unlock()
	return niceBefore.v, niceBefore.set
}

// niceOf reads the nice value (field 19) from a /proc stat file.
func niceOf(path string) (int, error) {
	f, err := statFields(path, 17)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(f[16])
}

// PollUntil calls cond every interval until it is done, fails or ctx
// ends.
func PollUntil(ctx context.Context, interval time.Duration, cond func() (bool, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		done, err := cond()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Alive says whether the domain's pid 1 still runs.
func (d *PowerDomain) Alive() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to the pid 1 (while unshare, its parent, has not
// reaped it, so the pid is still the domain's) and to unshare.
func (d *PowerDomain) kill() {
	if !d.Alive() {
		return
	}
	if d.Init > 0 {
		_ = syscall.Kill(d.Init, syscall.SIGKILL)
	}
	_ = d.cmd.Process.Kill()
}

// Cut is a power loss: SIGKILL to the namespace's pid 1. It returns once
// unshare has reaped the pid 1 and no process of the namespace is left.
// It is safe to call more than once.
func (d *PowerDomain) Cut(ctx context.Context) error {
	if d.Alive() && d.Init > 0 {
		_ = syscall.Kill(d.Init, syscall.SIGKILL)
	}
	select {
	case <-d.done:
	case <-ctx.Done():
		_ = d.cmd.Process.Kill()
		return fmt.Errorf("power cut: unshare did not end: %w", ctx.Err())
	}
	left := 0
	err := PollUntil(ctx, 5*time.Millisecond, func() (bool, error) {
		left = CountInNamespace(d.NS)
		return left == 0, nil
	})
	if err != nil {
		return fmt.Errorf("power cut: %d processes of %s still there: %w", left, d.NS, err)
	}
	return nil
}

// CountInNamespace counts the processes of this host in the pid
// namespace ns (as /proc/PID/ns/pid names it).
func CountInNamespace(ns string) int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if l, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns/pid")); err == nil && l == ns {
			n++
		}
	}
	return n
}

// DomainProcs lists the processes of a power domain that run one
// program, through the namespace's own /proc (reached through its pid
// 1's root), so that only the domain's processes are read. It picks them
// by their command name (/proc/PID/comm, which the kernel keeps in the
// task) and reads the argv (/proc/PID/cmdline, which needs the process's
// memory map, slow to get while many processes start and fault in
// pages) once per process: the program is taken not to exec again, as a
// workload's sleep does not.
type DomainProcs struct {
	proc  string
	comm  string
	known map[string][]string // namespace pid -> argv
}

// Procs returns a lister of d's processes whose command name is comm.
func (d *PowerDomain) Procs(comm string) *DomainProcs {
	return &DomainProcs{proc: fmt.Sprintf("/proc/%d/root/proc", d.Init), comm: comm, known: map[string][]string{}}
}

// Argvs returns the argv of every process of the program in the domain
// now; processes that are exiting are left out.
func (p *DomainProcs) Argvs() ([][]string, error) {
	entries, err := os.ReadDir(p.proc)
	if err != nil {
		return nil, err
	}
	var out [][]string
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		name := e.Name()
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		seen[name] = true
		if argv, ok := p.known[name]; ok {
			out = append(out, argv)
			continue
		}
		if c, err := os.ReadFile(filepath.Join(p.proc, name, "comm")); err != nil || strings.TrimSpace(string(c)) != p.comm {
			continue
		}
		b, err := os.ReadFile(filepath.Join(p.proc, name, "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		p.known[name] = argv
		out = append(out, argv)
	}
	for name := range p.known {
		if !seen[name] {
			delete(p.known, name)
		}
	}
	return out, nil
}

// CPUTicks is the CPU time (in clock ticks) that every process now in
// the domain has used since it started, summed by the class that classify
// gives its argv ("" when it cannot be read). After a power-on every one
// of them started with it, so it is what the domain cost since then, less
// what processes and threads that already ended used. It sums the
// nanoseconds of every thread (schedstat) before it rounds: utime and
// stime are whole ticks per process, and the 100 shims and workloads of
// a power-on each use less than one until every workload runs.
func (p *DomainProcs) CPUTicks(classify func(argv []string) string) (map[string]int64, error) {
	entries, err := os.ReadDir(p.proc)
	if err != nil {
		return nil, err
	}
	ns := map[string]int64{}
	for _, e := range entries {
		name := e.Name()
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		t, err := threadsOnCPU(filepath.Join(p.proc, name, "task"))
		if err != nil {
			continue
		}
		class := ""
		if b, err := os.ReadFile(filepath.Join(p.proc, name, "cmdline")); err == nil && len(b) > 0 {
			class = classify(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"))
		}
		ns[class] += t
	}
	out := make(map[string]int64, len(ns))
	for class, t := range ns {
		out[class] = (t + nsPerTick/2) / nsPerTick
	}
	return out, nil
}

// nsPerTick is the length of a clock tick (USER_HZ, 100 on Linux).
const nsPerTick = int64(time.Second / 100)

// threadsOnCPU sums the time on a CPU, in nanoseconds, of every thread
// listed in a /proc/PID/task directory (the first field of schedstat).
func threadsOnCPU(taskDir string) (int64, error) {
	tasks, err := os.ReadDir(taskDir)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(taskDir, t.Name(), "schedstat"))
		if err != nil {
			continue // the thread ended meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", taskDir, err)
		}
		sum += v
	}
	return sum, nil
}

// statTicks reads utime+stime from a /proc/PID/stat file.
func statTicks(path string) (int64, error) {
	f, err := statFields(path, 13)
	if err != nil {
		return 0, err
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return utime + stime, nil
}

// HostCPU is the machine's CPU time so far, in clock ticks: busy (user,
// nice, system, irq, softirq, steal) and all of it, idle included.
func HostCPU() (busy, total int64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: %q", line)
	}
	for i, v := range f[1:9] {
		n, _ := strconv.ParseInt(v, 10, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total, nil
}

// SelfCPUTicks is the CPU time this process has used, in clock ticks.
func SelfCPUTicks() int64 {
	t, _ := statTicks("/proc/self/stat")
	return t
}

// StateReader reads the workload states from the replicas on one
// commander stream (CommandConnection) that it keeps open, as a
// dashboard at power-on would: a replica that is not the leader proxies
// it. When the stream breaks it is opened again at the next replica. The
// connections retry every few milliseconds. It is not safe for
// concurrent use.
type StateReader struct {
	addrs  []string
	conns  []*grpc.ClientConn
	next   int
	st     grpc.BidiStreamingClient[grpcapi.ToServer, grpcapi.FromServer]
	cancel context.CancelFunc
	n      int
}

// NewStateReader prepares connections to every replica; it connects on
// the first States.
func NewStateReader(addrs []string) (*StateReader, error) {
	r := &StateReader{addrs: addrs}
	for _, a := range addrs {
		cc, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: time.Millisecond, Multiplier: 1.2, MaxDelay: 2 * time.Millisecond},
				MinConnectTimeout: 100 * time.Millisecond,
			}))
		if err != nil {
			r.Close()
			return nil, err
		}
		r.conns = append(r.conns, cc)
	}
	return r, nil
}

// Close ends the stream and the connections.
func (r *StateReader) Close() {
	r.drop()
	for _, cc := range r.conns {
		cc.Close()
	}
	r.conns = nil
}

func (r *StateReader) drop() {
	if r.cancel != nil {
		r.cancel()
	}
	r.st, r.cancel = nil, nil
}

// States asks for the workload states once, within timeout; a failure
// drops the stream, so that the next call opens one at the next replica.
func (r *StateReader) States(ctx context.Context, timeout time.Duration) ([]state.WorkloadState, error) {
	ws, err := r.ask(ctx, timeout)
	if err != nil {
		r.drop()
		r.next = (r.next + 1) % len(r.conns)
	}
	return ws, err
}

func (r *StateReader) ask(ctx context.Context, timeout time.Duration) ([]state.WorkloadState, error) {
	if r.st == nil {
		sctx, cancel := context.WithCancel(context.Background())
		octx, ocancel := context.WithTimeout(ctx, timeout)
		stop := context.AfterFunc(octx, cancel)
		st, err := grpcapi.NewCommandConnectionClient(r.conns[r.next]).ConnectCommand(sctx, grpc.WaitForReady(true))
		if err == nil {
			err = st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_CommanderHello{CommanderHello: &grpcapi.CommanderHello{ProtocolVersion: rpc.ProtocolVersion}}})
		}
		ok := stop()
		ocancel()
		if err == nil && !ok {
			err = octx.Err()
		}
		if err != nil {
			cancel()
			return nil, fmt.Errorf("%s: %w", r.addrs[r.next], err)
		}
		r.st, r.cancel = st, cancel
	}
	r.n++
	id := "states-" + strconv.Itoa(r.n)
	req := &ankbase.Request{RequestId: id, RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: []string{"workloadStates"}}}}
	// A stuck replica must not hold the caller: the deadline cancels the
	// stream, which ends Recv.
	timer := time.AfterFunc(timeout, r.cancel)
	defer timer.Stop()
	stop := context.AfterFunc(ctx, r.cancel)
	defer stop()
	if err := r.st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: req}}); err != nil {
		return nil, fmt.Errorf("%s: %w", r.addrs[r.next], err)
	}
	for {
		m, err := r.st.Recv()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.addrs[r.next], err)
		}
		if resp := m.GetResponse(); resp.GetRequestId() == id {
			return statesOf(resp)
		}
	}
}
