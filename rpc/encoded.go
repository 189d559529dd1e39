package rpc

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	// The default proto codec registers itself; it must be there before
	// init wraps it.
	_ "google.golang.org/grpc/encoding/proto"
)

// Encoded is a protobuf message marshalled once, to be sent as it is on
// many streams: a broadcast to every agent and CLI would otherwise
// marshal the same message once per stream.
type Encoded struct {
	b []byte
}

// Encode marshals m for sending with Stream.SendMsg.
func Encode(m proto.Message) (*Encoded, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", m, err)
	}
	return &Encoded{b: b}, nil
}

// Len is the size of the encoded message.
func (e *Encoded) Len() int { return len(e.b) }

// passthroughCodec is gRPC's proto codec that also sends an *Encoded as
// its bytes. It keeps the name "proto", so peers see nothing different.
type passthroughCodec struct {
	encoding.CodecV2
}

func (c passthroughCodec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*Encoded); ok {
		return mem.BufferSlice{mem.SliceBuffer(e.b)}, nil
	}
	return c.CodecV2.Marshal(v)
}

func init() {
	base := encoding.GetCodecV2("proto")
	if base == nil {
		panic("rpc: gRPC's proto codec is not registered")
	}
	encoding.RegisterCodecV2(passthroughCodec{CodecV2: base})
}
