package upgrade

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/chaos/check"
	"github.com/grapnel-io/grapnel/chaos/pki"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/state"
)

// The bounds of the waits; every wait of a run ends.
const (
	stopGrace     = 15 * time.Second // SIGTERM to exit; systemd's default is 90 s, a replica needs well under 1
	healthyBound  = 60 * time.Second
	attachedBound = 45 * time.Second
	setupBound    = 90 * time.Second
)

// serverFlags and agentFlags are the flags the harness gives each
// release beyond addresses, data dir and certificates. They are checked
// against the binary's --help before every start, so an old binary is
// never given a flag only a newer release has.
var (
	serverFlags = map[Release][]string{
		Old: {"--log-level", "info", "--agent-reconnect-grace", "3s"},
		New: {"--log-level", "info", "--agent-reconnect-grace", "3s"},
	}
	agentFlags = map[Release][]string{
		Old: {"--log-level", "info"},
		New: {"--log-level", "info"},
	}
)

// system is the replicas and agents of a run, each on the release it runs
// now, and the workloads they keep.
type system struct {
	dir    string
	builds map[Release]*Build
	flags  map[Release]map[string]Flags // release → program → its flags
	pki    *pki.Set
	g      *bench.Grapnel
	agents []*bench.Agent
	reps   []Release // release each replica runs
	ags    []Release // release each agent runs
	podman bool
	// want is every workload the agents keep: name → agent.
	want map[string]string
	// ids is what identifies each instance on its host since Start.
	ids map[string]string
}

func newSystem(ctx context.Context, dir string, builds map[Release]*Build, secure, podman bool, replicas, agents int) (*system, error) {
	s := &system{dir: dir, builds: builds, podman: podman, flags: map[Release]map[string]Flags{}}
	for rel, b := range builds {
		s.flags[rel] = map[string]Flags{}
		for _, p := range []string{"grapnel-server", "grapnel-agent", "grapnel"} {
			f, err := ReadFlags(ctx, b.Bins[p])
			if err != nil {
				return nil, err
			}
			s.flags[rel][p] = f
		}
	}
	var names, agentNames []string
	for i := range replicas {
		names = append(names, fmt.Sprintf("r%d", i+1))
	}
	for i := range agents {
		agentNames = append(agentNames, fmt.Sprintf("agent_u%d", i+1))
	}
	if secure {
		var err error
		if s.pki, err = pki.Make(filepath.Join(dir, "pki"), names, agentNames, 7*24*time.Hour); err != nil {
			return nil, fmt.Errorf("certificates: %w", err)
		}
	}
	var err error
	s.g, err = bench.StartGrapnel(bench.GrapnelConfig{Bin: builds[Old].Server(), Dir: dir, Replicas: replicas,
		Extra: serverFlags[Old], Deferred: true, PKI: s.pki})
	if err != nil {
		return nil, err
	}
	s.reps = make([]Release, replicas)
	runtimes := []string{"process"}
	if podman {
		runtimes = append(runtimes, "podman")
	}
	for _, n := range agentNames {
		cfg := bench.AgentConfig{Bin: builds[Old].Agent(), Dir: dir, Name: n, Servers: s.g.Addrs(), Runtimes: runtimes, Extra: agentFlags[Old]}
		if s.pki != nil {
			f := s.pki.Agents[n]
			cfg.TLS = &f
		}
		a, err := bench.NewAgent(cfg)
		if err != nil {
			s.close()
			return nil, err
		}
		s.agents = append(s.agents, a)
		s.ags = append(s.ags, Old)
	}
	return s, nil
}

// close stops every agent and replica and ends the workloads they left.
func (s *system) close() {
	for _, a := range s.agents {
		a.Stop()
	}
	s.g.Close()
	bench.RemoveWorkloads(s.agents)
}

// clientOptions are the operator's options for the cluster.
func (s *system) clientOptions() client.Options {
	o := s.g.ClientOptions()
	o.ResponseTimeout = 5 * time.Second
	return o
}

func (s *system) agentNames() []string {
	var out []string
	for _, a := range s.agents {
		out = append(out, a.Name)
	}
	return out
}

// releases says what every process runs: "r1 new, r2 old, r3 old; agents new old old".
func (s *system) releases() string {
	var reps, ags []string
	for i, r := range s.reps {
		reps = append(reps, fmt.Sprintf("r%d %s", i+1, r))
	}
	for _, r := range s.ags {
		ags = append(ags, string(r))
	}
	return strings.Join(reps, ", ") + "; agents " + strings.Join(ags, " ")
}

// replicaName is "r2 (old)".
func (s *system) replicaName(i int) string {
	if i < 0 {
		return "none"
	}
	return fmt.Sprintf("%s (%s)", s.g.Replicas[i].Name, s.reps[i])
}

// startReplica starts replica i on release rel, after checking its flags.
func (s *system) startReplica(i int, rel Release) error {
	s.g.SetBinary(i, s.builds[rel].Server(), serverFlags[rel])
	if bad := s.flags[rel]["grapnel-server"].Unknown(s.g.Command(i)[1:]); len(bad) > 0 {
		return fmt.Errorf("harness: the %s grapnel-server has no %v", rel, bad)
	}
	if err := s.g.Start(i); err != nil {
		return err
	}
	s.reps[i] = rel
	return nil
}

// startAgent starts agent i on release rel, after checking its flags.
func (s *system) startAgent(i int, rel Release) error {
	a := s.agents[i]
	a.SetBinary(s.builds[rel].Agent(), agentFlags[rel])
	if bad := s.flags[rel]["grapnel-agent"].Unknown(a.Command()[1:]); len(bad) > 0 {
		return fmt.Errorf("harness: the %s grapnel-agent has no %v", rel, bad)
	}
	if err := a.Start(); err != nil {
		return err
	}
	s.ags[i] = rel
	return nil
}

// waitHealthy waits until every replica is a healthy voter that caught up
// with the leader, every agent is attached to the leader, and (once they
// were applied) every workload is Running on its agent; it returns the
// leader.
func (s *system) waitHealthy(ctx context.Context, bound time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if _, err := s.g.WaitHealthy(ctx); err != nil {
		return -1, err
	}
	l, err := s.g.WaitAttached(ctx, s.agentNames()...)
	if err != nil || s.want == nil {
		return l, err
	}
	_, err = bench.WaitStatesWith(ctx, s.clientOptions(), "every workload Running on its agent", func(ss []state.WorkloadState) bool {
		return check.Converged(s.want, ss).OK
	})
	return l, err
}

// leader is the replica leading now, or -1.
func (s *system) leader(ctx context.Context) int {
	for i, r := range s.g.Replicas {
		if !s.g.Running(i) {
			continue
		}
		if st, err := s.g.Status(ctx, i); err == nil && st.GetLeaderId() == r.Name {
			return i
		}
	}
	return -1
}

// logFiles are every process's log, by process name.
func (s *system) logFiles() map[string]string {
	out := map[string]string{}
	for _, r := range s.g.Replicas {
		out[r.Name] = r.LogPath
	}
	for _, a := range s.agents {
		out[a.Name] = a.LogPath
	}
	return out
}

// logMarks are the sizes of the logs at a moment, so that what a step
// logged can be read afterwards.
type logMarks map[string]int64

func (s *system) markLogs() logMarks {
	m := logMarks{}
	for name, path := range s.logFiles() {
		if fi, err := os.Stat(path); err == nil {
			m[name] = fi.Size()
		}
	}
	return m
}

// maxLogLines bounds the lines one failure quotes per process.
const maxLogLines = 12

// logLines returns the warnings and errors the named processes logged
// since m (all processes when names is empty), each prefixed with the
// process name, errors first.
func (s *system) logLines(m logMarks, names ...string) []string {
	files := s.logFiles()
	if len(names) == 0 {
		for n := range files {
			names = append(names, n)
		}
	}
	var out []string
	for _, n := range sortedStrings(names) {
		out = append(out, interesting(files[n], m[n], n)...)
	}
	return out
}

// interesting reads path from off and keeps the error and warning lines
// (errors first), at most maxLogLines.
func interesting(path string, off int64, name string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil
	}
	var errs, warns []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch LogLevel(l) {
		case "error":
			errs = append(errs, name+": "+shorten(l, 400))
		case "warn":
			warns = append(warns, name+": "+shorten(l, 400))
		}
	}
	out := append(errs, warns...)
	if len(out) > maxLogLines {
		out = append(out[:maxLogLines], fmt.Sprintf("%s: … %d more in %s", name, len(out)-maxLogLines, path))
	}
	return out
}

// LogLevel is "error", "warn" or "" for one log line of a replica or an
// agent (slog's level=ERROR, hashicorp's [ERROR], a panic).
func LogLevel(l string) string {
	switch {
	case strings.Contains(l, "level=ERROR"), strings.Contains(l, "[ERROR]"), strings.HasPrefix(l, "panic:"),
		strings.HasPrefix(l, "fatal error:"), strings.Contains(l, "level=FATAL"):
		return "error"
	case strings.Contains(l, "level=WARN"), strings.Contains(l, "[WARN]"):
		return "warn"
	}
	return ""
}

// cli runs the grapnel CLI of rel with the operator's certificate against
// every replica and returns its output.
func (s *system) cli(ctx context.Context, rel Release, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.builds[rel].CLI(), append(s.cliBase(), args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("grapnel (%s) %s: %w: %s", rel, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// cliBase is the CLI's connection flags.
func (s *system) cliBase() []string {
	base := []string{"-s", strings.Join(s.g.Addrs(), ","), "--response-timeout", "5000"}
	if s.pki == nil {
		return append(base, "-k")
	}
	o := s.pki.Operator
	return append(base, "--ca_pem", o.CA, "--crt_pem", o.Cert, "--key_pem", o.Key)
}
