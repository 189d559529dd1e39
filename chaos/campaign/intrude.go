package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/grapnel-io/grapnel/chaos/check"
	"github.com/grapnel-io/grapnel/chaos/clients"
	"github.com/grapnel-io/grapnel/chaos/intruder"
	"github.com/grapnel-io/grapnel/chaos/pki"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// The names an accepted intrusion would leave in the cluster.
const (
	intruderServer   = "intruder_srv"
	intruderWorkload = "intruder_wl"
	replayWorkload   = "chaos_replay"
	// intruderHold is how long the intruder stays in gossip: a leader
	// that admitted servers from gossip promoted one within about 3 s.
	intruderHold = 6 * time.Second
	// intruderBound bounds the whole intrusion.
	intruderBound = 2 * time.Minute
)

// intrude runs the intruder fault: it records an operator's update on
// its way to the leader, sets the workload to another value, and runs
// `grapnel-chaos intrude` in the client namespace (a host that is not a
// replica), watching every replica's Raft configuration meanwhile. Then
// it looks for what an accepted attempt would have left.
func intrude(ctx context.Context, c *cluster, s Step) (injected, error) {
	in := newFault(s.Kind, "every replica")
	defer func() { in.fault.Healed = time.Now() }()
	if c.pki == nil {
		in.fault.Detail = "insecure campaign: no intruder"
		return in, nil
	}
	l, _, err := findLeader(ctx, c, s.Pick)
	if err != nil {
		return in, err
	}
	leaderAddr := hostAddr(c.reps[l].host, GRPCPort)
	capture := filepath.Join(c.dir, fmt.Sprintf("intruder-%d-capture.bin", time.Now().UnixNano()))
	if err := recordUpdate(ctx, c.pki, leaderAddr, capture, "replayed"); err != nil {
		return in, fmt.Errorf("recording an operator's update: %w", err)
	}
	if err := writeValue(ctx, c.clientOptions(), replayWorkload, "current"); err != nil {
		return in, fmt.Errorf("the update after the recording: %w", err)
	}

	cfg := intruder.Config{WrongRole: c.pki.WrongRole, Foreign: c.pki.Foreign, Replay: capture, ReplayTo: leaderAddr,
		GossipName: intruderServer, Workload: intruderWorkload, Agent: pki.IntruderAgent, Hold: s.Hold}
	for _, r := range c.reps {
		cfg.Targets = append(cfg.Targets, intruder.Target{Name: r.name, GRPC: hostAddr(r.host, GRPCPort),
			Raft: hostAddr(r.host, RaftPort), Gossip: hostAddr(r.host, GossipPort)})
	}
	base := strings.TrimSuffix(capture, "-capture.bin")
	cfgPath, outPath := base+".json", base+"-attempts.json"
	b, err := json.Marshal(cfg)
	if err != nil {
		return in, err
	}
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		return in, err
	}

	var finding check.IntruderFinding
	wctx, stopWatch := context.WithCancel(ctx)
	var watched sync.WaitGroup
	watched.Go(func() { finding.Traces = watchMembership(wctx, c, intruderServer) })
	p, err := startProc("intruder", c.net.Command(c.net.Client(), c.selfBin, "intrude", "--config", cfgPath, "--out", outPath), base+".log")
	if err == nil {
		err = p.waitBound(intruderBound)
	}
	stopWatch()
	watched.Wait()
	if err != nil {
		return in, fmt.Errorf("the intruder: %w", err)
	}
	attempts, err := intruder.Load(outPath)
	if err != nil {
		return in, err
	}
	finding.Attempts = len(attempts)
	for _, a := range attempts {
		if a.Accepted {
			finding.Accepted = append(finding.Accepted, fmt.Sprintf("%s %s: %s (%s)", a.Target, a.Channel, a.What, a.Detail))
		}
	}
	finding.Traces = append(finding.Traces, stateTraces(ctx, c)...)
	in.intrusion = &finding
	in.fault.Detail = fmt.Sprintf("%d attempts, %d accepted, %d traces", finding.Attempts, len(finding.Accepted), len(finding.Traces))
	return in, nil
}

// watchMembership polls every replica's view until ctx ends and returns
// the sightings of id in a Raft configuration (gossip alone does not
// count: gossip is where a replica might be, not who votes).
func watchMembership(ctx context.Context, c *cluster, id string) []string {
	seen := map[string]bool{}
	var out []string
	for ctx.Err() == nil {
		for _, st := range c.statuses(ctx) {
			if st == nil {
				continue
			}
			for _, m := range st.GetMembers() {
				if m.GetId() == id && (m.GetVoter() || (m.GetRole() != "" && m.GetRole() != "unknown")) {
					key := st.GetReplicaId() + "/" + m.GetRole()
					if !seen[key] {
						seen[key] = true
						out = append(out, fmt.Sprintf("%s in %s's Raft configuration as %s", id, st.GetReplicaId(), m.GetRole()))
					}
				}
			}
		}
		sleep(ctx, 200*time.Millisecond)
	}
	return out
}

// stateTraces reads the state through the leader for what an accepted
// attempt would have left: the intruder's agent or workload, or the
// replayed value back in place of the later one.
func stateTraces(ctx context.Context, c *cluster) []string {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := client.Dial(qctx, c.clientOptions())
	if err != nil {
		return []string{"no state to check: " + err.Error()}
	}
	defer conn.Close()
	resp, err := conn.Request(qctx, &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: []string{"desiredState.workloads", "agents"}}}})
	if err != nil {
		return []string{"no state to check: " + err.Error()}
	}
	cs := resp.GetCompleteStateResponse().GetCompleteState()
	var out []string
	wls := cs.GetDesiredState().GetWorkloads().GetWorkloads()
	if _, ok := wls[intruderWorkload]; ok {
		out = append(out, "the workload "+intruderWorkload+" in the desired state")
	}
	if _, ok := cs.GetAgents().GetAgents()[pki.IntruderAgent]; ok {
		out = append(out, "the agent "+pki.IntruderAgent+" in the agent map")
	}
	if v, err := clients.ParseValue(wls[replayWorkload].GetRuntimeConfig()); err != nil || v != "current" {
		out = append(out, fmt.Sprintf("%s holding %q instead of the later value (a replayed update took effect, or the value is gone: %v)", replayWorkload, v, err))
	}
	return out
}

// writeValue sets workload name to carry value, as a chaos client writes
// a key.
func writeValue(ctx context.Context, o client.Options, name, value string) error {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := client.Dial(qctx, o)
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := conn.Request(qctx, updateRequest(name, value))
	if err != nil {
		return err
	}
	if resp.GetUpdateStateSuccess() == nil {
		return fmt.Errorf("answered %v", resp.GetResponseContent())
	}
	return nil
}

func updateRequest(name, value string) *ankbase.Request {
	wl := &ankbase.Workload{Runtime: ptrTo(clients.Runtime), RuntimeConfig: ptrTo(clients.RuntimeConfig(value))}
	return &ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{UpdateStateRequest: &ankbase.UpdateStateRequest{
		NewState: &ankbase.CompleteState{DesiredState: &ankbase.State{ApiVersion: "v1",
			Workloads: &ankbase.WorkloadMap{Workloads: map[string]*ankbase.Workload{name: wl}}}},
		UpdateMask: []string{"desiredState.workloads." + name}}}}
}

// recordUpdate sends an operator's update of replayWorkload to the
// leader on a connection whose every written byte is kept, as a sniffer
// on the vehicle network would see them, and saves them to path.
func recordUpdate(ctx context.Context, p *pki.Set, addr, path, value string) error {
	tc, err := rpc.ClientTLSConfig(p.Operator, rpc.ServerName)
	if err != nil {
		return err
	}
	rec := &recorder{}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", a)
			if err != nil {
				return nil, err
			}
			return &recordedConn{Conn: conn, rec: rec}, nil
		}))
	if err != nil {
		return err
	}
	defer cc.Close()
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := wire.KindCLI.Open(qctx, cc)
	if err != nil {
		return err
	}
	req := updateRequest(replayWorkload, value)
	req.RequestId = "recorded"
	for _, m := range []*grpcapi.ToServer{
		{ToServerEnum: &grpcapi.ToServer_CommanderHello{CommanderHello: &grpcapi.CommanderHello{ProtocolVersion: rpc.ProtocolVersion}}},
		{ToServerEnum: &grpcapi.ToServer_Request{Request: req}},
	} {
		if err := st.Send(m); err != nil {
			return err
		}
	}
	for {
		m, err := st.Recv()
		if err != nil {
			return err
		}
		if r := m.GetResponse(); r.GetRequestId() == "recorded" {
			if r.GetUpdateStateSuccess() == nil {
				return fmt.Errorf("answered %v", r.GetResponseContent())
			}
			break
		}
	}
	_ = st.CloseSend()
	data := rec.bytes()
	if len(data) == 0 {
		return errors.New("nothing was recorded")
	}
	return os.WriteFile(path, data, 0o600)
}

// recorder keeps what a connection wrote.
type recorder struct {
	mu  sync.Mutex
	buf []byte
}

func (r *recorder) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]byte(nil), r.buf...)
}

type recordedConn struct {
	net.Conn
	rec *recorder
}

func (c *recordedConn) Write(b []byte) (int, error) {
	c.rec.mu.Lock()
	c.rec.buf = append(c.rec.buf, b...)
	c.rec.mu.Unlock()
	return c.Conn.Write(b)
}

func ptrTo[T any](v T) *T { return &v }
