package server

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/server/metrics"
	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

// podmanWorkload is a manifest adding one podman workload on agent_A.
func podmanWorkload(t *testing.T, name, opts string) state.Tree {
	return manifest(t, "workloads:\n  "+name+":\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: |\n      image: img\n      commandOptions: ["+opts+"]\n")
}

// templated holds a workload whose podman options come from a config
// item, which an update may change without touching the workload.
const templated = `
apiVersion: v1
workloads:
  tpl:
    runtime: podman
    agent: agent_A
    configs: {o: opts}
    runtimeConfig: |
      image: img
      commandOptions: ["{{o}}"]
configs:
  opts: "--rm"
`

// Requirement (issue 27, hole 3): the server checks its workload policy
// when an update adds or changes a workload, after rendering: the audit's
// --privileged and -v /:/host, and the same smuggled in through a config
// item, are refused at baseline naming the field and the levels, counted,
// and nothing is stored; the dry-run names the field; a server at
// privileged accepts them.
func TestUpdateRefusedByWorkloadPolicy(t *testing.T) {
	m := metrics.NewSet()
	ts := startServerCfg(t, t.TempDir(), mustState(t, templated), func(c *Config) { c.Metrics = m })
	cli := ts.cli()
	var revision uint64
	ts.store(func(s *state.Store) { revision = s.Revision })
	for _, tc := range []struct {
		name string
		req  state.Tree
		mask string
		want string
	}{
		{"--privileged", podmanWorkload(t, "evil", `"--rm", "--privileged"`), "desiredState.workloads.evil",
			`desiredState.workloads.evil.runtimeConfig.commandOptions[1]: "--privileged" gives the container every capability`},
		{"the host's root mounted", podmanWorkload(t, "evil", `"-v", "/:/host"`), "desiredState.workloads.evil",
			`desiredState.workloads.evil.runtimeConfig.commandOptions[0]: "-v /:/host" mounts the host path "/"`},
		{"smuggled through a config item", manifest(t, "configs:\n  opts: --privileged\n"), "desiredState.configs.opts",
			`desiredState.workloads.tpl.runtimeConfig.commandOptions[0]: "--privileged"`},
	} {
		r := cli.request(updateRequest(t, tc.req, tc.mask))
		msg := r.GetError().GetMessage()
		for _, w := range []string{"Update rejected", tc.want, "needs the workload policy privileged, and the servers' --workload-policy is baseline"} {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: answer %v does not name %q", tc.name, r, w)
			}
		}
	}
	ts.store(func(s *state.Store) {
		if s.Revision != revision {
			t.Errorf("refused updates changed the desired state: revision %d, was %d", s.Revision, revision)
		}
	})
	var text bytes.Buffer
	if _, err := m.Registry.WriteTo(&text); err != nil {
		t.Fatal(err)
	}
	if want := `grapnel_workload_policy_refused_total{check="level"} 3`; !strings.Contains(text.String(), want) {
		t.Errorf("metrics lack %s:\n%s", want, text.String())
	}
	// What baseline admits goes through.
	if r := cli.request(updateRequest(t, podmanWorkload(t, "web", `"-p", "8080:80", "-v", "data:/data"`), "desiredState.workloads.web")); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("a baseline workload answered %v", r)
	}

	priv := startServerCfg(t, t.TempDir(), mustState(t, templated), func(c *Config) { c.WorkloadPolicy = workloadpolicy.Privileged })
	if r := priv.cli().request(updateRequest(t, podmanWorkload(t, "evil", `"--privileged", "-v", "/:/host"`), "desiredState.workloads.evil")); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("a server at privileged answered %v", r)
	}
}

// The dry-run lists the policy's refusal with its field, as the update
// would meet it; at restricted a plain container lacks what restricted
// requires.
func TestDryRunNamesThePolicyField(t *testing.T) {
	st := storeOf(t, templated)
	for _, tc := range []struct {
		level workloadpolicy.Level
		next  string
		field string
		words string
	}{
		{workloadpolicy.Baseline, "apiVersion: v1\nworkloads:\n  evil:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: \"image: i\\ncommandOptions: [--pid=host]\"\n",
			"desiredState.workloads.evil.runtimeConfig.commandOptions[0]", "shares the host's PID namespace"},
		{workloadpolicy.Baseline, "apiVersion: v1\nworkloads:\n  p:\n    runtime: process\n    agent: agent_A\n    runtimeConfig: \"command: sh\\nuser: root\"\n",
			"desiredState.workloads.p.runtimeConfig.user", `"root" is root`},
		{workloadpolicy.Restricted, "apiVersion: v1\nworkloads:\n  plain:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: \"image: i\"\n",
			"desiredState.workloads.plain.runtimeConfig.commandOptions", "restricted needs --cap-drop=ALL"},
	} {
		l := planLeader(st, state.DefaultLimits())
		l.s.policy = serverPolicy(tc.level)
		resp := l.dryRun(replaceAll(t, tc.next), "", l.s.operatorAdmission())
		if resp.GetAccepted() || len(resp.GetRejections()) != 1 {
			t.Fatalf("%s: dry-run %v, want one rejection", tc.level, resp.GetRejections())
		}
		if r := resp.GetRejections()[0]; r.GetField() != tc.field || !strings.Contains(r.GetMessage(), tc.words) || !strings.Contains(r.GetMessage(), "is "+tc.level.String()) {
			t.Errorf("%s: rejection %q (field %q), want field %q and %q", tc.level, r.GetMessage(), r.GetField(), tc.field, tc.words)
		}
		_, err := l.planUpdate(replaceAll(t, tc.next), l.s.operatorAdmission(), plan.Guard{})
		var r *workloadpolicy.Refusal
		if !errors.As(err, &r) || !errors.Is(err, state.ErrInvalid) {
			t.Errorf("%s: the update's error %v is not the policy's refusal", tc.level, err)
		}
	}
}

// tlsUpdate sends one UpdateState of tree on a CLI stream to addr over
// mutual TLS as the holder of f, and returns the answer.
func tlsUpdate(t *testing.T, addr string, f rpc.TLSFiles, tree state.Tree, masks ...string) *ankbase.Response {
	t.Helper()
	req := updateRequest(t, tree, masks...)
	req.RequestId = "u1"
	st := tlsStream(t, addr, f, wire.KindCLI, commanderHello(rpc.ProtocolVersion))
	if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: req}}); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		if r := m.GetResponse(); r.GetRequestId() == "u1" {
			return r
		}
	}
}

// Requirement (issue 27): a commander (an OTA client) may deploy and
// change workloads but not widen their privileges: a change of a
// workload's runtime, of its process user, or of its podman security
// options, and a new workload carrying any of them, are refused naming
// the commander, the workload and what widened, at the leader and through
// a follower, on the stream and in Plan.DryRun and Plan.Apply; an
// operator's same changes go through.
func TestCommanderCannotWidenPrivileges(t *testing.T) {
	c := startRolesCluster(t)
	proc := func(rc string) state.Tree {
		return manifest(t, "workloads:\n  w:\n    runtime: process\n    agent: agent_A\n    runtimeConfig: "+strconv.Quote(rc)+"\n")
	}
	const mask = "desiredState.workloads.w"
	if r := tlsUpdate(t, c.l.addr, c.operator, proc("command: sleep"), mask); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("the operator's workload: %v", r)
	}
	widening := []struct {
		name string
		tree state.Tree
		mask string
		want string
	}{
		{"a process user", proc("command: sleep\nuser: '60123'"), mask, "it adds runtimeConfig.user (user 60123)"},
		{"the runtime", podmanWorkload(t, "w", `"--rm"`), mask, "it changes the runtime from 'process' to 'podman'"},
		{"a new workload with a named volume", podmanWorkload(t, "v", `"-v", "data:/d"`), "desiredState.workloads.v", "workload 'v': it adds runtimeConfig.commandOptions[0] (--volume=data:/d)"},
		{"a new workload with a capability", podmanWorkload(t, "v", `"--cap-add=KILL"`), "desiredState.workloads.v", "--cap-add=KILL"},
	}
	for _, via := range []*replica{c.l, c.f} {
		for _, tc := range widening {
			r := tlsUpdate(t, via.addr, c.commander, tc.tree, tc.mask)
			msg := r.GetError().GetMessage()
			for _, w := range []string{"commander 'ota'", "may not widen the privileges of workload", tc.want, "only an operator may"} {
				if !strings.Contains(msg, w) {
					t.Errorf("%s via %s: answer %v does not name %q", tc.name, via.id, r, w)
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	plan := grapnelpb.NewPlanClient(tlsConn(t, c.f.addr, c.commander))
	upd := updateRequest(t, widening[0].tree, mask).GetUpdateStateRequest()
	dry, err := plan.DryRun(ctx, &grapnelpb.PlanRequest{Update: upd})
	if err != nil || dry.GetAccepted() || len(dry.GetRejections()) != 1 || !strings.Contains(dry.GetRejections()[0].GetMessage(), "commander 'ota' via replica") {
		t.Errorf("the commander's dry-run: %v, %v", dry.GetRejections(), err)
	}
	if _, err := plan.Apply(ctx, &grapnelpb.ApplyRequest{Update: upd, ExpectedSeq: dry.GetSeq()}); err == nil || !strings.Contains(err.Error(), "may not widen the privileges of workload 'w'") {
		t.Errorf("the commander's Plan.Apply: %v", err)
	}

	// What widens nothing is the commander's to change.
	if r := tlsUpdate(t, c.l.addr, c.commander, proc("command: sleep\nargs: ['5']"), mask); r.GetUpdateStateSuccess() == nil {
		t.Errorf("the commander's harmless change: %v", r)
	}
	if r := tlsUpdate(t, c.l.addr, c.commander, podmanWorkload(t, "web", `"-p", "8080:80", "--cap-drop=ALL", "--user=1000"`), "desiredState.workloads.web"); r.GetUpdateStateSuccess() == nil {
		t.Errorf("the commander's new workload without grants: %v", r)
	}
	// The operator may: the same changes go through.
	for _, tc := range widening[:2] {
		if r := tlsUpdate(t, c.f.addr, c.operator, tc.tree, tc.mask); r.GetUpdateStateSuccess() == nil {
			t.Errorf("the operator's %s: %v", tc.name, r)
		}
	}
	var out bytes.Buffer
	if _, err := c.metrics.Registry.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	if want := `grapnel_workload_policy_refused_total{check="widening"} 9`; !strings.Contains(out.String(), want) {
		t.Errorf("metrics lack %s", want)
	}
}
