package fsm

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"

	"github.com/grapnel-io/grapnel/state"
)

// ClusterVersion is the store's cluster version (state.ClusterVersion),
// read without the lock: the leader's gates ask it for every entry they
// might write.
func (f *FSM) ClusterVersion() uint32 { return f.clusterVersion.Load() }

// copyClusterVersionLocked makes the lock-free copy of the store's
// cluster version.
func (f *FSM) copyClusterVersionLocked() { f.clusterVersion.Store(f.store.ClusterVersion) }

// ClusterVersionEntry encodes the command that raises the cluster version
// to v.
func ClusterVersionEntry(v uint32) ([]byte, error) {
	return Encode(&SetClusterVersionRequest{Version: v})
}

// tooNew refuses a command that raises the cluster version past what this
// build reads: from that entry on the log may hold formats it would
// misread, so the FSM halts there (HaltError) instead, naming both.
func tooNew(c Command) error {
	r, ok := c.(*SetClusterVersionRequest)
	if !ok || r.Version <= state.MaxClusterVersion {
		return nil
	}
	return fmt.Errorf("%w: the cluster version was raised to %d, and this build reads cluster versions up to %d: "+
		"run a release that supports cluster version %d on this replica (docs/upgrade.md)",
		ErrNewerFormat, r.Version, state.MaxClusterVersion, r.Version)
}

// ClusterVersionOf reads the cluster version a snapshot records (the
// baseline when it records none) without decoding its other records, for
// the check a replica makes before it starts on a data directory.
func ClusterVersionOf(r io.Reader) (uint32, error) {
	br := bufio.NewReader(r)
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != snapshotMagic {
		return 0, fmt.Errorf("%w: bad magic", ErrBadSnapshot)
	}
	for range 2 { // version, index
		if _, err := binary.ReadUvarint(br); err != nil {
			return 0, fmt.Errorf("%w: truncated in the header", ErrBadSnapshot)
		}
	}
	for {
		t, err := br.ReadByte()
		if err != nil {
			return 0, fmt.Errorf("%w: truncated: no end record", ErrBadSnapshot)
		}
		if SnapshotType(t) == snapEnd {
			return state.ClusterVersionBaseline, nil
		}
		n, err := binary.ReadUvarint(br)
		if err != nil || n > maxRecordBytes {
			return 0, fmt.Errorf("%w: a record's length is damaged", ErrBadSnapshot)
		}
		if SnapshotType(t) != SnapClusterVersion {
			if _, err := io.CopyN(io.Discard, br, int64(n)); err != nil {
				return 0, fmt.Errorf("%w: truncated in a record", ErrBadSnapshot)
			}
			continue
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			return 0, fmt.Errorf("%w: truncated in the cluster version record", ErrBadSnapshot)
		}
		var rec clusterVersionRecord
		if err := json.Unmarshal(body, &rec); err != nil {
			return 0, fmt.Errorf("%w: the cluster version record: %v", ErrBadSnapshot, err)
		}
		return rec.Version, nil
	}
}

// EntryClusterVersion is the cluster version a log entry raises the
// cluster to, and whether it is such an entry.
func EntryClusterVersion(data []byte) (uint32, bool) {
	if len(data) == 0 || MessageType(data[0]) != SetClusterVersionType {
		return 0, false
	}
	_, c, err := Decode(data)
	if err != nil {
		return 0, false
	}
	r, ok := c.(*SetClusterVersionRequest)
	return r.Version, ok
}
