package fsm

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

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
	// SnapHistoryMeta is the history's limits and last sequence number,
	// SnapTx one transaction and SnapTransition one execution-state
	// transition (docs/history.md).
	SnapHistoryMeta SnapshotType = 11
	SnapTx          SnapshotType = 12
	SnapTransition  SnapshotType = 13
	// SnapAgentMode is an agent's mode other than Active, SnapPlacement
	// one placed workload's agents (docs/placement.md).
	SnapAgentMode SnapshotType = 14
	SnapPlacement SnapshotType = 15
	// SnapProblems is the open problems of the problems view and the last
	// problem id (docs/problems.md), in one record, written only when a
	// problem was ever opened.
	SnapProblems SnapshotType = 16
	// SnapGuard is one object's modification revision, tombstone or
	// intent lock, or (with no object) the revisions' floor, which is
	// always written: a snapshot without it predates revisions
	// (docs/locks.md).
	SnapGuard SnapshotType = 17
	// SnapRemovedReplica is one replica run an operator removed
	// (state.RemovedReplica).
	SnapRemovedReplica SnapshotType = 18
	// SnapReplicaCerts is the certificates recorded for one replica,
	// SnapRevokedCert one revoked certificate (state.ReplicaCert,
	// state.RevokedCert).
	SnapReplicaCerts SnapshotType = 19
	SnapRevokedCert  SnapshotType = 20
	// SnapClusterVersion is the cluster version, written only once it
	// is above the baseline, so that a snapshot a replica writes before
	// the upgrade is finalized stays readable by the previous release.
	SnapClusterVersion SnapshotType = 21
	snapEnd            SnapshotType = 255
)

// snapNames is the name of each record type, for errors and --version.
var snapNames = map[SnapshotType]string{
	SnapAPIVersion: "APIVersion", SnapWorkload: "Workload", SnapConfig: "Config", SnapRendered: "Rendered",
	SnapDeleteEdge: "DeleteEdge", SnapAgent: "Agent", SnapWorkloadState: "WorkloadState", SnapRevision: "Revision",
	SnapDesiredSeq: "DesiredSeq", SnapReportMark: "ReportMark", SnapHistoryMeta: "HistoryMeta", SnapTx: "Tx",
	SnapTransition: "Transition", SnapAgentMode: "AgentMode", SnapPlacement: "Placement", SnapProblems: "Problems",
	SnapGuard: "Guard", SnapRemovedReplica: "RemovedReplica", SnapReplicaCerts: "ReplicaCerts", SnapRevokedCert: "RevokedCert",
	SnapClusterVersion: "ClusterVersion",
}

func (t SnapshotType) String() string {
	if n, ok := snapNames[t]; ok {
		return n
	}
	return fmt.Sprintf("SnapshotType(%d)", uint8(t))
}

// SnapshotVersion is the version of the snapshot format this version
// writes.
const SnapshotVersion = snapshotVersion

// SnapshotVersionsRead are the snapshot format versions a restore reads.
var SnapshotVersionsRead = []int{snapshotVersionV1, snapshotVersion}

// AllSnapshotTypes lists every record type; the round-trip test fails if a
// type is missing from it.
var AllSnapshotTypes = []SnapshotType{SnapAPIVersion, SnapWorkload, SnapConfig, SnapRendered,
	SnapDeleteEdge, SnapAgent, SnapWorkloadState, SnapRevision, SnapDesiredSeq, SnapReportMark,
	SnapHistoryMeta, SnapTx, SnapTransition, SnapAgentMode, SnapPlacement, SnapProblems, SnapGuard,
	SnapRemovedReplica, SnapReplicaCerts, SnapRevokedCert, SnapClusterVersion}

// The snapshot format: the magic, the version and the index (uvarints),
// then records (type byte, uvarint length, JSON body), then snapEnd.
// Version 2 adds a CRC-32C of everything before it, big-endian, after
// snapEnd; version 1 (written before that) is still read.
const (
	snapshotMagic     = "GRAPNEL-SNAPSHOT"
	snapshotVersion   = 2
	snapshotVersionV1 = 1
	// maxRecordBytes bounds a record's declared length. The body is read
	// as it arrives, never allocated from the length up front, so a
	// damaged length costs no memory before the data runs out.
	maxRecordBytes = 1 << 30
)

// snapshotCRC is CRC-32C (Castagnoli). The checksum is there to catch
// accidental damage between the writer and a restore (a truncated copy, a
// flipped bit on a disk or a USB stick), not forgery: whoever may call
// restore can write a valid snapshot anyway. Four bytes, computed in
// hardware on amd64 and arm64, so it costs nothing next to the JSON; and
// Raft's own CRC-64 covers only the copy in its snapshot store, computed
// over whatever bytes were uploaded.
var snapshotCRC = crc32.MakeTable(crc32.Castagnoli)

// The records are frozen JSON: every field, here and in the state types a
// record reaches, names its key in a json tag, the key it had before the
// tags (the Go field name for the first records), so that renaming a
// field cannot drop its value from existing snapshots. A changed record
// needs a new cluster version (docs/upgrade.md). The golden snapshot
// (testdata/snapshot-all-records.golden) pins the bytes of every type,
// testdata/snapshot-schema.golden its keys (snapshot_schema_test.go).

type workloadRecord struct {
	Name     string          `json:"Name"`
	Workload *state.Workload `json:"Workload"`
}

// configRecord's Value is a config item: a string, a []any or a
// map[string]any of config items.
type configRecord struct {
	Key   string `json:"Key"`
	Value any    `json:"Value"`
}

type renderedRecord struct {
	Name     string         `json:"Name"`
	Rendered state.Rendered `json:"Rendered"`
}

type deleteEdgeRecord struct {
	Dependency string                `json:"Dependency"`
	Dependent  string                `json:"Dependent"`
	Condition  state.DeleteCondition `json:"Condition"`
}

type reportMarkRecord struct {
	Agent string           `json:"Agent"`
	Mark  state.ReportMark `json:"Mark"`
}

// historyMetaRecord is what the history keeps besides its records.
type historyMetaRecord struct {
	Limits  state.HistoryLimits `json:"l"`
	LastSeq uint64              `json:"s"`
}

type agentModeRecord struct {
	Agent string `json:"a"`
	Mode  string `json:"m"`
}

// removedReplicaRecord and revokedCertRecord embed their state type
// without a tag: its fields are written inline, next to the id.
type removedReplicaRecord struct {
	ID string `json:"id"`
	state.RemovedReplica
}

type replicaCertsRecord struct {
	ID    string              `json:"id"`
	Certs []state.ReplicaCert `json:"c"`
}

type revokedCertRecord struct {
	Serial string `json:"s"`
	state.RevokedCert
}

type clusterVersionRecord struct {
	Version uint32 `json:"v"`
}

type placementRecord struct {
	Workload string   `json:"w"`
	Agents   []string `json:"a"`
}

// problemsRecord is state.Problems: the open problems by id and the
// last id handed out, which a problem opened after the restore follows.
type problemsRecord struct {
	LastID uint64           `json:"last"`
	Open   []*state.Problem `json:"open,omitempty"`
}

// guardRecord is one of: the floor of the revisions (Object empty), an
// object's modification revision, its tombstone (Deleted), or its lock.
type guardRecord struct {
	Object  string      `json:"o,omitempty"`
	Rev     uint64      `json:"r,omitempty"`
	Deleted bool        `json:"d,omitempty"`
	Floor   uint64      `json:"f,omitempty"`
	Lock    *state.Lock `json:"l,omitempty"`
}

type agentRecord struct {
	Name       string                 `json:"Name"`
	Attributes *state.AgentAttributes `json:"Attributes"`
}

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
// order so equal stores give equal bytes, the end record and the checksum.
func WriteSnapshot(w io.Writer, st *state.Store, index uint64) error {
	sum := crc32.New(snapshotCRC)
	bw := bufio.NewWriter(io.MultiWriter(w, sum))
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
	for _, a := range state.SortedKeys(st.Modes) {
		if err := rec(SnapAgentMode, agentModeRecord{a, st.Modes[a].String()}); err != nil {
			return err
		}
	}
	for _, w := range state.SortedKeys(st.Placement) {
		if err := rec(SnapPlacement, placementRecord{w, st.Placement[w]}); err != nil {
			return err
		}
	}
	for _, id := range state.SortedKeys(st.Removed) {
		if err := rec(SnapRemovedReplica, removedReplicaRecord{id, st.Removed[id]}); err != nil {
			return err
		}
	}
	for _, id := range state.SortedKeys(st.ReplicaCerts) {
		if err := rec(SnapReplicaCerts, replicaCertsRecord{id, st.ReplicaCerts[id]}); err != nil {
			return err
		}
	}
	for _, serial := range state.SortedKeys(st.Revoked) {
		if err := rec(SnapRevokedCert, revokedCertRecord{serial, st.Revoked[serial]}); err != nil {
			return err
		}
	}
	if st.ClusterVersion > state.ClusterVersionBaseline {
		if err := rec(SnapClusterVersion, clusterVersionRecord{st.ClusterVersion}); err != nil {
			return err
		}
	}
	if err := writeGuards(rec, st); err != nil {
		return err
	}
	if h := st.History; h != nil && (h.LastSeq != 0 || len(h.Transitions) > 0 || h.Limits != (state.HistoryLimits{})) {
		if err := rec(SnapHistoryMeta, historyMetaRecord{h.Limits, h.LastSeq}); err != nil {
			return err
		}
		for _, tx := range h.Txs {
			if err := rec(SnapTx, tx); err != nil {
				return err
			}
		}
		for i := range h.Transitions {
			if err := rec(SnapTransition, &h.Transitions[i]); err != nil {
				return err
			}
		}
	}
	if st.Problems.LastID != 0 {
		if err := rec(SnapProblems, problemsRecord{st.Problems.LastID, st.Problems.List()}); err != nil {
			return err
		}
	}
	if err := bw.WriteByte(byte(snapEnd)); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(binary.BigEndian.AppendUint32(nil, sum.Sum32()))
	return err
}

// ReadSnapshot decodes a snapshot into a fresh store. It reads all of r:
// the header, every record, the end record, the checksum (version 2) and
// nothing after it; anything else is an error wrapping ErrBadSnapshot
// that says what is wrong and where.
func ReadSnapshot(r io.Reader) (*state.Store, uint64, error) {
	sr := &snapReader{br: bufio.NewReader(r)}
	magic := make([]byte, len(snapshotMagic))
	n, err := io.ReadFull(sr, magic)
	switch {
	case n == 0:
		return nil, 0, fmt.Errorf("%w: it is empty", ErrBadSnapshot)
	case string(magic[:n]) != snapshotMagic[:n]:
		return nil, 0, fmt.Errorf("%w: bad magic: it does not start with %q", ErrBadSnapshot, snapshotMagic)
	case err != nil:
		return nil, 0, sr.bad("truncated in the header (magic)")
	}
	ver, err := binary.ReadUvarint(sr)
	if err != nil {
		return nil, 0, sr.bad("truncated in the header (version)")
	}
	if ver != snapshotVersion && ver != snapshotVersionV1 {
		return nil, 0, fmt.Errorf("%w: unsupported version %d (this replica reads versions %d and %d)",
			ErrBadSnapshot, ver, snapshotVersionV1, snapshotVersion)
	}
	index, err := binary.ReadUvarint(sr)
	if err != nil {
		return nil, 0, sr.bad("truncated in the header (index)")
	}
	st := state.NewStore()
	sawGuard := false
	// recErr is the first record that did not decode. In version 2 the
	// rest is still read, so that damage is reported as a checksum
	// mismatch rather than as whatever it turned a record into.
	var recErr error
	var body []byte
	for rec := 1; ; rec++ {
		tb, err := sr.ReadByte()
		if err != nil {
			return nil, 0, sr.bad(fmt.Sprintf("truncated after record %d: no end record", rec-1))
		}
		t := SnapshotType(tb)
		if t == snapEnd {
			break
		}
		n, err := binary.ReadUvarint(sr)
		if err != nil {
			return nil, 0, sr.bad(fmt.Sprintf("truncated in record %d (type %d): bad length", rec, t))
		}
		if n > maxRecordBytes {
			return nil, 0, sr.bad(fmt.Sprintf("record %d (type %d): length %d is over %d", rec, t, n, maxRecordBytes))
		}
		if recErr != nil {
			if got, err := io.CopyN(io.Discard, sr, int64(n)); err != nil {
				return nil, 0, sr.bad(fmt.Sprintf("truncated in record %d (type %d): %d of %d bytes", rec, t, got, n))
			}
			continue
		}
		// One buffer for every record: the decoders copy what they keep.
		// It grows as the bytes arrive, so a length a damaged record
		// claims costs memory only once the bytes are there.
		body = body[:0]
		for uint64(len(body)) < n {
			chunk := min(n-uint64(len(body)), 64<<10)
			body = slices.Grow(body, int(chunk))
			got, err := io.ReadFull(sr, body[len(body):len(body)+int(chunk)])
			body = body[:len(body)+got]
			if err != nil {
				return nil, 0, sr.bad(fmt.Sprintf("truncated in record %d (type %d): %d of %d bytes", rec, t, len(body), n))
			}
		}
		sawGuard = sawGuard || t == SnapGuard
		if err := restoreRecord(st, t, body); err != nil {
			recErr = fmt.Errorf("record %d (type %d): %w", rec, t, err)
			if ver == snapshotVersionV1 {
				break
			}
		}
	}
	if ver == snapshotVersion {
		want := sr.crc
		var b [4]byte
		if _, err := io.ReadFull(sr.br, b[:]); err != nil {
			return nil, 0, sr.bad("truncated: no checksum after the end record")
		}
		if got := binary.BigEndian.Uint32(b[:]); got != want {
			err := fmt.Errorf("%w: checksum mismatch: the snapshot says %08x, its content sums to %08x", ErrBadSnapshot, got, want)
			if recErr != nil {
				err = fmt.Errorf("%w; the damage shows in %v", err, recErr)
			}
			return nil, 0, err
		}
	}
	if recErr != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrBadSnapshot, recErr)
	}
	if extra, _ := io.Copy(io.Discard, sr.br); extra > 0 {
		return nil, 0, fmt.Errorf("%w: %d trailing bytes after the end of the snapshot", ErrBadSnapshot, extra)
	}
	if !sawGuard {
		// Written before revisions existed: what changed up to here is
		// unknown, so an expected revision below it is refused.
		st.Revs.Floor = st.DesiredSeq
	}
	return st, index, nil
}

// VerifySnapshot reads a whole snapshot exactly as a restore does,
// decoding every record into a scratch store, and tells its index. A
// snapshot it accepts restores; the server runs it on an upload before
// handing it to Raft, which panics when the FSM refuses a restore.
func VerifySnapshot(r io.Reader) (uint64, error) {
	_, index, err := ReadSnapshot(r)
	return index, err
}

// snapReader sums and counts what the decoder consumes: bufio reads ahead,
// so summing at the source would take in the checksum itself.
type snapReader struct {
	br  *bufio.Reader
	crc uint32
	off int64
	one [1]byte
}

func (s *snapReader) Read(p []byte) (int, error) {
	n, err := s.br.Read(p)
	s.crc = crc32.Update(s.crc, snapshotCRC, p[:n])
	s.off += int64(n)
	return n, err
}

func (s *snapReader) ReadByte() (byte, error) {
	b, err := s.br.ReadByte()
	if err == nil {
		s.one[0] = b
		s.crc = crc32.Update(s.crc, snapshotCRC, s.one[:])
		s.off++
	}
	return b, err
}

// bad is ErrBadSnapshot with what went wrong and the offset it was found at.
func (s *snapReader) bad(what string) error {
	return fmt.Errorf("%w: %s (at byte %d)", ErrBadSnapshot, what, s.off)
}

// restoreRecord decodes one record into st; the caller says which record
// failed.
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
			if r.Workload == nil {
				return fmt.Errorf("workload %q has no body", r.Name)
			}
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
			if r.Rendered.Workload == nil {
				return fmt.Errorf("rendering %q has no workload", r.Name)
			}
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
			if r.Attributes == nil {
				return fmt.Errorf("agent %q has no attributes", r.Name)
			}
			st.Agents[r.Name] = r.Attributes
		}
	case SnapAgentMode:
		var r agentModeRecord
		if err = json.Unmarshal(body, &r); err == nil {
			var m state.AgentMode
			if m, err = state.ParseAgentMode(r.Mode); err == nil {
				st.SetAgentMode(r.Agent, m)
			}
		}
	case SnapPlacement:
		var r placementRecord
		if err = json.Unmarshal(body, &r); err == nil {
			if len(r.Agents) == 0 {
				return fmt.Errorf("placed workload %q has no agent", r.Workload)
			}
			if st.Placement == nil {
				st.Placement = map[string][]string{}
			}
			st.Placement[r.Workload] = r.Agents
		}
	case SnapHistoryMeta:
		var r historyMetaRecord
		if err = json.Unmarshal(body, &r); err == nil {
			st.History.Limits = r.Limits
			st.History.LastSeq = max(st.History.LastSeq, r.LastSeq)
		}
	case SnapTx, SnapTransition:
		err = restoreHistoryRecord(st, t, body)
	case SnapProblems:
		var r problemsRecord
		if err = json.Unmarshal(body, &r); err == nil {
			for _, p := range r.Open {
				if p == nil || p.Key == "" {
					return errors.New("a problem without a key")
				}
				st.Problems.Restore(*p)
			}
			st.Problems.LastID = max(st.Problems.LastID, r.LastID)
		}
	case SnapGuard:
		var r guardRecord
		if err = json.Unmarshal(body, &r); err == nil {
			restoreGuard(st, r)
		}
	case SnapRemovedReplica:
		var r removedReplicaRecord
		if err = json.Unmarshal(body, &r); err == nil {
			if r.ID == "" {
				return errors.New("a removed replica without an id")
			}
			st.RecordRemoval(r.ID, r.Incarnation, r.Index)
		}
	case SnapReplicaCerts:
		var r replicaCertsRecord
		if err = json.Unmarshal(body, &r); err == nil {
			if r.ID == "" {
				return errors.New("replica certificates without an id")
			}
			for _, c := range r.Certs {
				if c.Serial == "" {
					return errors.New("a replica certificate without a serial")
				}
				st.RecordReplicaCert(r.ID, c)
			}
		}
	case SnapRevokedCert:
		var r revokedCertRecord
		if err = json.Unmarshal(body, &r); err == nil {
			if r.Serial == "" || r.ID == "" {
				return errors.New("a revoked certificate without a serial or a replica id")
			}
			if st.Revoked == nil {
				st.Revoked = map[string]state.RevokedCert{}
			}
			st.Revoked[r.Serial] = r.RevokedCert
		}
	case SnapClusterVersion:
		var r clusterVersionRecord
		if err = json.Unmarshal(body, &r); err == nil {
			if r.Version > state.MaxClusterVersion {
				return fmt.Errorf("%w: the snapshot is at cluster version %d, and this build reads cluster versions up to %d", ErrNewerFormat, r.Version, state.MaxClusterVersion)
			}
			st.SetClusterVersion(r.Version)
		}
	case SnapWorkloadState:
		var r state.WorkloadState
		if err = json.Unmarshal(body, &r); err == nil {
			st.States.Set(r.Instance, r.State)
		}
	default:
		// Unknown record types come from a newer replica; skipping them
		// would silently lose state.
		return errors.New("unknown record type (written by a newer version?)")
	}
	return err
}

// writeGuards writes the revisions' floor, then each object's revision,
// tombstone and lock, in object order.
func writeGuards(rec func(SnapshotType, any) error, st *state.Store) error {
	if err := rec(SnapGuard, guardRecord{Floor: st.Revs.Floor}); err != nil {
		return err
	}
	for _, o := range state.SortedKeys(st.Revs.Mod) {
		if err := rec(SnapGuard, guardRecord{Object: o, Rev: st.Revs.Mod[o]}); err != nil {
			return err
		}
	}
	for _, o := range state.SortedKeys(st.Revs.Tombstones) {
		if err := rec(SnapGuard, guardRecord{Object: o, Rev: st.Revs.Tombstones[o], Deleted: true}); err != nil {
			return err
		}
	}
	for _, o := range state.SortedKeys(st.Locks) {
		lk := st.Locks[o]
		if err := rec(SnapGuard, guardRecord{Object: o, Lock: &lk}); err != nil {
			return err
		}
	}
	return nil
}

// restoreGuard puts one guard record into st.
func restoreGuard(st *state.Store, r guardRecord) {
	switch {
	case r.Object == "":
		st.Revs.Floor = r.Floor
	case r.Lock != nil:
		st.Locks[r.Object] = *r.Lock
	case r.Deleted:
		st.Revs.Tombstones[r.Object] = r.Rev
	default:
		st.Revs.Mod[r.Object] = r.Rev
	}
}
