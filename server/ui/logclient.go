package ui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/authz"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// logRequests numbers the dashboard's log requests.
var logRequests atomic.Uint64

// GRPCLogs is the LogSource that runs a log campaign the way `grapnel
// logs` does: a CliConnection to dial() (this replica's own gRPC
// address: a follower proxies it to the leader, whose log campaign asks
// the hosting agents), a CommanderHello, a LogsRequest, the entries until
// every source stopped or ctx ends, when the stream's end cancels the
// campaign on the leader.
func GRPCLogs(dial func() (*grpc.ClientConn, error)) LogSource {
	return func(ctx context.Context, instances []state.InstanceName, tail int, line func(instance, text string)) error {
		cc, err := dial()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if v, ok := viewer(ctx); ok {
			// The stream goes out with the replica's certificate; the
			// replica's guard takes the viewer's identity from these
			// headers (believed from this replica itself, with the
			// viewer's own certificate), so the request has the viewer's
			// rights, not the replica's.
			ctx = metadata.AppendToOutgoingContext(ctx, wire.ForwardedIdentityKey, authz.Encode(v.id), wire.ForwardedCertKey, v.certs)
		}
		st, err := grpcapi.NewCliConnectionClient(cc).ConnectCli(ctx)
		if err != nil {
			return err
		}
		defer st.CloseSend()
		if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_CommanderHello{
			CommanderHello: &grpcapi.CommanderHello{ProtocolVersion: rpc.ProtocolVersion}}}); err != nil {
			return err
		}
		t := int32(tail)
		follow := true
		req := &ankbase.LogsRequest{Tail: &t, Follow: &follow}
		open := map[string]bool{}
		for _, n := range instances {
			req.WorkloadNames = append(req.WorkloadNames, rpc.InstanceNameToProto(n))
			open[n.String()] = true
		}
		id := "dashboard-logs-" + strconv.FormatUint(logRequests.Add(1), 10)
		if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: &ankbase.Request{
			RequestId: id, RequestContent: &ankbase.Request_LogsRequest{LogsRequest: req}}}}); err != nil {
			return err
		}
		for {
			msg, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return errors.New("the server ended the logs stream")
			}
			if err != nil {
				return err
			}
			resp := msg.GetResponse()
			if resp == nil {
				continue // the stream carries this one request only
			}
			switch {
			case resp.GetError() != nil:
				return fmt.Errorf("logs request failed: %s", resp.GetError().GetMessage())
			case resp.GetLogEntriesResponse() != nil:
				for _, e := range resp.GetLogEntriesResponse().GetLogEntries() {
					line(e.GetWorkloadName().GetWorkloadName(), e.GetMessage())
				}
			case resp.GetLogsStopResponse() != nil:
				delete(open, rpc.InstanceNameFromProto(resp.GetLogsStopResponse().GetWorkloadName()).String())
				if len(open) == 0 {
					return nil
				}
			}
		}
	}
}
