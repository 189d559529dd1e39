package clients

import (
	"context"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
)

// FinalRead reads the keys' values from the leader once a run is over,
// for check.NoLostAcks; a key absent from the map is deleted.
func FinalRead(ctx context.Context, o client.Options, keys []string) (map[string]string, error) {
	conn, err := client.Dial(ctx, o)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	masks := make([]string, len(keys))
	for i, k := range keys {
		masks[i] = "desiredState.workloads." + k
	}
	resp, err := conn.Request(ctx, &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: masks}}})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for name, wl := range resp.GetCompleteStateResponse().GetCompleteState().GetDesiredState().GetWorkloads().GetWorkloads() {
		v, err := ParseValue(wl.GetRuntimeConfig())
		if err != nil {
			v = "unparsable: " + wl.GetRuntimeConfig()
		}
		out[name] = v
	}
	return out, nil
}
