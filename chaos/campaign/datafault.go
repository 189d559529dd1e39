package campaign

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Faults on the data of a stopped replica (issue 29 point 2): a bit
// flipped at rest in an entry of its Raft log or in its newest snapshot,
// or its flash replaced by an empty one. Each kills the replica (a unit
// whose flash decays or is swapped does not shut down cleanly), acts on
// its data dir through the flash mount, and starts it again under the
// same name (whileStopped). The replica must find the damage by itself
// (its log says so), repair it from its peers, and be a healthy voter
// that no longer holds its vote; the others keep serving meanwhile.

// What a replica's log says when it finds each kind of damage at start
// (cluster/integrity.go, cluster/votehold.go), and when its vote hold
// ends.
const (
	logCorruptEntry    = "corrupt Raft log: " // cut entries, or synced ones dropped at open
	logCorruptSnapshot = "corrupt snapshot: moved to the quarantine"
	logHoldBegan       = "holding this replica's vote until its log has caught up"
	logHoldEnded       = "vote hold ended"
)

// dataBound is how long after its restart a replica may take to find the
// damage and to be a healthy voter again; snapshotBound how long the
// corrupt-snapshot fault waits for its target to have a snapshot.
const (
	dataBound     = 60 * time.Second
	snapshotBound = 60 * time.Second
)

// waitSnapshot waits until replica i has a snapshot, or bound.
func waitSnapshot(ctx context.Context, c *cluster, i int, bound time.Duration) error {
	d, err := c.dataDirOf(i)
	if err != nil {
		return err
	}
	until := time.Now().Add(bound)
	for ctx.Err() == nil && time.Now().Before(until) {
		if m, _ := filepath.Glob(filepath.Join(d.path(), "snapshots", "*", "meta.json")); len(m) > 0 {
			return nil
		}
		sleep(ctx, pollEvery)
	}
	return fmt.Errorf("%s took no snapshot within %v (--raft-snapshot-threshold)", c.replicaName(i), bound)
}

// dataFault runs one of the data kinds on a follower (odd picks) or the
// leader (even picks).
func dataFault(ctx context.Context, c *cluster, s Step) (injected, error) {
	l, f, err := findLeader(ctx, c, s.Pick/2)
	if err != nil {
		return injected{}, err
	}
	i, role := f, "follower"
	if s.Pick%2 == 0 {
		i, role = l, "leader"
	}
	name := c.replicaName(i)
	logPath := c.replicaLog(i)
	if s.Kind == CorruptSnapshot {
		// A replica takes a snapshot every --raft-snapshot-threshold
		// entries, checked every 5 to 10 s.
		if err := waitSnapshot(ctx, c, i, snapshotBound); err != nil {
			return injected{}, err
		}
	}
	marker := map[Kind]string{CorruptLog: logCorruptEntry, CorruptSnapshot: logCorruptSnapshot, FlashReplaced: logHoldBegan}[s.Kind]
	before, heldBefore, endedBefore := countIn(logPath, marker), countIn(logPath, logHoldBegan), countIn(logPath, logHoldEnded)
	in := newFault(s.Kind, name+" ("+role+")")
	rng := rand.New(rand.NewPCG(uint64(s.Pick), uint64(in.fault.At.UnixNano())))
	var what string
	err = whileStopped(c, i, func(d dataDir) error {
		var err error
		switch s.Kind {
		case CorruptLog:
			what, err = flipLogEntry(d, rng)
		case CorruptSnapshot:
			what, err = flipSnapshot(d, rng)
		case FlashReplaced:
			what, err = emptyDataDir(d)
		default:
			err = fmt.Errorf("%w: %s is not a data fault", ErrConfig, s.Kind)
		}
		if err == nil {
			// Stopped as long as a unit takes to reboot.
			sleep(ctx, s.Hold)
		}
		return err
	})
	in.fault.Detail = what
	if err != nil {
		return in, fmt.Errorf("%s on %s: %w", s.Kind, name, err)
	}
	in.fault.Healed = time.Now() // started again
	until := in.fault.Healed.Add(dataBound)
	repairUntil := until
	for ctx.Err() == nil && time.Now().Before(until) && in.fault.Detected.IsZero() {
		if countIn(logPath, marker) > before {
			in.fault.Detected = time.Now()
			break
		}
		sleep(ctx, pollEvery)
	}
	if in.fault.Detected.IsZero() {
		in.fault.Detail += fmt.Sprintf("; %s did not log %q within %v of its start", name, marker, dataBound)
	} else {
		in.fault.Detail += fmt.Sprintf("; found %v after its start", in.fault.Detected.Sub(in.fault.Healed).Round(time.Millisecond))
	}
	if in.fault.Detected.IsZero() {
		// Whether it repaired what it did not report is still told.
		repairUntil = time.Now().Add(dataBound)
	}
	why := "not checked"
	for ctx.Err() == nil && time.Now().Before(repairUntil) {
		if c.replicaProc(i) == nil {
			why = name + " exited: " + c.replicaExit(i)
			break
		}
		if why = healthyVoter(ctx, c, name); why == "" {
			// A hold is announced only once it lasts 2 s: the replica's
			// log tells whether one began and ended.
			if h := voteHoldOf(ctx, c, name); h != "" {
				why = name + " holds its vote: " + h
			} else if countIn(logPath, logHoldBegan) > heldBefore && countIn(logPath, logHoldEnded) == endedBefore {
				why = name + " holds its vote (its log)"
			} else {
				in.fault.Repaired = time.Now()
				break
			}
		}
		sleep(ctx, pollEvery)
	}
	if in.fault.Repaired.IsZero() {
		in.fault.Detail += fmt.Sprintf("; not a healthy voter that votes within %v of its start: %s", dataBound, why)
	} else {
		in.fault.Detail += fmt.Sprintf("; a healthy voter again %v after its start (vote holds ended: %d)",
			in.fault.Repaired.Sub(in.fault.Healed).Round(time.Millisecond), countIn(logPath, logHoldEnded)-endedBefore)
	}
	return in, nil
}

// voteHoldOf is why replica name holds its vote, as the leader lists it;
// empty when it votes (or no leader answers).
func voteHoldOf(ctx context.Context, c *cluster, name string) string {
	sts := c.statuses(ctx)
	l := leaderOf(sts)
	if l < 0 {
		return ""
	}
	for _, m := range sts[l].GetMembers() {
		if m.GetId() == name {
			return m.GetVoteHold()
		}
	}
	return ""
}

// countIn counts the lines of the file at path that contain s.
func countIn(path, s string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), s)
}

// raft-wal's segment format (hashicorp/raft-wal segment/format.go): a
// 32-byte file header, then frames of an 8-byte header (type; 3 reserved
// bytes; the payload's length, or a CRC for a commit frame) and the
// payload padded to 8 bytes.
const (
	walFileHeader  = 32
	walFrameHeader = 8
	walFrameEntry  = 1
	walFrameCommit = 3
)

// walEntries are the payloads' [start, end) offsets of the entry frames
// of a segment file's bytes, in order, and how many of them come before
// the last commit's batch.
func walEntries(b []byte) (out [][2]int, beforeLastBatch int) {
	off := walFileHeader
	committed := 0 // entries before the last commit frame seen
	for off+walFrameHeader <= len(b) {
		typ := b[off]
		if typ == 0 {
			break
		}
		n := int(binary.LittleEndian.Uint32(b[off+4 : off+8]))
		if typ == walFrameCommit {
			beforeLastBatch, committed = committed, len(out)
			off += walFrameHeader
			continue
		}
		start := off + walFrameHeader
		if start+n > len(b) {
			break
		}
		if typ == walFrameEntry {
			out = append(out, [2]int{start, start + n})
		}
		off = start + n + (8-n%8)%8
	}
	return out, beforeLastBatch
}

// flipLogEntry flips one bit of the replica's newest WAL segment, in one
// of three places: the data of one of the 32 entries before the last
// commit's batch (entries after its newest snapshot, which the replica
// reads back at start), the data of an entry of that last batch, or the
// type or length of the frame header of one of the last 32 entries. The
// last two make raft-wal drop the rest of the segment at open as a torn
// write; the replica must find that they were synced
// (cluster/segcheck.go).
func flipLogEntry(d dataDir, rng *rand.Rand) (string, error) {
	segs, _ := filepath.Glob(filepath.Join(d.path(), "wal", "*.wal"))
	if len(segs) == 0 {
		return "", errors.New("no WAL segment")
	}
	slices.Sort(segs)
	seg := segs[len(segs)-1]
	rel, err := filepath.Rel(d.mount.Mountpoint(), seg)
	if err != nil {
		return "", err
	}
	// The frames are read from the durable copy, which Flip changes: a
	// batch the replica wrote but had not synced when it was killed
	// still reads as written over it (nothing at rest to decay).
	b, err := os.ReadFile(filepath.Join(d.mount.Backing(), rel))
	if err != nil {
		return "", err
	}
	entries, before := walEntries(b)
	if before == 0 {
		return "", fmt.Errorf("no entry before the last commit in %s", filepath.Base(seg))
	}
	var k int
	var bit int64
	var where string
	// The payload ends with the entry's append time, which no check
	// covers and nothing reads: data flips fall inside its first part.
	inData := func(k int) int64 {
		start, end := entries[k][0], entries[k][1]
		byteOff := start + rng.IntN(max(1, (end-start)*2/3))
		return int64(byteOff)*8 + int64(rng.IntN(8))
	}
	switch target := rng.IntN(3); {
	case target == 1 && before < len(entries):
		k = before + rng.IntN(len(entries)-before)
		bit, where = inData(k), "data of entry frame %d of %d (in the last commit's batch)"
	case target == 2:
		k = len(entries) - 1 - rng.IntN(min(32, len(entries)))
		hdr := entries[k][0] - walFrameHeader
		// The type byte or the length; raft-wal ignores the three
		// reserved bytes between them.
		byteOff := hdr + []int{0, 4, 5, 6, 7}[rng.IntN(5)]
		bit, where = int64(byteOff)*8+int64(rng.IntN(8)), "frame header of entry frame %d of %d"
	default:
		k = before - 1 - rng.IntN(min(32, before))
		bit, where = inData(k), "data of entry frame %d of %d"
	}
	if err := d.mount.Flip(rel, []int64{bit}); err != nil {
		return "", err
	}
	return fmt.Sprintf("bit %d (byte %d) of the "+where+" in %s flipped at rest", bit, bit/8, k+1, len(entries), filepath.Base(seg)), nil
}

// flipSnapshot flips 8 random bits of the newest snapshot's state.bin.
func flipSnapshot(d dataDir, rng *rand.Rand) (string, error) {
	dir := filepath.Join(d.path(), "snapshots")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	newest, index := "", uint64(0)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "meta.json"))
		if err != nil {
			continue
		}
		var m struct{ Index uint64 }
		if json.Unmarshal(b, &m) == nil && m.Index >= index {
			newest, index = e.Name(), m.Index
		}
	}
	if newest == "" {
		return "", errors.New("no snapshot yet (--raft-snapshot-threshold)")
	}
	state := filepath.Join(dir, newest, "state.bin")
	fi, err := os.Stat(state)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(d.mount.Mountpoint(), state)
	if err != nil {
		return "", err
	}
	bits := make([]int64, 8)
	for j := range bits {
		bits[j] = rng.Int64N(fi.Size() * 8)
	}
	if err := d.mount.Flip(rel, bits); err != nil {
		return "", err
	}
	return fmt.Sprintf("8 bits of snapshot %s (index %d, %d bytes) flipped at rest", newest, index, fi.Size()), nil
}

// emptyDataDir removes everything in the data dir: new, empty flash.
func emptyDataDir(d dataDir) (string, error) {
	entries, err := os.ReadDir(d.path())
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(d.path(), e.Name())); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("data dir emptied (%d entries removed): new flash under the same name", len(entries)), nil
}
