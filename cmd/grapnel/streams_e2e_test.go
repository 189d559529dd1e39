package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/state"
)

// The streaming commands an operator runs during a failover follow the
// leader (issue 31 point 1): three replicas and an agent run a workload
// that counts its lines; `get workloads --watch`, `get events` and
// `logs -f` run while the leader gets SIGKILL. Each must say on stderr
// that it resumed on the new leader, go on (a workload added after the
// kill shows up in the watch and the events), repeat nothing, and the
// logs must read 1, 2, 3, ... without a gap or a double; each ends only
// on SIGINT, with status 0.

// streamProc is one CLI process whose output the test reads while it
// runs.
type streamProc struct {
	name     string
	cmd      *exec.Cmd
	out, err syncbuf.Buffer
	exited   chan struct{}
	waitErr  error
}

func startStream(t *testing.T, bin string, addrs []string, name string, args ...string) *streamProc {
	t.Helper()
	full := append([]string{"-k", "--server-url", strings.Join(addrs, ",")}, args...)
	p := &streamProc{name: name, cmd: exec.Command(bin, full...), exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// waitFor polls until cond holds on what p printed, failing if p exits
// first or the time runs out.
func (p *streamProc) waitFor(t *testing.T, ctx context.Context, what string, cond func(stdout, stderr string) bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond(p.out.String(), p.err.String()) {
			return
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited (%v) before %s\nstdout:\n%s\nstderr:\n%s", p.name, p.waitErr, what, tail(p.out.String()), p.err.String())
		case <-ctx.Done():
			t.Fatalf("%s: no %s\nstdout:\n%s\nstderr:\n%s", p.name, what, tail(p.out.String()), p.err.String())
		case <-tick.C:
		}
	}
}

// interrupt sends SIGINT and waits for the exit, which must be status 0.
func (p *streamProc) interrupt(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("%s ended before Ctrl-C (%v)\nstderr:\n%s", p.name, p.waitErr, p.err.String())
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-ctx.Done():
		t.Fatalf("%s did not end on SIGINT", p.name)
	}
	if p.waitErr != nil {
		t.Fatalf("%s ended on SIGINT with %v\nstderr:\n%s", p.name, p.waitErr, p.err.String())
	}
}

func tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}

const streamsManifest = `apiVersion: v1
workloads:
  counter:
    runtime: process
    agent: agent_A
    runtimeConfig: |
      command: /bin/sh
      args: ["-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); echo line $i; sleep 0.01; done; exec sleep 600"]
`

func addedWorkload(name string) string {
	return fmt.Sprintf(`apiVersion: v1
workloads:
  %s:
    runtime: process
    agent: agent_A
    runtimeConfig: |
      command: /bin/sleep
      args: ["600"]
`, name)
}

func TestStreamsFollowTheLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test: builds grapnel-server, grapnel-agent and grapnel and runs three replicas and an agent")
	}
	dir := t.TempDir()
	bins, err := bench.BuildCommands(dir, "grapnel-server", "grapnel-agent", "grapnel")
	if err != nil {
		t.Fatal(err)
	}
	g, err := bench.StartGrapnel(bench.GrapnelConfig{Bin: bins["grapnel-server"], Dir: dir, Replicas: 3,
		Extra: []string{"--log-level", "info"}})
	if err != nil {
		t.Fatal(err)
	}
	var agent *bench.Agent
	t.Cleanup(func() {
		if agent != nil {
			agent.Kill()
		}
		g.Close()
		if t.Failed() {
			for _, r := range g.Replicas {
				t.Logf("--- %s\n%s", r.Name, bench.LogTail(r.LogPath, 30))
			}
			if agent != nil {
				t.Logf("--- %s\n%s", agent.Name, bench.LogTail(agent.LogPath, 30))
			}
		}
		if agent != nil {
			bench.RemoveWorkloads([]*bench.Agent{agent})
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if _, err := g.WaitHealthy(wctx); err != nil {
		t.Fatal(err)
	}
	agent, err = bench.StartAgent(bench.AgentConfig{Bin: bins["grapnel-agent"], Dir: dir, Name: "agent_A", Servers: g.Addrs(), Runtimes: []string{"process"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WaitAttached(wctx, "agent_A"); err != nil {
		t.Fatal(err)
	}
	cli := bins["grapnel"]
	apply := func(name, manifest string) {
		t.Helper()
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		e2eRun(t, cli, g.Addrs(), "apply", "--no-wait", path)
	}
	apply("counter", streamsManifest)
	if _, err := bench.WaitStates(wctx, g.Addrs(), "counter running", func(ws []state.WorkloadState) bool {
		s, ok := bench.StateOf(ws, "counter")
		return ok && s.State.State == state.StateRunning
	}); err != nil {
		t.Fatal(err)
	}

	watch := startStream(t, cli, g.Addrs(), "get workloads --watch", "get", "workloads", "--watch")
	events := startStream(t, cli, g.Addrs(), "get events", "get", "events", "-o", "json", "desiredState.workloads")
	logs := startStream(t, cli, g.Addrs(), "logs -f", "logs", "-f", "counter")
	// A second logs -f with --tail, which resumes from a count it took
	// before following.
	logsTail := startStream(t, cli, g.Addrs(), "logs -f --tail 5", "logs", "-f", "--tail", "5", "counter")

	watch.waitFor(t, wctx, "the counter row", func(out, _ string) bool { return strings.Contains(out, "counter") })
	logs.waitFor(t, wctx, "50 lines", func(out, _ string) bool { return strings.Count(out, "\n") >= 50 })
	logsTail.waitFor(t, wctx, "10 lines", func(out, _ string) bool { return strings.Count(out, "\n") >= 10 })
	apply("before", addedWorkload("before"))
	events.waitFor(t, wctx, "the event of 'before'", func(out, _ string) bool { return strings.Contains(out, "desiredState.workloads.before") })
	watch.waitFor(t, wctx, "the 'before' row", func(out, _ string) bool { return strings.Contains(out, "before") })

	leader, err := g.WaitLeader(wctx)
	if err != nil {
		t.Fatal(err)
	}
	old := g.Replicas[leader].Name
	g.Kill(leader)
	next, err := g.WaitLeader(wctx)
	if err != nil {
		t.Fatal(err)
	}
	notice := regexp.MustCompile(`leader changed: ` + regexp.QuoteMeta(old) + ` -> ` + regexp.QuoteMeta(g.Replicas[next].Name) + `; resumed`)
	for _, p := range []*streamProc{watch, events, logs, logsTail} {
		p.waitFor(t, wctx, "the resume notice", func(_, errOut string) bool { return notice.MatchString(errOut) })
	}
	linesAtKill := strings.Count(logs.out.String(), "\n")

	// Changes after the failover reach the resumed streams.
	addrs := g.LeaderFirst(leader)
	path := filepath.Join(dir, "after.yaml")
	if err := os.WriteFile(path, []byte(addedWorkload("after")), 0o644); err != nil {
		t.Fatal(err)
	}
	e2eRun(t, cli, addrs, "apply", "--no-wait", path)
	events.waitFor(t, wctx, "the event of 'after'", func(out, _ string) bool { return strings.Contains(out, "desiredState.workloads.after") })
	watch.waitFor(t, wctx, "the 'after' row", func(out, _ string) bool { return strings.Contains(out, "after") })
	logs.waitFor(t, wctx, "100 lines past the kill", func(out, _ string) bool { return strings.Count(out, "\n") >= linesAtKill+100 })
	logsTail.waitFor(t, wctx, "lines past the kill", func(out, _ string) bool { return strings.Count(out, "\n") >= linesAtKill+50 })

	for _, p := range []*streamProc{watch, events, logs, logsTail} {
		p.interrupt(t, wctx)
	}

	// logs: line n, n+1, ... with no gap and no double.
	checkCounted := func(p *streamProc, first int) {
		t.Helper()
		lines := strings.Split(strings.TrimSuffix(p.out.String(), "\n"), "\n")
		for i, l := range lines {
			want := "line " + strconv.Itoa(first+i)
			if i == 0 && p == logsTail {
				n, err := strconv.Atoi(strings.TrimPrefix(l, "line "))
				if err != nil {
					t.Fatalf("%s: first line %q", p.name, l)
				}
				first, want = n, l
			}
			if l != want {
				t.Fatalf("%s: line %d is %q, want %q (a line lost or doubled)\n%s", p.name, i+1, l, want, tail(p.out.String()))
			}
		}
	}
	checkCounted(logs, 1)
	checkCounted(logsTail, 0)

	// events: one event each for 'before' and 'after', none repeated.
	seen := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(events.out.String()), "\n") {
		var ev struct {
			AddedFields []string `json:"addedFields"`
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("events: %q: %v", l, err)
		}
		for _, f := range ev.AddedFields {
			seen[f]++
		}
	}
	for _, w := range []string{"before", "after"} {
		if n := seen["desiredState.workloads."+w]; n != 1 {
			t.Fatalf("events: %d events added %s, want 1\n%s", n, w, events.out.String())
		}
	}

	// watch: no table printed twice in a row; a resume shows it only if
	// it changed.
	blocks := strings.Split(strings.TrimSpace(watch.out.String()), "\n\n")
	for i := 1; i < len(blocks); i++ {
		if blocks[i] == blocks[i-1] {
			t.Fatalf("watch: table %d repeats the one before:\n%s", i+1, watch.out.String())
		}
	}
	t.Logf("leader %s killed, %s took over; the four streams resumed:\n%s%s%s%s", old, g.Replicas[next].Name,
		watch.err.String(), events.err.String(), logs.err.String(), logsTail.err.String())
}

// e2eRun runs the CLI to completion; a non-zero exit fails the test.
func e2eRun(t *testing.T, bin string, addrs []string, args ...string) string {
	t.Helper()
	full := append([]string{"-k", "--server-url", strings.Join(addrs, ",")}, args...)
	out, err := exec.Command(bin, full...).CombinedOutput()
	if err != nil {
		t.Fatalf("grapnel %s: %v\n%s", strings.Join(full, " "), err, out)
	}
	return string(out)
}
