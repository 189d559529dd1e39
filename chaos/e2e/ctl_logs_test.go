package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/controlapi"
	"github.com/grapnel-io/grapnel/state"
)

// A workload's control interface reaches the leader through its agent:
// the test plays the workload on the FIFOs the agent created (the process
// runtime gives their directory in ANKAIOS_CONTROL_INTERFACE), gets its
// Hello accepted, reads the desired state its rule allows, and is refused
// what it does not.
func TestControlInterfaceThroughTheLeader(t *testing.T) {
	e := start(t, map[string][]string{"agent_A": {"process"}})
	e.apply(`apiVersion: v1
workloads:
  ctl:
    agent: agent_A
    runtime: process
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: Read
          filterMasks: ["desiredState.workloads"]
    runtimeConfig: |
      command: /bin/sh
      args: ["-c", "echo \"dir=$ANKAIOS_CONTROL_INTERFACE\"; exec sleep 3600"]
`)
	ws := e.waitStates("ctl running", map[string]state.ExecutionState{"ctl": running})
	inst, _ := bench.StateOf(ws, "ctl")
	dir := filepath.Join(e.agents["agent_A"].RunFolder, "agent_A_io", inst.Instance.String(), "control_interface")
	if out := e.cli("logs", "ctl"); !strings.Contains(out, "dir="+dir) {
		t.Fatalf("the workload was not told its control interface %s: %q", dir, out)
	}

	toAgent, err := os.OpenFile(filepath.Join(dir, "output"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer toAgent.Close()
	// As a workload does: the read end of `input` opens (blocking) once
	// the agent opens it to write, i.e. when it has an answer.
	type opened struct {
		f   *os.File
		err error
	}
	inCh := make(chan opened, 1)
	go func() {
		f, err := os.OpenFile(filepath.Join(dir, "input"), os.O_RDONLY, 0)
		inCh <- opened{f, err}
	}()
	var in *bufio.Reader
	send := func(m *controlapi.ToAnkaios) {
		t.Helper()
		if _, err := protodelim.MarshalTo(toAgent, m); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() *controlapi.FromAnkaios {
		t.Helper()
		type result struct {
			m   *controlapi.FromAnkaios
			err error
		}
		ch := make(chan result, 1)
		go func() {
			m := &controlapi.FromAnkaios{}
			err := protodelim.UnmarshalFrom(in, m)
			ch <- result{m, err}
		}()
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatal(r.err)
			}
			return r.m
		case <-time.After(30 * time.Second):
			t.Fatal("no answer on the control interface")
			return nil
		}
	}
	request := func(id string, mask string) *controlapi.ToAnkaios {
		return &controlapi.ToAnkaios{ToAnkaiosEnum: &controlapi.ToAnkaios_Request{Request: &ankbase.Request{
			RequestId: id, RequestContent: &ankbase.Request_CompleteStateRequest{
				CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: []string{mask}}}}}}
	}

	send(&controlapi.ToAnkaios{ToAnkaiosEnum: &controlapi.ToAnkaios_Hello{Hello: &controlapi.Hello{ProtocolVersion: rpc.ProtocolVersion}}})
	select {
	case o := <-inCh:
		if o.err != nil {
			t.Fatal(o.err)
		}
		defer o.f.Close()
		in = bufio.NewReader(o.f)
	case <-time.After(30 * time.Second):
		t.Fatal("the agent never opened input to answer the Hello")
	}
	if recv().GetControlInterfaceAccepted() == nil {
		t.Fatal("Hello not accepted")
	}
	send(request("allowed", "desiredState.workloads.ctl"))
	resp := recv().GetResponse()
	if resp.GetRequestId() != "allowed" {
		t.Fatalf("answer %v", resp)
	}
	if _, ok := resp.GetCompleteStateResponse().GetCompleteState().GetDesiredState().GetWorkloads().GetWorkloads()["ctl"]; !ok {
		t.Fatalf("the leader's answer lacks the workload: %v", resp)
	}
	send(request("denied", "agents"))
	if r := recv().GetResponse(); r.GetRequestId() != "denied" || r.GetError().GetMessage() != "Access denied" {
		t.Fatalf("a request outside the rules got %v", r)
	}
}

// grapnel logs reaches both runtimes: --tail of a process and of a
// container, and --follow that keeps delivering new lines.
func TestLogsOfBothRuntimes(t *testing.T) {
	withPodman := podmanReady(t)
	rts := []string{"process"}
	if withPodman {
		rts = append(rts, "podman")
	}
	e := start(t, map[string][]string{"agent_A": rts})
	m := `apiVersion: v1
workloads:
  talker:
    agent: agent_A
    runtime: process
    runtimeConfig: |
      command: /bin/sh
      args: ["-c", "echo first; echo second; i=0; while true; do i=$((i+1)); echo tick$i; sleep 0.2; done"]
`
	want := map[string]state.ExecutionState{"talker": running}
	if withPodman {
		m += `  boxed:
    agent: agent_A
    runtime: podman
    runtimeConfig: |
      image: ` + testImage + `
      commandArgs: ["sh", "-c", "echo boxed-first; echo boxed-second; exec sleep 3600"]
`
		want["boxed"] = running
	}
	e.apply(m)
	e.waitStates("running", want)
	// Output appears after Running: read until the wanted line is there.
	waitLog := func(args []string, line string) string {
		t.Helper()
		var out string
		testwait.For(t, 30*time.Second, func() bool {
			out = e.cli(append([]string{"logs"}, args...)...)
			return strings.Contains(out, line)
		}, "grapnel logs %v to show %q (last: %q)", args, line, testwait.Lazy(func() string { return out }))
		return out
	}
	waitLog([]string{"talker"}, "second")
	if out := waitLog([]string{"--tail", "1", "talker"}, "tick"); strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("--tail 1 printed more than one line: %q", out)
	}
	if withPodman {
		out := waitLog([]string{"--tail", "1", "boxed"}, "boxed-second")
		if strings.Contains(out, "boxed-first") {
			t.Fatalf("--tail 1 of the container printed %q", out)
		}
	}

	// --follow keeps delivering: wait for two new ticks, then stop it.
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bins["grapnel"], "-k", "--server-url", strings.Join(e.g.Addrs(), ","), "logs", "-f", "--tail", "0", "talker")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	ticks := 0
	for ticks < 2 && sc.Scan() {
		if strings.Contains(sc.Text(), "tick") {
			ticks++
		}
	}
	if ticks < 2 {
		t.Fatalf("--follow delivered %d new lines (%v)", ticks, sc.Err())
	}
}
