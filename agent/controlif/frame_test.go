package controlif

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/controlapi"
)

func helloMsg(v string) *controlapi.ToAnkaios {
	return &controlapi.ToAnkaios{ToAnkaiosEnum: &controlapi.ToAnkaios_Hello{Hello: &controlapi.Hello{ProtocolVersion: v}}}
}

func requestMsg(r *ankbase.Request) *controlapi.ToAnkaios {
	return &controlapi.ToAnkaios{ToAnkaiosEnum: &controlapi.ToAnkaios_Request{Request: r}}
}

func delimited(t testing.TB, ms ...proto.Message) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, m := range ms {
		if _, err := protodelim.MarshalTo(&b, m); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// swdd~agent-uses-length-delimited-protobuf-for-pipes~1
func TestReadFrame(t *testing.T) {
	hello := helloMsg("1.0.0")
	req := requestMsg(readReq("desiredState"))
	good := delimited(t, hello, req)
	bigLen := binary.AppendUvarint(nil, maxFrame+1)
	tests := []struct {
		name  string
		input []byte
		// want lists per frame: the message, or the error it gives.
		want []any
	}{
		{"two messages then EOF", good, []any{hello, req, io.EOF}},
		{"empty input", nil, []any{io.EOF}},
		{"EOF inside the length", []byte{0x80}, []any{io.ErrUnexpectedEOF}},
		{"EOF inside the body", good[:len(good)-1], []any{hello, io.ErrUnexpectedEOF}},
		{"zero length is an empty message", []byte{0}, []any{&controlapi.ToAnkaios{}, io.EOF}},
		{"garbage body, then a good frame", append([]byte{2, 0xff, 0xff}, delimited(t, hello)...), []any{errFrame, hello, io.EOF}},
		{"length prefix over ten bytes", bytes.Repeat([]byte{0xff}, 11), []any{errFrame, io.ErrUnexpectedEOF}},
		{"length overflowing 64 bits", append(bytes.Repeat([]byte{0xff}, 9), 0x7f), []any{errFrame, io.EOF}},
		{"too large frame is skipped", append(append(bigLen, make([]byte, maxFrame+1)...), delimited(t, hello)...), []any{errFrame, hello, io.EOF}},
		{"too large frame cut short", append(bigLen, 1, 2, 3), []any{io.ErrUnexpectedEOF}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReader(bytes.NewReader(tt.input))
			for i, w := range tt.want {
				got, err := readFrame(br)
				switch w := w.(type) {
				case error:
					if !errors.Is(err, w) {
						t.Fatalf("frame %d: err %v, want %v", i, err, w)
					}
				case proto.Message:
					if err != nil || !proto.Equal(got, w) {
						t.Fatalf("frame %d: got %v, %v; want %v", i, got, err, w)
					}
				}
			}
		})
	}
}

func TestEncodeFrameRoundTrip(t *testing.T) {
	m := &controlapi.FromAnkaios{FromAnkaiosEnum: &controlapi.FromAnkaios_ConnectionClosed{
		ConnectionClosed: &controlapi.ConnectionClosed{Reason: reasonHelloMissing}}}
	b, err := encodeFrame(m)
	if err != nil {
		t.Fatal(err)
	}
	got := &controlapi.FromAnkaios{}
	if err := protodelim.UnmarshalFrom(bufio.NewReader(bytes.NewReader(b)), got); err != nil || !proto.Equal(got, m) {
		t.Fatalf("round trip: %v, %v", got, err)
	}
}

// FuzzReadFrame feeds arbitrary bytes to the frame decoder: it must never
// panic, must always make progress, and must give back exactly the
// messages of a well-formed stream.
func FuzzReadFrame(f *testing.F) {
	f.Add(delimited(f, helloMsg("1.0.0")))
	f.Add(delimited(f, helloMsg("1.0.0"), requestMsg(readReq("desiredState.workloads")), requestMsg(writeReq())))
	f.Add(delimited(f, requestMsg(logsReq("a", "b"))))
	f.Add([]byte{0x80})
	f.Add([]byte{0})
	f.Add([]byte{3, 0x0a, 0x01})
	f.Add(bytes.Repeat([]byte{0xff}, 12))
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReader(bytes.NewReader(data))
		for frames := 0; ; frames++ {
			if frames > len(data) {
				t.Fatalf("%d frames from %d bytes", frames, len(data))
			}
			msg, err := readFrame(br)
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return
			}
			if err != nil && !errors.Is(err, errFrame) {
				t.Fatalf("unexpected error %v", err)
			}
			if err == nil {
				// A decoded message survives a round trip through the framing.
				again, err := readFrame(bufio.NewReader(bytes.NewReader(delimited(t, msg))))
				if err != nil || !proto.Equal(again, msg) {
					t.Fatalf("round trip of %v: %v, %v", msg, again, err)
				}
			}
		}
	})
}
