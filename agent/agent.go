package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

// Config configures an agent.
type Config struct {
	Name     string
	Servers  []string
	Insecure bool
	TLS      rpc.TLSFiles
	Tags     map[string]string
	Logger   *slog.Logger
	// LoadInterval is how often CPU and memory are reported (2 s).
	LoadInterval time.Duration
	// RetryInterval is the pause before reconnecting (1 s, as Ankaios).
	RetryInterval time.Duration
}

// Run connects and serves until ctx ends, reconnecting after every loss.
// A protocol version refusal ends it with an error.
func Run(ctx context.Context, cfg Config) error {
	if !state.ValidName(cfg.Name) || cfg.Name == "" {
		return fmt.Errorf("agent name %q: must be non-empty and use only [a-zA-Z0-9_-]", cfg.Name)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LoadInterval == 0 {
		cfg.LoadInterval = 2 * time.Second
	}
	if cfg.RetryInterval == 0 {
		cfg.RetryInterval = time.Second
	}
	creds := insecure.NewCredentials()
	if !cfg.Insecure {
		tc, err := rpc.ClientTLSConfig(cfg.TLS, rpc.ServerName)
		if err != nil {
			return err
		}
		creds = credentials.NewTLS(tc)
	}
	for i := 0; ; i++ {
		addr := cfg.Servers[i%len(cfg.Servers)]
		err := session(ctx, cfg, addr, creds)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(rpc.FromStatus(err), rpc.ErrUnsupportedProtocol) {
			return err
		}
		cfg.Logger.Warn("connection to server lost; reconnecting", "server", addr, "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(cfg.RetryInterval):
		}
	}
}

// session runs one connection: hello, then answer the server and report
// load until the stream breaks.
func session(ctx context.Context, cfg Config, addr string, creds credentials.TransportCredentials) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := grpcapi.NewAgentConnectionClient(cc).ConnectAgent(ctx)
	if err != nil {
		return err
	}
	send := make(chan *grpcapi.ToServer, 64)
	send <- &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{
		AgentName: cfg.Name, ProtocolVersion: rpc.ProtocolVersion, Tags: &ankbase.Tags{Tags: cfg.Tags}}}}
	errCh := make(chan error, 2)
	go func() {
		for {
			select {
			case m := <-send:
				if err := st.Send(m); err != nil {
					errCh <- err
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { reportLoad(ctx, cfg, send) }()
	go func() {
		for {
			m, err := st.Recv()
			if err != nil {
				errCh <- err
				return
			}
			if states := answer(cfg.Name, m); len(states) > 0 {
				select {
				case send <- &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_UpdateWorkloadState{
					UpdateWorkloadState: &grpcapi.UpdateWorkloadState{WorkloadStates: rpc.WorkloadStatesToProto(states)}}}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	select {
	case err := <-errCh:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// answer reports the state of every workload the server hands over. No
// runtime is available yet, so additions fail as Ankaios reports a
// workload whose runtime the agent lacks; deletions complete at once.
func answer(agent string, m *grpcapi.FromServer) []state.WorkloadState {
	var added []*grpcapi.AddedWorkload
	var deleted []*grpcapi.DeletedWorkload
	switch {
	case m.GetServerHello() != nil:
		added = m.GetServerHello().GetAddedWorkloads()
	case m.GetUpdateWorkload() != nil:
		added = m.GetUpdateWorkload().GetAddedWorkloads()
		deleted = m.GetUpdateWorkload().GetDeletedWorkloads()
	}
	var out []state.WorkloadState
	for _, d := range deleted {
		out = append(out, state.WorkloadState{Instance: rpc.InstanceNameFromProto(d.GetInstanceName()), State: state.Removed})
	}
	for _, a := range added {
		out = append(out, state.WorkloadState{
			Instance: rpc.InstanceNameFromProto(a.GetInstanceName()),
			State: state.ExecutionState{State: state.StatePending, SubState: state.SubStartingFailed,
				AdditionalInfo: fmt.Sprintf("runtime '%s' is not available on agent '%s'", a.GetWorkload().GetRuntime(), agent)},
		})
	}
	return out
}

func reportLoad(ctx context.Context, cfg Config, send chan<- *grpcapi.ToServer) {
	prev, _ := readCPU()
	t := time.NewTicker(cfg.LoadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur, ok := readCPU()
		var pct uint32
		if ok {
			pct = cpuPercent(prev, cur)
			prev = cur
		}
		select {
		case send <- &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentLoadStatus{AgentLoadStatus: &grpcapi.AgentLoadStatus{
			AgentName: cfg.Name, CpuUsage: &ankbase.CpuUsage{CpuUsage: pct}, FreeMemory: &ankbase.FreeMemory{FreeMemory: freeMemory()}}}}:
		case <-ctx.Done():
			return
		}
	}
}
