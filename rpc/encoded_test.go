package rpc

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
)

// The process's "proto" codec sends an *Encoded as the bytes it holds and
// still marshals ordinary messages, so peers see the same wire.
func TestEncodedPassesThroughTheProtoCodec(t *testing.T) {
	msg := &ankbase.Response{RequestId: "r1"}
	enc, err := Encode(msg)
	if err != nil {
		t.Fatal(err)
	}
	codec := encoding.GetCodecV2("proto")
	viaEncoded, err := codec.Marshal(enc)
	if err != nil {
		t.Fatal(err)
	}
	viaMessage, err := codec.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := proto.Marshal(msg)
	if !bytes.Equal(viaEncoded.Materialize(), want) || !bytes.Equal(viaMessage.Materialize(), want) || enc.Len() != len(want) {
		t.Fatalf("encoded %x, message %x, want %x", viaEncoded.Materialize(), viaMessage.Materialize(), want)
	}
	var back ankbase.Response
	if err := codec.Unmarshal(viaEncoded, &back); err != nil || back.GetRequestId() != "r1" {
		t.Fatalf("round trip: %v, %v", &back, err)
	}
}
