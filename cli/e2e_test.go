package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

// The end-to-end tests run the CLI commands against a real grapnel-server
// (one replica, insecure) and a scripted agent that reports every workload
// it gets as running, every deleted one as removed, and answers log
// requests with one line per workload.

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := clustertest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// startServer starts grapnel-server (built once per test process,
// bench.BuildCommands); it skips the test when the
// server does not build (it is written alongside this package).
func startServer(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	bins, err := bench.BuildCommands(t.TempDir(), "grapnel-server")
	if err != nil && os.Getenv(bench.BinDirEnv) != "" {
		t.Fatal(err) // not a build failure: the directory make test passes lacks it
	} else if err != nil {
		t.Skipf("grapnel-server does not build: %v", err)
	}
	bin := bins["grapnel-server"]
	addr := freeAddr(t)
	var logs bytes.Buffer
	srv := exec.Command(bin, "-k", "--data-dir", t.TempDir(), "-a", addr, "--raft-address", freeAddr(t), "--log-level", "warn")
	srv.Stdout, srv.Stderr = &logs, &logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Kill()
		srv.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return addr
}

// e2eSession dials the server, retrying while it elects itself leader.
func e2eSession(t *testing.T, addr string) (*Session, *syncbuf.Buffer) {
	t.Helper()
	var (
		s   *Session
		out *syncbuf.Buffer
		err error
	)
	testwait.For(t, 15*time.Second, func() bool {
		var c *client.Conn
		c, err = client.Dial(context.Background(), client.Options{Addrs: []string{addr}, Insecure: true, ResponseTimeout: 3 * time.Second})
		if err != nil {
			return false
		}
		s, out = liveSession(c)
		s.Timeout = 3 * time.Second
		if _, err = s.CompleteState(context.Background(), nil); err != nil {
			c.Close()
			return false
		}
		t.Cleanup(func() { c.Close() })
		return true
	}, "the server at %s ready (%v)", addr, testwait.Lazy(func() string { return fmt.Sprint(err) }))
	return s, out
}

// scriptedAgent is a minimal agent on the AgentConnection stream.
type scriptedAgent struct {
	name   string
	stream grpc.BidiStreamingClient[grpcapi.ToServer, grpcapi.FromServer]
	sendMu sync.Mutex
}

func startAgent(t *testing.T, addr, name string) *scriptedAgent {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); cc.Close() })
	stream, err := grpcapi.NewAgentConnectionClient(cc).ConnectAgent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a := &scriptedAgent{name: name, stream: stream}
	a.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{AgentName: name, ProtocolVersion: rpc.ProtocolVersion}}})
	go a.run()
	return a
}

func (a *scriptedAgent) send(m *grpcapi.ToServer) {
	a.sendMu.Lock()
	defer a.sendMu.Unlock()
	_ = a.stream.Send(m)
}

func (a *scriptedAgent) report(n *ankbase.WorkloadInstanceName, e state.ExecutionState) {
	a.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_UpdateWorkloadState{UpdateWorkloadState: &grpcapi.UpdateWorkloadState{
		WorkloadStates: []*ankbase.WorkloadState{{InstanceName: n, ExecutionState: rpc.ExecutionStateToProto(e)}},
	}}})
}

func (a *scriptedAgent) run() {
	for {
		m, err := a.stream.Recv()
		if err != nil {
			return
		}
		var added []*grpcapi.AddedWorkload
		var deleted []*grpcapi.DeletedWorkload
		switch x := m.GetFromServerEnum().(type) {
		case *grpcapi.FromServer_ServerHello:
			added = x.ServerHello.GetAddedWorkloads()
		case *grpcapi.FromServer_UpdateWorkload:
			added, deleted = x.UpdateWorkload.GetAddedWorkloads(), x.UpdateWorkload.GetDeletedWorkloads()
		case *grpcapi.FromServer_LogsRequest:
			id := x.LogsRequest.GetRequestId()
			for _, n := range x.LogsRequest.GetLogsRequest().GetWorkloadNames() {
				a.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_LogEntriesResponse{LogEntriesResponse: &grpcapi.LogEntriesResponse{
					RequestId: id,
					LogEntriesResponse: &ankbase.LogEntriesResponse{LogEntries: []*ankbase.LogEntry{
						{WorkloadName: n, Message: "hello from " + n.GetWorkloadName()},
					}},
				}}})
				a.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_LogsStopResponse{LogsStopResponse: &grpcapi.LogsStopResponse{
					RequestId: id, LogsStopResponse: &ankbase.LogsStopResponse{WorkloadName: n},
				}}})
			}
		}
		for _, d := range deleted {
			a.report(d.GetInstanceName(), state.Removed)
		}
		for _, w := range added {
			a.report(w.GetInstanceName(), state.ExecutionState{State: state.StatePending, SubState: state.SubStarting})
			a.report(w.GetInstanceName(), state.RunningOk)
		}
	}
}

// startAgentConnected starts the scripted agent and waits until the
// server lists it.
func startAgentConnected(t *testing.T, s *Session, addr, name string) {
	t.Helper()
	startAgent(t, addr, name)
	testwait.For(t, 10*time.Second, func() bool {
		cs, err := s.CompleteState(context.Background(), []string{"agents"})
		return err == nil && node(cs, "agents", name) != nil
	}, "%s to connect", name)
}

func TestEndToEnd(t *testing.T) {
	addr := startServer(t)
	s, out := e2eSession(t, addr)
	ctx := context.Background()
	startAgentConnected(t, s, addr, "agent_A")

	dir := t.TempDir()
	manifest := filepath.Join(dir, "app.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: v1
workloads:
  web:
    agent: agent_A
    runtime: podman
    runtimeConfig: |
      image: nginx
  batch:
    agent: agent_offline
    runtime: podman
    runtimeConfig: "image: job"
configs:
  site: {title: hello}
`), 0o600); err != nil {
		t.Fatal(err)
	}

	step := func(name string, f func() error, want ...string) string {
		t.Helper()
		out.Reset()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := out.String()
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Fatalf("%s: output lacks %q:\n%s", name, w, got)
			}
		}
		return got
	}

	// apply waits until web runs (seen in the first table or as a
	// progress line, depending on timing); batch's agent is not connected,
	// so it is shown but not waited for. Only web can be running.
	step("apply", func() error { return s.Apply(ctx, []string{manifest}, nil, false) },
		"Successfully applied the manifest(s).",
		"batch           agent_offline   podman    Pending(Initial)",
		"Running(Ok)")

	step("get workloads", func() error { return s.GetWorkloads(ctx, WorkloadFilter{}, "") },
		"WORKLOAD NAME   AGENT           RUNTIME   EXECUTION STATE    ADDITIONAL INFO",
		"batch           agent_offline   podman    Pending(Initial)",
		"web             agent_A         podman    Running(Ok)")

	step("get agents", func() error { return s.GetAgents(ctx, "") },
		"NAME      WORKLOADS   CPU USAGE   FREE MEMORY",
		"agent_A   1")

	step("get configs", func() error { return s.GetConfigs(ctx, "") }, "CONFIG\nsite")

	got := step("get state", func() error { return s.GetState(ctx, []string{"desiredState.workloads.web"}, FormatYAML) },
		"desiredState:\n  apiVersion: v1\n  workloads:\n    web:\n      agent: agent_A\n")
	if strings.Contains(got, "batch") {
		t.Fatalf("mask not applied:\n%s", got)
	}

	step("logs", func() error { return s.Logs(ctx, LogsOptions{Workloads: []string{"web"}, Tail: -1}) }, "hello from web\n")

	// Events: deleting the config shows up as a removed field.
	evCtx, stopEvents := context.WithCancel(ctx)
	evSession, evOut := e2eSession(t, addr)
	evDone := make(chan error, 1)
	go func() { evDone <- evSession.GetEvents(evCtx, []string{"desiredState.configs"}, FormatJSON, true) }()
	testwait.For(t, 10*time.Second, func() bool { return strings.Contains(syncString(evSession), "\"completeState\"") }, "the current state event")
	step("delete config", func() error { return s.DeleteConfigs(ctx, []string{"site"}) })
	testwait.For(t, 10*time.Second, func() bool {
		return strings.Contains(syncString(evSession), `"removedFields":["desiredState.configs.site"]`)
	}, "the config event")
	stopEvents()
	if err := <-evDone; err != nil {
		t.Fatalf("get events: %v", err)
	}
	if n := strings.Count(evOut.String(), "\n"); n != 2 {
		t.Fatalf("want 2 JSON events, got:\n%s", evOut.String())
	}

	// A rejected update reports the server's message.
	cyc := filepath.Join(dir, "cycle.yaml")
	os.WriteFile(cyc, []byte(`apiVersion: v1
workloads:
  a: {agent: agent_A, runtime: podman, runtimeConfig: x, dependencies: {b: ADD_COND_RUNNING}}
  b: {agent: agent_A, runtime: podman, runtimeConfig: y, dependencies: {a: ADD_COND_RUNNING}}
`), 0o600)
	if err := s.Apply(ctx, []string{cyc}, nil, false); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("cyclic apply: err = %v, want the server's cycle error", err)
	}

	// delete waits until the agent reports web removed (in the table if
	// that happened before the wait began, else as a progress line).
	step("delete workload", func() error { return s.DeleteWorkloads(ctx, []string{"web"}) },
		"Removed")

	step("apply -d", func() error { return s.Apply(ctx, []string{manifest}, nil, true) })
	step("get workloads after all", func() error { return s.GetWorkloads(ctx, WorkloadFilter{}, "") })
	if got := strings.TrimSpace(out.String()); got != "WORKLOAD NAME   AGENT   RUNTIME   EXECUTION STATE   ADDITIONAL INFO" {
		t.Fatalf("workloads left:\n%s", got)
	}
}

// syncString reads a session's output while its command still writes it.
func syncString(s *Session) string {
	return s.Out.(*syncbuf.Buffer).String()
}
