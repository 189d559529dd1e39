package bench

import (
	"context"
	"fmt"
	"github.com/grapnel-io/grapnel/rpc"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// AgentConfig says how to start one grapnel-agent process.
type AgentConfig struct {
	// Bin is the grapnel-agent binary. It starts its process workloads
	// through grapnel-process-shim when that is next to it (BuildCommands
	// and scripts/bench.sh install both), through itself otherwise.
	Bin string
	// Subcommand, when set, comes before the flags: "agent" for Bin the
	// multi-call binary grapnel rather than its link grapnel-agent.
	Subcommand string
	// Dir holds the agent's run folder and log file.
	Dir string
	// RunFolder, when set, is the agent's run folder in place of one in
	// Dir: a test file system that fails while the log file stays
	// writable (chaos/flashfs).
	RunFolder string
	Name      string
	// Servers are replica gRPC addresses (--server-url).
	Servers []string
	// Runtimes for --runtimes; empty leaves the agent's default.
	Runtimes []string
	// Extra flags, e.g. --gossip-join.
	Extra []string
	// TLS, when set, is the agent's certificate: it connects over mutual
	// TLS instead of --insecure.
	TLS *rpc.TLSFiles
}

// Agent is one grapnel-agent process. Its run folder survives Kill and
// Start, so a restarted agent finds the workloads it started.
type Agent struct {
	Name      string
	RunFolder string
	LogPath   string
	// Podman says the agent runs podman workloads (the podman or
	// podman-kube runtime), which RemoveWorkloads then removes too.
	Podman bool
	bin    string
	args   []string
	// base is how many of args are the agent's own (name, servers, run
	// folder, security, runtimes); the rest are AgentConfig.Extra.
	base int
	proc *Process
}

// StartAgent starts an agent, insecure unless cfg.TLS is set.
func StartAgent(cfg AgentConfig) (*Agent, error) {
	a, err := NewAgent(cfg)
	if err != nil {
		return nil, err
	}
	return a, a.Start()
}

// NewAgent prepares an agent (insecure unless cfg.TLS), its run folder and its flags,
// without starting it: Start does, or another process runs its Command.
func NewAgent(cfg AgentConfig) (*Agent, error) {
	a := &Agent{
		Name:      cfg.Name,
		RunFolder: filepath.Join(cfg.Dir, cfg.Name+"-run"),
		LogPath:   filepath.Join(cfg.Dir, cfg.Name+".log"),
		bin:       cfg.Bin,
	}
	if cfg.RunFolder != "" {
		a.RunFolder = cfg.RunFolder
	}
	if err := os.MkdirAll(a.RunFolder, 0o755); err != nil {
		return nil, err
	}
	if err := Passable(a.RunFolder); err != nil {
		return nil, err
	}
	a.args = []string{"--name", cfg.Name, "--server-url", strings.Join(cfg.Servers, ","), "--run-folder", a.RunFolder}
	if cfg.Subcommand != "" {
		a.args = append([]string{cfg.Subcommand}, a.args...)
	}
	if cfg.TLS != nil {
		a.args = append(a.args, "--ca_pem", cfg.TLS.CA, "--crt_pem", cfg.TLS.Cert, "--key_pem", cfg.TLS.Key)
	} else {
		a.args = append(a.args, "-k")
	}
	if len(cfg.Runtimes) > 0 {
		a.args = append(a.args, "--runtimes", strings.Join(cfg.Runtimes, ","))
	}
	a.Podman = slices.Contains(cfg.Runtimes, "podman") || slices.Contains(cfg.Runtimes, "podman-kube")
	a.base = len(a.args)
	a.args = append(a.args, cfg.Extra...)
	return a, nil
}

// Start starts the agent (again) with its original flags.
func (a *Agent) Start() error {
	if a.proc != nil && a.proc.Alive() {
		return fmt.Errorf("agent %s already runs", a.Name)
	}
	p, err := StartProcess(a.Name, a.bin, a.args, a.LogPath)
	if err != nil {
		return err
	}
	a.proc = p
	return nil
}

// Kill sends SIGKILL to the agent. Its workloads run in sessions of their
// own (the process runtime's shim, podman's conmon), so they live on.
func (a *Agent) Kill() {
	if a.proc != nil {
		a.proc.Kill()
	}
}

// SetBinary makes the next Start run bin (another release of the agent,
// with its own grapnel-process-shim next to it) with the agent's name,
// servers, run folder, security and runtimes plus extra in place of
// AgentConfig.Extra. It does not stop or start anything.
func (a *Agent) SetBinary(bin string, extra []string) {
	a.bin = bin
	a.args = append(slices.Clip(a.args[:a.base]), extra...)
}

// Binary is the agent binary the agent runs (or runs next).
func (a *Agent) Binary() string { return a.bin }

// StopWithin ends the agent with SIGTERM and says how it ended (see
// Process.StopWithin); nil when it stopped gracefully within grace.
func (a *Agent) StopWithin(grace time.Duration) error {
	if a.proc == nil || !a.proc.Alive() {
		return fmt.Errorf("agent %s: %w before the stop", a.Name, ErrExited)
	}
	return a.proc.StopWithin(grace)
}

// ExitErr says how the agent's process ended; nil while it runs.
func (a *Agent) ExitErr() error {
	if a.proc == nil {
		return nil
	}
	return a.proc.ExitErr()
}

// Stop ends the agent with SIGTERM, as systemd does.
func (a *Agent) Stop() {
	if a.proc != nil {
		a.proc.Stop(10 * time.Second)
	}
}

// Pid is the agent's process id; 0 before Start.
func (a *Agent) Pid() int {
	if a.proc == nil {
		return 0
	}
	return a.proc.Pid()
}

// Alive says whether the agent process runs.
func (a *Agent) Alive() bool { return a.proc != nil && a.proc.Alive() }

// Attached returns the agents replica i serves as leader right now.
func (g *Grapnel) Attached(ctx context.Context, i int) ([]string, error) {
	st, err := g.Status(ctx, i)
	if err != nil {
		return nil, err
	}
	return st.GetAttachedAgents(), nil
}

// WaitAttached waits until one running replica leads and every named agent
// is attached to it; it returns that replica's index.
func (g *Grapnel) WaitAttached(ctx context.Context, names ...string) (int, error) {
	leader := -1
	err := g.poll(ctx, fmt.Sprintf("agents %v attached to the leader", names), func() (bool, string) {
		l, why := g.leaderNow(ctx)
		if l < 0 {
			return false, why
		}
		att, err := g.Attached(ctx, l)
		if err != nil {
			return false, err.Error()
		}
		for _, n := range names {
			if !slices.Contains(att, n) {
				return false, fmt.Sprintf("leader %s has %v attached", g.Replicas[l].Name, att)
			}
		}
		leader = l
		return true, ""
	})
	return leader, err
}

// leaderNow returns a running replica that says it leads, or -1 and what
// the replicas said.
func (g *Grapnel) leaderNow(ctx context.Context) (int, string) {
	var seen []string
	for i, r := range g.Replicas {
		if !g.Running(i) {
			continue
		}
		st, err := g.Status(ctx, i)
		if err != nil {
			seen = append(seen, r.Name+": "+err.Error())
			continue
		}
		if st.GetLeaderId() == r.Name {
			return i, ""
		}
		seen = append(seen, r.Name+" sees "+st.GetLeaderId())
	}
	return -1, "no replica leads: " + strings.Join(seen, "; ")
}

// Signal sends sig to the agent process alone (not its group): SIGSTOP
// cuts it off as a hung unit would, SIGCONT brings it back.
func (a *Agent) Signal(sig os.Signal) error {
	if a.proc == nil {
		return fmt.Errorf("agent %s not started", a.Name)
	}
	return a.proc.cmd.Process.Signal(sig)
}

// Passable lets other users pass (o+x) through every directory above dir
// that is under the temporary directory, as a test's t.TempDir is not:
// the agent runs its process workloads under uids of their own, which
// must reach their directories in its run folder.
func Passable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	tmp := filepath.Clean(os.TempDir())
	for d := filepath.Dir(abs); strings.HasPrefix(d, tmp+string(filepath.Separator)); d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
				return err
			}
		}
	}
	return nil
}
