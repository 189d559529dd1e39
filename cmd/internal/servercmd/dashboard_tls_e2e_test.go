package servercmd

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/chaos/pki"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
)

// Requirement (issue 27, hole 1): with mutual TLS the dashboard reads a
// workload's logs as its viewer, on the leader's dashboard and on a
// follower's, which proxies the stream to the leader. The replica
// forwards the viewer's identity with the viewer's own certificate, which
// its guard and the leader's believe only from the replica itself and
// from a member's proxy.
func TestDashboardLogsOverMTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test: builds the binaries, runs three replicas and an agent over mTLS")
	}
	bins := e2eBuild(t, "grapnel-server", "grapnel", "grapnel-agent")
	dir := t.TempDir()
	set, err := pki.Make(filepath.Join(dir, "pki"), []string{"r1", "r2", "r3"}, []string{"agent_A"}, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	g := e2eGrapnel(t, bench.GrapnelConfig{Bin: bins["grapnel-server"], Dir: dir, Replicas: 3, UI: true, PKI: set}, 30)
	var agent *bench.Agent
	t.Cleanup(func() {
		if agent != nil {
			agent.Kill()
			if t.Failed() {
				t.Logf("%s", bench.LogTail(agent.LogPath, 30))
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	leader, err := g.WaitHealthy(wctx)
	wcancel()
	if err != nil {
		t.Fatal(err)
	}
	a := set.Agents["agent_A"]
	agent, err = bench.StartAgent(bench.AgentConfig{Bin: bins["grapnel-agent"], Dir: dir, Name: "agent_A", Servers: g.Addrs(), Runtimes: []string{"process"}, TLS: &a})
	if err != nil {
		t.Fatal(err)
	}
	op := set.Operator
	cli := func(args ...string) {
		t.Helper()
		full := append([]string{"--no-wait", "--server-url", strings.Join(g.Addrs(), ","), "--ca_pem", op.CA, "--crt_pem", op.Cert, "--key_pem", op.Key}, args...)
		if out, err := exec.Command(bins["grapnel"], full...).CombinedOutput(); err != nil {
			t.Fatalf("grapnel %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	manifest := filepath.Join(dir, "talker.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: v1
workloads:
  talker:
    runtime: process
    agent: agent_A
    runtimeConfig: |
      command: /bin/sh
      args: ["-c", "echo hello-over-mtls; exec sleep 3600"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cli("apply", manifest)
	t.Cleanup(func() { cli("delete", "workload", "talker") })

	tc, err := rpc.ClientTLSConfig(op, rpc.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	follower := (leader + 1) % len(g.Replicas)
	for _, i := range []int{leader, follower} {
		r := g.Replicas[i]
		testwait.For(t, 30*time.Second, func() bool {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			defer rcancel()
			req, _ := http.NewRequestWithContext(rctx, http.MethodGet, "https://"+r.UIAddr+"/api/workloads/talker/logs?tail=5", nil)
			resp, err := client.Do(req)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return false
			}
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.Contains(sc.Text(), "hello-over-mtls") {
					return true
				}
			}
			return false
		}, "the talker's log line on %s's dashboard (leader %v)", r.Name, i == leader)
	}
}
