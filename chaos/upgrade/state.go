package upgrade

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// saveSnapshot asks replica i alone for a snapshot of its applied state.
func (s *system) saveSnapshot(ctx context.Context, i int) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := s.g.Cluster(i).SnapshotSave(ctx, &grapnelpb.SnapshotSaveRequest{})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for {
		c, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return buf.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		buf.Write(c.GetData())
	}
}

// quiet waits until every replica has applied the same index as the
// leader's commit index, twice in a row 200 ms apart: nothing is in
// flight, so their states can be compared.
func (s *system) quiet(ctx context.Context, bound time.Duration) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var last uint64
	why := "not checked"
	for {
		idx, ok, w := s.sameApplied(ctx)
		why = w
		if ok && idx == last {
			return idx, nil
		}
		if ok {
			last = idx
		} else {
			last = 0
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("replicas did not agree on an applied index within %v: %s", bound, why)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *system) sameApplied(ctx context.Context) (uint64, bool, string) {
	var idx []uint64
	var seen []string
	var commit uint64
	for i, r := range s.g.Replicas {
		st, err := s.g.Status(ctx, i)
		if err != nil {
			return 0, false, fmt.Sprintf("%s: %v", r.Name, err)
		}
		idx = append(idx, st.GetAppliedIndex())
		seen = append(seen, fmt.Sprintf("%s applied %d", r.Name, st.GetAppliedIndex()))
		if st.GetLeaderId() == r.Name {
			commit = st.GetCommitIndex()
		}
	}
	if commit == 0 || slices.Min(idx) != slices.Max(idx) || idx[0] != commit {
		return 0, false, fmt.Sprintf("leader commit %d; %s", commit, strings.Join(seen, ", "))
	}
	return idx[0], true, ""
}

// sameState compares every replica's state record by record with the
// first replica's. While replicas of both releases run (final false), a
// difference only in record types the old build does not know is noted,
// not failed: an old replica skips what it cannot read by design. At the
// end every difference fails.
func (s *system) sameState(ctx context.Context, oldTypes []int, final bool, rep *StepReport) Check {
	res := Check{Name: "same-state"}
	var snaps []*Snap
	var index uint64
	for attempt := range 3 {
		idx, err := s.quiet(ctx, 20*time.Second)
		if err != nil {
			res.Detail = err.Error()
			return res
		}
		snaps = snaps[:0]
		ok := true
		for i, r := range s.g.Replicas {
			data, err := s.saveSnapshot(ctx, i)
			if err != nil {
				res.Detail = fmt.Sprintf("snapshot save on %s: %v", s.replicaName(i), err)
				return res
			}
			if _, _, err := fsm.ReadSnapshot(bytes.NewReader(data)); err != nil {
				res.Detail = fmt.Sprintf("the new build cannot read the state %s saved: %v", s.replicaName(i), err)
				return res
			}
			sn, err := ParseSnap(data)
			if err != nil {
				res.Detail = fmt.Sprintf("%s: %v", r.Name, err)
				return res
			}
			if sn.Index != idx {
				ok = false
			}
			snaps = append(snaps, sn)
		}
		if ok {
			index = idx
			break
		}
		if attempt == 2 {
			res.Detail = fmt.Sprintf("the replicas' snapshots kept coming from different indexes (last agreed %d)", idx)
			return res
		}
	}
	var bad, tolerated []string
	for i := 1; i < len(snaps); i++ {
		for _, d := range DiffSnaps(snaps[0], snaps[i]) {
			line := fmt.Sprintf("%s vs %s: %s", s.replicaName(0), s.replicaName(i), d)
			if !final && !slices.Contains(oldTypes, d.Type) && (s.reps[0] == Old || s.reps[i] == Old) {
				tolerated = append(tolerated, line)
				continue
			}
			bad = append(bad, line)
		}
	}
	for _, t := range tolerated {
		rep.note("state differs while mixed, in a record type the old build does not know (it skips those entries): %s", t)
	}
	if len(bad) > 0 {
		res.Detail = fmt.Sprintf("at applied index %d the replicas' states differ:\n  %s", index, strings.Join(bad, "\n  "))
		return res
	}
	res.OK = true
	res.Detail = fmt.Sprintf("%d replicas hold the same state at applied index %d (%d record types)", len(snaps), index, len(snaps[0].Records))
	if len(tolerated) > 0 {
		res.Detail += fmt.Sprintf("; %d differences in record types the old build does not know (notes)", len(tolerated))
	}
	return res
}

// SnapshotMeta is one snapshot a replica took on disk (hashicorp/raft's
// file snapshot store keeps each in DIR/snapshots/ID/meta.json).
type SnapshotMeta struct {
	ID    string
	Index uint64
	Term  uint64
}

// snapshotsOn lists the snapshots in a replica's data dir, newest last.
func snapshotsOn(dataDir string) ([]SnapshotMeta, error) {
	dirs, err := os.ReadDir(filepath.Join(dataDir, "snapshots"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []SnapshotMeta
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(dataDir, "snapshots", d.Name(), "meta.json"))
		if err != nil {
			continue // being written
		}
		var m SnapshotMeta
		if err := json.Unmarshal(b, &m); err != nil {
			continue
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b SnapshotMeta) int { return int(a.Index) - int(b.Index) })
	return out, nil
}

// newestSnapshot is the index of the newest snapshot on replica r's
// disk, 0 without one.
func newestSnapshot(r *bench.Replica) uint64 {
	ms, _ := snapshotsOn(r.DataDir)
	if len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Index
}
