package fsm

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/state"
)

// SnapshotType tags one record of a snapshot. Like MessageType, values are
// never renumbered or reused.
type SnapshotType uint8

// Snapshot record types.
const (
	SnapAPIVersion    SnapshotType = 1
	SnapWorkload      SnapshotType = 2
	SnapConfig        SnapshotType = 3
	SnapRendered      SnapshotType = 4
	SnapDeleteEdge    SnapshotType = 5
	SnapAgent         SnapshotType = 6
	SnapWorkloadState SnapshotType = 7
	SnapRevision      SnapshotType = 8
	SnapDesiredSeq    SnapshotType = 9
	SnapReportMark    SnapshotType = 10
	snapEnd           SnapshotType = 255
)

// AllSnapshotTypes lists every record type; the round-trip test fails if a
// type is missing from it.
var AllSnapshotTypes = []SnapshotType{SnapAPIVersion, SnapWorkload, SnapConfig, SnapRendered,
	SnapDeleteEdge, SnapAgent, SnapWorkloadState, SnapRevision, SnapDesiredSeq, SnapReportMark}

const snapshotMagic = "GRAPNEL-SNAPSHOT"
const snapshotVersion = 1

type workloadRecord struct {
	Name     string
	Workload *state.Workload
}

type configRecord struct {
	Key   string
	Value any
}

type renderedRecord struct {
	Name     string
	Rendered state.Rendered
}

type deleteEdgeRecord struct {
	Dependency, Dependent string
	Condition             state.DeleteCondition
}

type reportMarkRecord struct {
	Agent string
	Mark  state.ReportMark
}

type agentRecord struct {
	Name       string
	Attributes *state.AgentAttributes
}

// ErrBadSnapshot is returned for a snapshot that is not Grapnel's or is
// damaged.
var ErrBadSnapshot = errors.New("not a valid Grapnel snapshot")

type snapshot struct {
	store *state.Store
	index uint64
}

// Persist implements raft.FSMSnapshot.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := WriteSnapshot(sink, s.store, s.index); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *snapshot) Release() {}

// WriteSnapshot writes the header, then one record per object, in sorted
// order so equal stores give equal bytes.
func WriteSnapshot(w io.Writer, st *state.Store, index uint64) error {
	bw := bufio.NewWriter(w)
	hdr := make([]byte, 0, 32)
	hdr = append(hdr, snapshotMagic...)
	hdr = binary.AppendUvarint(hdr, snapshotVersion)
	hdr = binary.AppendUvarint(hdr, index)
	if _, err := bw.Write(hdr); err != nil {
		return err
	}
	rec := func(t SnapshotType, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("snapshot record %d: %w", t, err)
		}
		buf := binary.AppendUvarint([]byte{byte(t)}, uint64(len(b)))
		if _, err := bw.Write(buf); err != nil {
			return err
		}
		_, err = bw.Write(b)
		return err
	}
	if err := rec(SnapAPIVersion, st.Desired.APIVersion); err != nil {
		return err
	}
	if err := rec(SnapRevision, st.Revision); err != nil {
		return err
	}
	if err := rec(SnapDesiredSeq, st.DesiredSeq); err != nil {
		return err
	}
	for _, n := range state.SortedKeys(st.Desired.Workloads) {
		if err := rec(SnapWorkload, workloadRecord{n, st.Desired.Workloads[n]}); err != nil {
			return err
		}
	}
	for _, k := range state.SortedKeys(st.Desired.Configs) {
		if err := rec(SnapConfig, configRecord{k, st.Desired.Configs[k]}); err != nil {
			return err
		}
	}
	for _, n := range state.SortedKeys(st.Rendered) {
		if err := rec(SnapRendered, renderedRecord{n, st.Rendered[n]}); err != nil {
			return err
		}
	}
	for _, dep := range state.SortedKeys(st.DeleteGraph) {
		m := st.DeleteGraph[dep]
		for _, d := range state.SortedKeys(m) {
			if err := rec(SnapDeleteEdge, deleteEdgeRecord{dep, d, m[d]}); err != nil {
				return err
			}
		}
	}
	for _, n := range state.SortedKeys(st.Agents) {
		if err := rec(SnapAgent, agentRecord{n, st.Agents[n]}); err != nil {
			return err
		}
	}
	for _, ws := range st.States.All() {
		if err := rec(SnapWorkloadState, ws); err != nil {
			return err
		}
	}
	for _, a := range state.SortedKeys(st.ReportMarks) {
		if err := rec(SnapReportMark, reportMarkRecord{a, st.ReportMarks[a]}); err != nil {
			return err
		}
	}
	if err := bw.WriteByte(byte(snapEnd)); err != nil {
		return err
	}
	return bw.Flush()
}

// ReadSnapshot decodes a snapshot into a fresh store.
func ReadSnapshot(r io.Reader) (*state.Store, uint64, error) {
	br := bufio.NewReader(r)
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != snapshotMagic {
		return nil, 0, ErrBadSnapshot
	}
	ver, err := binary.ReadUvarint(br)
	if err != nil || ver != snapshotVersion {
		return nil, 0, fmt.Errorf("%w: version %d", ErrBadSnapshot, ver)
	}
	index, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	st := state.NewStore()
	for {
		tb, err := br.ReadByte()
		if err != nil {
			return nil, 0, fmt.Errorf("%w: truncated", ErrBadSnapshot)
		}
		t := SnapshotType(tb)
		if t == snapEnd {
			return st, index, nil
		}
		n, err := binary.ReadUvarint(br)
		if err != nil || n > 1<<30 {
			return nil, 0, fmt.Errorf("%w: bad record length", ErrBadSnapshot)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			return nil, 0, fmt.Errorf("%w: truncated record", ErrBadSnapshot)
		}
		if err := restoreRecord(st, t, body); err != nil {
			return nil, 0, err
		}
	}
}

func restoreRecord(st *state.Store, t SnapshotType, body []byte) error {
	var err error
	switch t {
	case SnapAPIVersion:
		err = json.Unmarshal(body, &st.Desired.APIVersion)
	case SnapRevision:
		err = json.Unmarshal(body, &st.Revision)
	case SnapDesiredSeq:
		err = json.Unmarshal(body, &st.DesiredSeq)
	case SnapReportMark:
		var r reportMarkRecord
		if err = json.Unmarshal(body, &r); err == nil {
			st.ReportMarks[r.Agent] = r.Mark
		}
	case SnapWorkload:
		var r workloadRecord
		if err = json.Unmarshal(body, &r); err == nil {
			st.Desired.Workloads[r.Name] = r.Workload
		}
	case SnapConfig:
		var r configRecord
		if err = json.Unmarshal(body, &r); err == nil {
			st.Desired.Configs[r.Key] = r.Value
		}
	case SnapRendered:
		var r renderedRecord
		if err = json.Unmarshal(body, &r); err == nil {
			st.Rendered[r.Name] = r.Rendered
		}
	case SnapDeleteEdge:
		var r deleteEdgeRecord
		if err = json.Unmarshal(body, &r); err == nil {
			m := st.DeleteGraph[r.Dependency]
			if m == nil {
				m = map[string]state.DeleteCondition{}
				st.DeleteGraph[r.Dependency] = m
			}
			m[r.Dependent] = r.Condition
		}
	case SnapAgent:
		var r agentRecord
		if err = json.Unmarshal(body, &r); err == nil {
			st.Agents[r.Name] = r.Attributes
		}
	case SnapWorkloadState:
		var r state.WorkloadState
		if err = json.Unmarshal(body, &r); err == nil {
			st.States.Set(r.Instance, r.State)
		}
	default:
		// Unknown record types come from a newer replica; skipping them
		// would silently lose state.
		return fmt.Errorf("%w: unknown record type %d", ErrBadSnapshot, t)
	}
	if err != nil {
		return fmt.Errorf("%w: record %d: %v", ErrBadSnapshot, t, err)
	}
	return nil
}
