package upgrade

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// The snapshot format (fsm/snapshot.go): the magic, the version and the
// index (uvarints), records (type byte, uvarint length, JSON body), the
// end record, and in version 2 a CRC-32C. The harness reads it itself so
// that it can compare the snapshots of replicas of both releases record
// by record, including types one of them does not know.
const (
	snapMagic = "GRAPNEL-SNAPSHOT"
	snapEnd   = 255
)

// ErrSnapshotFormat means a saved snapshot is not in the format above.
var ErrSnapshotFormat = errors.New("not a Grapnel snapshot")

// Snap is one replica's saved snapshot, split into records.
type Snap struct {
	Version, Index uint64
	// Records by type, each body as written, in the order written
	// (sorted by key, so equal states give equal lists).
	Records map[int][]string
}

// ParseSnap splits a snapshot into its records.
func ParseSnap(data []byte) (*Snap, error) {
	r := bufio.NewReader(bytes.NewReader(data))
	magic := make([]byte, len(snapMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != snapMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrSnapshotFormat)
	}
	s := &Snap{Records: map[int][]string{}}
	var err error
	if s.Version, err = binary.ReadUvarint(r); err != nil {
		return nil, fmt.Errorf("%w: no version", ErrSnapshotFormat)
	}
	if s.Index, err = binary.ReadUvarint(r); err != nil {
		return nil, fmt.Errorf("%w: no index", ErrSnapshotFormat)
	}
	for n := 1; ; n++ {
		t, err := r.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("%w: truncated after record %d", ErrSnapshotFormat, n-1)
		}
		if t == snapEnd {
			return s, nil
		}
		l, err := binary.ReadUvarint(r)
		if err != nil || l > 64<<20 {
			return nil, fmt.Errorf("%w: record %d (type %d): bad length", ErrSnapshotFormat, n, t)
		}
		body := make([]byte, l)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, fmt.Errorf("%w: record %d (type %d): truncated", ErrSnapshotFormat, n, t)
		}
		s.Records[int(t)] = append(s.Records[int(t)], string(body))
	}
}

// RecordDiff is how two replicas' records of one type differ.
type RecordDiff struct {
	Type int
	// OnlyA and OnlyB count the records one has and the other has not;
	// FirstA and FirstB are the first of each, shortened.
	OnlyA, OnlyB   int
	FirstA, FirstB string
}

func (d RecordDiff) String() string {
	s := fmt.Sprintf("type %d: %d only in the first, %d only in the second", d.Type, d.OnlyA, d.OnlyB)
	if d.FirstA != "" {
		s += "; first only in the first: " + d.FirstA
	}
	if d.FirstB != "" {
		s += "; first only in the second: " + d.FirstB
	}
	return s
}

// DiffSnaps compares two snapshots record type by record type; nil when
// they hold the same records.
func DiffSnaps(a, b *Snap) []RecordDiff {
	types := map[int]bool{}
	for t := range a.Records {
		types[t] = true
	}
	for t := range b.Records {
		types[t] = true
	}
	var out []RecordDiff
	for _, t := range sortedInts(types) {
		onlyA, onlyB := minus(a.Records[t], b.Records[t]), minus(b.Records[t], a.Records[t])
		if len(onlyA) == 0 && len(onlyB) == 0 {
			continue
		}
		d := RecordDiff{Type: t, OnlyA: len(onlyA), OnlyB: len(onlyB)}
		if len(onlyA) > 0 {
			d.FirstA = shorten(onlyA[0], 240)
		}
		if len(onlyB) > 0 {
			d.FirstB = shorten(onlyB[0], 240)
		}
		out = append(out, d)
	}
	return out
}

// minus is the multiset a without b.
func minus(a, b []string) []string {
	count := map[string]int{}
	for _, s := range b {
		count[s]++
	}
	var out []string
	for _, s := range a {
		if count[s] > 0 {
			count[s]--
			continue
		}
		out = append(out, s)
	}
	return out
}

func sortedInts(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func shorten(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func sortedStrings(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}
