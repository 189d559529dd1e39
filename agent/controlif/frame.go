package controlif

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/rpc/controlapi"
)

// maxFrame bounds one message from a workload: 4 MiB, the largest request
// the server's gRPC endpoint takes anyway.
const maxFrame = 4 << 20

// errFrame marks a frame that cannot be a ToAnkaios message: a length
// prefix that is not a varint, a length over maxFrame, or bytes that are
// not protobuf. The frame's bytes are consumed, so the stream stays usable.
var errFrame = errors.New("could not decode protobuf data")

// readFrame reads one message from a workload, framed as a protobuf varint
// length followed by that many bytes.
//
// io.EOF means the writer went away between frames and
// io.ErrUnexpectedEOF in the middle of one (the partial frame is dropped);
// errFrame wraps a frame that could not be decoded; any other error comes
// from the reader.
//
// swdd~agent-uses-length-delimited-protobuf-for-pipes~1
func readFrame(r *bufio.Reader) (*controlapi.ToAnkaios, error) {
	size, err := readLength(r)
	if err != nil {
		return nil, err
	}
	if size > maxFrame {
		if _, err := io.CopyN(io.Discard, r, int64(size)); err != nil {
			return nil, unexpected(err)
		}
		return nil, fmt.Errorf("%w: message of %d bytes is over the limit of %d", errFrame, size, maxFrame)
	}
	// Read incrementally: a length prefix alone must not cost maxFrame.
	body, err := io.ReadAll(io.LimitReader(r, int64(size)))
	if err != nil {
		return nil, unexpected(err)
	}
	if uint64(len(body)) < size {
		return nil, io.ErrUnexpectedEOF
	}
	msg := &controlapi.ToAnkaios{}
	if err := proto.Unmarshal(body, msg); err != nil {
		return nil, fmt.Errorf("%w: %v", errFrame, err)
	}
	return msg, nil
}

// readLength reads the varint length prefix; a prefix that runs past ten
// bytes or overflows 64 bits is consumed and reported as errFrame.
func readLength(r *bufio.Reader) (uint64, error) {
	var buf [binary.MaxVarintLen64]byte
	for i := range buf {
		b, err := r.ReadByte()
		if err != nil {
			if i > 0 {
				return 0, unexpected(err)
			}
			return 0, err
		}
		buf[i] = b
		if b < 0x80 {
			size, n := binary.Uvarint(buf[:i+1])
			if n <= 0 {
				return 0, fmt.Errorf("%w: length prefix overflows 64 bits", errFrame)
			}
			return size, nil
		}
	}
	return 0, fmt.Errorf("%w: length prefix is longer than %d bytes", errFrame, binary.MaxVarintLen64)
}

// unexpected turns an EOF inside a frame into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// encodeFrame frames a message for a workload.
//
// swdd~agent-uses-length-delimited-protobuf-for-pipes~1
func encodeFrame(m *controlapi.FromAnkaios) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(proto.Size(m) + binary.MaxVarintLen64)
	if _, err := protodelim.MarshalTo(&b, m); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
