// Command sdkapp speaks the control interface the way the Ankaios SDKs
// do: it opens the FIFOs at the fixed path /run/ankaios/control_interface
// (never ANKAIOS_CONTROL_INTERFACE), sends the Hello with the protocol
// version as length-delimited control_api messages, waits for
// ControlInterfaceAccepted, asks for its own workload in the desired
// state, and exits 0 only when the answer carries it.
package main

import (
	"bufio"
	"fmt"
	"os"

	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/controlapi"
)

const dir = "/run/ankaios/control_interface"

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Println("sdk app:", err)
		os.Exit(1)
	}
	fmt.Println("sdk app: answered through", dir)
}

func run(self string) error {
	out, err := os.OpenFile(dir+"/output", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer out.Close()
	send := func(m *controlapi.ToAnkaios) error {
		_, err := protodelim.MarshalTo(out, m)
		return err
	}
	if err := send(&controlapi.ToAnkaios{ToAnkaiosEnum: &controlapi.ToAnkaios_Hello{
		Hello: &controlapi.Hello{ProtocolVersion: rpc.ProtocolVersion}}}); err != nil {
		return err
	}
	inFile, err := os.OpenFile(dir+"/input", os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer inFile.Close()
	in := bufio.NewReader(inFile)
	recv := func() (*controlapi.FromAnkaios, error) {
		m := &controlapi.FromAnkaios{}
		return m, protodelim.UnmarshalFrom(in, m)
	}
	m, err := recv()
	if err != nil {
		return err
	}
	if m.GetControlInterfaceAccepted() == nil {
		return fmt.Errorf("the Hello was answered with %v", m)
	}
	if err := send(&controlapi.ToAnkaios{ToAnkaiosEnum: &controlapi.ToAnkaios_Request{Request: &ankbase.Request{
		RequestId: "sdk-1", RequestContent: &ankbase.Request_CompleteStateRequest{
			CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: []string{"desiredState.workloads." + self}}}}}}); err != nil {
		return err
	}
	for {
		m, err := recv()
		if err != nil {
			return err
		}
		r := m.GetResponse()
		if r.GetRequestId() != "sdk-1" {
			continue
		}
		if _, ok := r.GetCompleteStateResponse().GetCompleteState().GetDesiredState().GetWorkloads().GetWorkloads()[self]; !ok {
			return fmt.Errorf("the answer lacks the workload %s: %v", self, r)
		}
		return nil
	}
}
