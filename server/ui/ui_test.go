package ui

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/internal/changefeed"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/rpctest"
	"github.com/grapnel-io/grapnel/server/secrets"
	"github.com/grapnel-io/grapnel/state"
)

// Requirement: with TLS on, the dashboard takes the API's identities and
// lets only operators and commanders in; others get 403 naming them.
func TestOnlyOperatorsAndCommandersSeeTheDashboard(t *testing.T) {
	ca := rpctest.NewCA(t)
	srvTLS, err := rpc.ServerTLSConfig(ca.IssueIdentity(t, "replica", identity.Replica, "r1", identity.ServerSAN))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(New(Config{}))
	hs.TLS = srvTLS
	hs.StartTLS()
	defer hs.Close()
	for _, tc := range []struct {
		role     identity.Role
		name     string
		wantCode int
		wantBody string
	}{
		{identity.Operator, "alice", http.StatusOK, "<title>Grapnel</title>"},
		{identity.Commander, "hmi", http.StatusOK, "<title>Grapnel</title>"},
		{identity.Agent, "agent_A", http.StatusForbidden, "agent agent_A may not view the dashboard"},
		{identity.Replica, "r2", http.StatusForbidden, "replica r2 may not view the dashboard"},
	} {
		t.Run(tc.role.String(), func(t *testing.T) {
			cfg, err := rpc.ClientTLSConfig(ca.IssueIdentity(t, tc.name, tc.role, tc.name), identity.ServerSAN)
			if err != nil {
				t.Fatal(err)
			}
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
			defer c.CloseIdleConnections()
			resp, err := c.Get(hs.URL + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantCode || !strings.Contains(string(body), tc.wantBody) {
				t.Fatalf("status %d body %q; want %d with %q", resp.StatusCode, body, tc.wantCode, tc.wantBody)
			}
		})
	}
	// No client certificate: the TLS handshake itself refuses.
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if resp, err := c.Get(hs.URL + "/"); err == nil {
		resp.Body.Close()
		t.Fatalf("a browser without a client certificate got status %d", resp.StatusCode)
	}
}

// Requirement: a workload's rendered config shows secrets as the mask.
func TestDetailMasksSecrets(t *testing.T) {
	k, err := secrets.ParseKeyring([]byte("k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="))
	if err != nil {
		t.Fatal(err)
	}
	token, err := k.Seal("hunter2")
	if err != nil {
		t.Fatal(err)
	}
	st := state.NewStore()
	w := &state.Workload{Agent: "agent_A", Runtime: "podman", RuntimeConfig: "image: db\nenv: {PW: \"{{secret_pw}}\"}\n"}
	st.Desired.Workloads["db"] = w
	in := state.InstanceName{WorkloadName: "db", AgentName: "agent_A", ID: "abc"}
	st.Rendered["db"] = state.Rendered{Instance: in, Workload: &state.Workload{Agent: "agent_A", Runtime: "podman",
		RuntimeConfig: "image: db\nenv: {PW: \"" + token + "\"}\n"}}
	st.States.Set(in, state.RunningOk)
	d, ok := detail("db", st, nil)
	if !ok {
		t.Fatal("no detail for db")
	}
	if strings.Contains(d.RenderedConfig, token) || strings.Contains(d.RenderedConfig, "hunter2") || !strings.Contains(d.RenderedConfig, secrets.Mask) {
		t.Fatalf("rendered config %q: want the secret masked as %s", d.RenderedConfig, secrets.Mask)
	}
	if len(d.Instances) != 1 || d.Instances[0].State != string(state.StateRunning) {
		t.Fatalf("instances %+v: want db on agent_A Running", d.Instances)
	}
	if _, ok := detail("nope", st, nil); ok {
		t.Fatal("a workload not in the desired state has a detail")
	}
}

// Requirement: the dashboard costs nothing while nobody looks: the events
// stream subscribes to the change feeds only while a browser is
// connected, and ends with it.
func TestEventsStreamOnlyWhileConnected(t *testing.T) {
	c := clustertest.New(t, 1)
	node := c.WaitLeader(10 * time.Second)
	feed := changefeed.New()
	h := New(Config{Node: node, FSM: c.FSM(node.ID()), Feed: feed})
	defer h.Close()
	hs := httptest.NewServer(h)
	defer hs.Close()
	if n := feed.Subscribers(); n != 0 {
		t.Fatalf("%d subscribers before any page opened", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q, %v: want an event", line, err)
	}
	var o Overview
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &o); err != nil {
		t.Fatal(err)
	}
	if o.Replica != node.ID() || o.Leader != node.ID() || len(o.Replicas) != 1 || !o.Replicas[0].Leader {
		t.Fatalf("overview %+v: want replica and leader %s", o, node.ID())
	}
	if n := feed.Subscribers(); n != 1 {
		t.Fatalf("%d subscribers with one page open, want 1", n)
	}
	cancel()
	testwait.For(t, 5*time.Second, func() bool { return feed.Subscribers() == 0 }, "the stream ends with its page")
}

// Requirement (issue 28, point 1): the dashboard shows the release of
// every replica (gossip) and, on the leader's page, of every agent (the
// leader's memory); a follower's page says it does not know the agents'.
func TestOverviewShowsReleases(t *testing.T) {
	st := state.NewStore()
	st.Agents["agent_A"] = &state.AgentAttributes{}
	st.Agents["agent_B"] = &state.AgentAttributes{}
	members := []cluster.Member{{ID: "r1", Leader: true, Version: "0.4.0-dev"}, {ID: "r2", Version: "0.3.0"}}
	o := overview("r1", "r1", 2, 10, members, st, map[string]string{"agent_A": "0.4.0-dev", "agent_B": "ankaios"}, nil)
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"agentReleases":true`, `"id":"r1"`, `"release":"0.4.0-dev"`, `"release":"0.3.0"`,
		`"name":"agent_A","mode":"Active","connected":true,"workloads":0,"release":"0.4.0-dev"`,
		`"name":"agent_B","mode":"Active","connected":true,"workloads":0,"release":"ankaios"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("overview lacks %s:\n%s", want, b)
		}
	}
	follower := overview("r2", "r1", 2, 10, members, st, nil, nil)
	if follower.AgentReleases || follower.Agents[0].Release != "" || follower.Replicas[1].Release != "0.3.0" {
		t.Fatalf("follower's overview: %+v", follower)
	}
	page, err := assets.ReadFile("assets/app.js")
	if err != nil || !strings.Contains(string(page), "a.release") || !strings.Contains(string(page), "r.release") {
		t.Fatalf("the page draws no release (%v)", err)
	}
}

// Requirement (issue 29 point 3): the dashboard's replicas table says
// which replica's storage failed, and why.
func TestOverviewShowsStorageFailed(t *testing.T) {
	const fault = "append log entries wal/1.wal: no space left on device"
	members := []cluster.Member{{ID: "r1", Leader: true, Healthy: true}, {ID: "r2", StorageFailed: fault}}
	o := overview("r1", "r1", 2, 10, members, state.NewStore(), nil, nil)
	if o.Replicas[0].StorageFailed != "" || o.Replicas[1].StorageFailed != fault {
		t.Fatalf("replicas %+v", o.Replicas)
	}
	b, err := json.Marshal(o)
	if err != nil || !strings.Contains(string(b), `"storageFailed":"`+fault+`"`) || strings.Count(string(b), "storageFailed") != 1 {
		t.Fatalf("overview %s (%v)", b, err)
	}
	page, err := assets.ReadFile("assets/app.js")
	if err != nil || !strings.Contains(string(page), "r.storageFailed") {
		t.Fatalf("the page draws no storage fault (%v)", err)
	}
}

// Requirement (issue 31 points 4 and 5): the dashboard shows the open
// problems (replicated, so a follower's page too), oldest first, with
// their objects and descriptions.
func TestOverviewShowsProblems(t *testing.T) {
	st := state.NewStore()
	st.Problems.OpenProblem(state.Problem{Kind: "ReplicaDown", Key: "ReplicaDown/r3", Summary: "Replica r3 is down: it does not answer the leader in time.",
		Detail: "Voter r3 …", Objects: []state.ProblemObject{{Kind: "replica", Name: "r3"}}})
	st.Problems.OpenProblem(state.Problem{Kind: "QuorumAtRisk", Key: "QuorumAtRisk/voters", Summary: "Quorum is at risk: 2 of 3 voting replicas are reachable, exactly a quorum.",
		Objects: []state.ProblemObject{{Kind: "replica", Name: "r3"}}})
	st.Problems.Open["ReplicaDown/r3"].SinceMs = 100
	st.Problems.UpdateProblem(state.Problem{Key: "ReplicaDown/r3", Summary: "Replica r3 is down: gossip reports it dead.", Detail: "Voter r3 …",
		Objects: []state.ProblemObject{{Kind: "replica", Name: "r3"}}}, 250)
	o := overview("r2", "r1", 2, 10, nil, st, nil, nil)
	if len(o.Problems) != 2 || o.Problems[0].SinceMs != 100 || o.Problems[0].LastUpdatedMs != 250 || o.Problems[0].Kind != "ReplicaDown" || o.Problems[0].ID != 1 || o.Problems[1].Kind != "QuorumAtRisk" ||
		!slices.Equal(o.Problems[0].Objects, []string{"replica r3"}) || o.Problems[0].Detail != "Voter r3 …" {
		t.Fatalf("problems %+v", o.Problems)
	}
	if empty := overview("r1", "r1", 2, 10, nil, state.NewStore(), nil, nil); empty.Problems == nil {
		t.Fatal("no problems must be an empty list, not null: the page iterates it")
	}
	page, err := assets.ReadFile("assets/app.js")
	if err != nil || !strings.Contains(string(page), "ov.problems") {
		t.Fatalf("the page draws no problems (%v)", err)
	}
}
