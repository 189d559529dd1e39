package fsm

import (
	"encoding/binary"
	"fmt"
)

// A batch body is a sequence of commands, each its length as a uvarint
// followed by the command exactly as Encode wrote it (type byte first).
// The commands apply in order, under one hold of the FSM's lock, all at
// the batch's Raft index: a reader sees all of a batch or none of it. A
// batch never holds a batch.

// BatchResponse is what Apply returns for a batch: the response of each
// command, in order, as Apply would have returned it for that command
// alone (nil, an error, or the type's response).
type BatchResponse []any

// EncodeBatch wraps encoded commands into one BatchType command. The
// commands are copied; cmds may be reused.
func EncodeBatch(cmds [][]byte) ([]byte, error) {
	size := 1
	for i, c := range cmds {
		if len(c) == 0 {
			return nil, fmt.Errorf("encode %s: %w: command %d is empty", BatchType, ErrBadCommand, i)
		}
		if MessageType(c[0]) == BatchType {
			return nil, fmt.Errorf("encode %s: %w: command %d is itself a batch", BatchType, ErrBadCommand, i)
		}
		size += binary.MaxVarintLen64 + len(c)
	}
	buf := make([]byte, 1, size)
	buf[0] = byte(BatchType)
	for _, c := range cmds {
		buf = binary.AppendUvarint(buf, uint64(len(c)))
		buf = append(buf, c...)
	}
	return buf, nil
}

// SplitBatch returns the commands of a BatchType command as EncodeBatch
// got them. The slices share cmd.
func SplitBatch(cmd []byte) ([][]byte, error) {
	if len(cmd) == 0 || MessageType(cmd[0]) != BatchType {
		return nil, fmt.Errorf("%w: not a %s command", ErrBadCommand, BatchType)
	}
	return splitBatch(cmd[1:])
}

// splitBatch returns the commands of a batch body. The slices share buf.
func splitBatch(buf []byte) ([][]byte, error) {
	var cmds [][]byte
	for len(buf) > 0 {
		n, k := binary.Uvarint(buf)
		// Only EncodeBatch writes batches, and it writes the shortest
		// form; anything else is damage.
		if k <= 0 || k != len(binary.AppendUvarint(nil, n)) {
			return nil, fmt.Errorf("command %d: bad length", len(cmds))
		}
		buf = buf[k:]
		if n == 0 || n > uint64(len(buf)) {
			return nil, fmt.Errorf("command %d: length %d, %d bytes left", len(cmds), n, len(buf))
		}
		if MessageType(buf[0]) == BatchType {
			return nil, fmt.Errorf("command %d: a batch inside a batch", len(cmds))
		}
		cmds = append(cmds, buf[:n])
		buf = buf[n:]
	}
	return cmds, nil
}

// decodeBatch decodes every command of a batch body before any is
// applied, so that a batch applies whole or halts the FSM untouched.
func decodeBatch(buf []byte) ([]Command, error) {
	cmds, err := splitBatch(buf)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUndecodable, BatchType, err)
	}
	out := make([]Command, len(cmds))
	for i, c := range cmds {
		body, err := decodeApplicable(MessageType(c[0]), c[1:])
		if err != nil {
			return nil, fmt.Errorf("command %d: %w", i, err)
		}
		out[i] = body // nil for a type older replicas may skip
	}
	return out, nil
}

// applyBatchLocked applies each command of a decoded batch at index.
func (f *FSM) applyBatchLocked(cmds []Command, index uint64) BatchResponse {
	out := make(BatchResponse, len(cmds))
	// No reader sees the store until the batch is applied, so its
	// desired-state updates copy the desired state once, not each.
	// Inside ApplyBatch the run is already open and stays open.
	if !f.store.InBatch() {
		f.store.BeginBatch()
		defer f.store.EndBatch()
	}
	for i, c := range cmds {
		out[i] = f.executeLocked(c, index)
	}
	return out
}
