package cluster

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// tailWAL writes entries 1..n of term 3 in single-entry batches, then a
// last batch of entries n+1..n+batch, and returns the segment's path.
func tailWAL(t *testing.T, dir string, n, batch int) string {
	t.Helper()
	w, err := openLogStore(dir, 1<<20, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	cw := checkedWAL{rawStore: w, c: newIntegrity(w, hclog.NewNullLogger())}
	entry := func(i int) *raft.Log {
		return &raft.Log{Index: uint64(i), Term: 3, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("entry-%05d", i))}
	}
	for i := 1; i <= n; i++ {
		if err := cw.storeLogs([]*raft.Log{entry(i)}); err != nil {
			t.Fatal(err)
		}
	}
	var last []*raft.Log
	for i := n + 1; i <= n+batch; i++ {
		last = append(last, entry(i))
	}
	if err := cw.storeLogs(last); err != nil {
		t.Fatal(err)
	}
	if err := w.SetUint64(stableKeys.currentTerm, 4); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, walDir, "*.wal"))
	if len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
	return segs[0]
}

// segFrames returns the offsets of the frame headers of a segment's
// bytes, in order, and of the last commit frame.
func segFrames(b []byte) (frames []int, lastCommit int) {
	for off := segFileHeader; off+segFrameHeader <= len(b) && b[off] != 0; {
		frames = append(frames, off)
		if b[off] == segFrameCommit {
			lastCommit = off
			off += segFrameHeader
			continue
		}
		l := int(binary.LittleEndian.Uint32(b[off+4 : off+8]))
		off += segFrameHeader + l + (8-l%8)%8
	}
	return frames, lastCommit
}

func editSegment(t *testing.T, seg string, edit func(b []byte)) {
	t.Helper()
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	edit(b)
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// raftWALLast opens the WAL as raft-wal does and returns its last index.
func raftWALLast(t *testing.T, dir string) uint64 {
	t.Helper()
	w, err := openLogStore(dir, 1<<20, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	last, err := w.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	return last
}

// A bit flipped at rest in the last commit batch, or in a frame header of
// the open segment: raft-wal drops the entries as a torn write at open,
// silently. The check finds them, the replica holds its vote for the log
// it had, and the dropped bytes go to the quarantine, so the next start
// finds nothing more.
func TestTailCheck_SyncedEntriesDroppedAtOpen_HoldTheVote(t *testing.T) {
	for _, tc := range []struct {
		name      string
		batch     int
		flip      func(t *testing.T, b []byte)
		raftKeeps uint64
		exact     bool
	}{
		{"data of the last single-entry batch", 1, func(t *testing.T, b []byte) {
			b[bytes.Index(b, []byte("entry-00050"))] ^= 1
		}, 49, true},
		{"data in a last batch of 10", 10, func(t *testing.T, b []byte) {
			b[bytes.Index(b, []byte("entry-00045"))] ^= 4
		}, 40, true},
		{"the last commit's CRC", 10, func(t *testing.T, b []byte) {
			_, c := segFrames(b)
			b[c+5] ^= 0x10
		}, 40, true},
		{"the type of an entry frame 20 batches back", 1, func(t *testing.T, b []byte) {
			i := bytes.Index(b, []byte("entry-00030"))
			frames, _ := segFrames(b)
			h := 0
			for _, f := range frames {
				if f < i {
					h = f
				}
			}
			b[h] ^= 4 // entry (1) -> unknown (5): raft-wal stops reading
		}, 29, false},
		{"the length of an entry frame 20 batches back", 1, func(t *testing.T, b []byte) {
			i := bytes.Index(b, []byte("entry-00030"))
			frames, _ := segFrames(b)
			h := 0
			for _, f := range frames {
				if f < i {
					h = f
				}
			}
			b[h+6] ^= 0x40 // a length past the data: raft-wal reads zeros there
		}, 29, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			n := 50 - tc.batch
			seg := tailWAL(t, dir, n, tc.batch)
			if loss, err := checkTail(filepath.Join(dir, walDir)); err != nil || loss != nil {
				t.Fatalf("intact log: loss %+v, %v", loss, err)
			}
			editSegment(t, seg, func(b []byte) { tc.flip(t, b) })

			loss, err := checkTail(filepath.Join(dir, walDir))
			if err != nil || loss == nil {
				t.Fatalf("flipped log: loss %+v, %v; want the dropped entries found", loss, err)
			}
			if got := raftWALLast(t, dir); got != tc.raftKeeps {
				t.Fatalf("raft-wal kept through %d, want %d (the case this check is for)", got, tc.raftKeeps)
			}
			w, _, h, c := openForRepair(t, dir)
			if err := repairTail(dir, loss, w, h, c, hclog.NewNullLogger(), func() uint64 { return 4 }); err != nil {
				t.Fatal(err)
			}
			v := h.Held()
			switch {
			case v == nil:
				t.Fatal("no vote hold")
			case tc.exact && (v.Index != 50 || v.Term != 3):
				t.Fatalf("hold %+v, want the last entry it had: 50 of term 3", v)
			case !tc.exact && (v.Index < 50 || v.Term < 3):
				t.Fatalf("hold %+v, want a bound at or past entry 50 of term 3", v)
			}
			if h.refuses(3, 49) == false || h.refuses(5, 50) {
				t.Fatalf("hold %+v: refuses (3,49) %t, (5,50) %t", v, h.refuses(3, 49), h.refuses(5, 50))
			}
			if c.found.Load() != 1 || c.repaired.Load() != 1 {
				t.Fatalf("found %d, repaired %d", c.found.Load(), c.repaired.Load())
			}
			q, _ := filepath.Glob(filepath.Join(dir, quarantineDir, "*.tail-*"))
			if len(q) != 1 {
				t.Fatalf("quarantine %v, want the dropped bytes", q)
			}
			w.Close()
			if loss, err := checkTail(filepath.Join(dir, walDir)); err != nil || loss != nil {
				t.Fatalf("after the repair: loss %+v, %v; want nothing found again", loss, err)
			}
			if got := raftWALLast(t, dir); got != tc.raftKeeps {
				t.Fatalf("after the repair raft-wal keeps through %d, want %d", got, tc.raftKeeps)
			}
		})
	}
}

// A write torn by a power cut was never synced, so never acknowledged:
// whatever part of the last batch reached the flash (a prefix, the
// commit frame cut short, or the commit with a hole of missing sectors
// before it), the check finds nothing to hold for.
func TestTailCheck_TornWrite_HoldsNothing(t *testing.T) {
	dir := t.TempDir()
	seg := tailWAL(t, dir, 40, 20)
	orig, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	frames, commit := segFrames(orig)
	batchStart := 0 // after the commit before the last batch
	for _, f := range frames {
		if f < commit && orig[f] == segFrameCommit {
			batchStart = f + segFrameHeader
		}
	}
	end := commit + segFrameHeader
	if end-batchStart < 200 {
		t.Fatalf("last batch of %d bytes; the test wants a longer one", end-batchStart)
	}
	tears := map[string]func(b []byte){}
	for keep := 0; keep < end-batchStart; keep += 13 {
		tears[fmt.Sprintf("prefix of %d bytes", keep)] = func(b []byte) { clear(b[batchStart+keep : end]) }
	}
	for keep := 1; keep < 8; keep++ {
		tears[fmt.Sprintf("commit cut after %d bytes", keep)] = func(b []byte) { clear(b[commit+keep : end]) }
	}
	tears["a sector missing before the commit"] = func(b []byte) { clear(b[batchStart+64 : batchStart+64+128]) }
	for name, tear := range tears {
		b := bytes.Clone(orig)
		tear(b)
		if bytes.Equal(b[:end], orig[:end]) {
			continue // the CRC ended in zero bytes: nothing torn
		}
		loss, err := scanTail(bytes.NewReader(b), 1)
		if err != nil || loss != nil {
			t.Errorf("%s: loss %+v, %v; want none (never synced)", name, loss, err)
		}
	}
}

// A bit flipped in a segment's file header: raft-wal refuses to open the
// log ("segment header BaseIndex 0 doesn't match metadata 1"), and the
// replica would exit at every start. The header is rebuilt from the
// segment's name, confirmed by its first commit's CRC, and the log opens
// whole, with nothing held. Where the first batch is damaged too, nothing
// is rebuilt.
func TestRepairHeaders_RebuildsAFlippedHeader(t *testing.T) {
	for _, off := range []int{0, 3, 5, 7, 8, 15, 16, 24, 31} {
		t.Run(fmt.Sprintf("byte %d", off), func(t *testing.T) {
			dir := t.TempDir()
			seg := tailWAL(t, dir, 49, 1)
			editSegment(t, seg, func(b []byte) { b[off] ^= 0x20 })
			if off < 4 || off >= 8 {
				// On a copy: raft-wal keeps its metadata file locked
				// after it refuses to open.
				cp := t.TempDir()
				if err := os.CopyFS(cp, os.DirFS(dir)); err != nil {
					t.Fatal(err)
				}
				if w, err := openLogStore(cp, 1<<20, nil, hclog.NewNullLogger()); err == nil {
					w.Close()
					t.Fatal("raft-wal opened the log with a flipped header: the case this repair is for is gone")
				}
			}
			fixed, err := repairHeaders(filepath.Join(dir, walDir), hclog.NewNullLogger())
			if err != nil || len(fixed) != 1 {
				t.Fatalf("rebuilt %v, %v; want the segment", fixed, err)
			}
			if loss, err := checkTail(filepath.Join(dir, walDir)); err != nil || loss != nil {
				t.Fatalf("after the rebuild: loss %+v, %v", loss, err)
			}
			if got := raftWALLast(t, dir); got != 50 {
				t.Fatalf("after the rebuild raft-wal keeps through %d, want 50", got)
			}
		})
	}
	dir := t.TempDir()
	seg := tailWAL(t, dir, 49, 1)
	editSegment(t, seg, func(b []byte) {
		b[8] ^= 1
		b[bytes.Index(b, []byte("entry-00001"))] ^= 1
	})
	if fixed, err := repairHeaders(filepath.Join(dir, walDir), hclog.NewNullLogger()); err != nil || len(fixed) != 0 {
		t.Fatalf("rebuilt %v, %v with the first batch damaged too; want nothing", fixed, err)
	}
}

// A hold ends once the log reaches the furthest a leader's log reached,
// of a leader of the replica's term or later (a deposed one may lack what
// a later one committed), even before it reaches a bound on the entries
// it lost.
func TestVoteHold_EndsAtTheLeadersLastEntry(t *testing.T) {
	h := newHoldState(t.TempDir(), time.Now)
	if err := h.hold(voteHold{Reason: "test", Index: 1000, Term: 4}); err != nil {
		t.Fatal(err)
	}
	last, term := uint64(59), uint64(4)
	lastf, termf := func() uint64 { return last }, func() uint64 { return term }
	h.lastIndex.Store(&lastf)
	h.currentTerm.Store(&termf)
	h.heardLeader(3, 50) // a deposed leader: Raft refuses it
	if h.caughtUp() || h.target.Load() != 0 {
		t.Fatalf("counted a leader of term 3 with the replica in term 4 (target %d)", h.target.Load())
	}
	h.heardLeader(4, 60)
	if h.caughtUp() {
		t.Fatal("caught up at 59 with the leader's log at 60")
	}
	last = 60
	if !h.caughtUp() {
		t.Fatal("not caught up at the leader's last entry")
	}
}

// A bit flipped in raft-wal's metadata file (bbolt): at many offsets
// bbolt faults on its memory map (SIGSEGV), panics, or raft-wal refuses
// the log, and the replica would exit at every start. Wherever the flip
// lands, either the check finds it (the log goes to the quarantine, the
// vote is held as for an empty start, and a new log opens) or raft-wal
// opens the log whole.
func TestQuarantineLog_CorruptMetadata(t *testing.T) {
	dir := t.TempDir()
	tailWAL(t, dir, 49, 1)
	orig, err := os.ReadFile(filepath.Join(dir, walDir, "wal-meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for off := 0; off < len(orig); off += metaStep {
		b := bytes.Clone(orig)
		b[off] ^= 0x10
		cp := t.TempDir()
		if err := os.CopyFS(cp, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cp, walDir, "wal-meta.db"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		h := newHoldState(cp, time.Now)
		moved, err := quarantineLog(cp, h, time.Now, hclog.NewNullLogger())
		if err != nil {
			t.Fatalf("byte %d: %v", off, err)
		}
		if !moved {
			if h.Held() != nil {
				t.Fatalf("byte %d: held %+v without moving the log", off, h.Held())
			}
			if got := raftWALLast(t, cp); got != 50 {
				t.Fatalf("byte %d: not found, and raft-wal keeps through %d", off, got)
			}
			continue
		}
		found++
		if v := h.Held(); v == nil || !v.Empty {
			t.Fatalf("byte %d: hold %+v, want one for an empty start", off, v)
		}
		if q, _ := filepath.Glob(filepath.Join(cp, quarantineDir, walDir+"-*", "*.wal")); len(q) != 1 {
			t.Fatalf("byte %d: quarantine holds %v, want the segment", off, q)
		}
		if got := raftWALLast(t, cp); got != 0 {
			t.Fatalf("byte %d: a new log holds %d entries", off, got)
		}
	}
	if found == 0 {
		t.Fatal("no flip was found: the case this check is for is not exercised")
	}
	t.Logf("%d of %d flips found", found, (len(orig)+metaStep-1)/metaStep)
}

// metaStep is the stride of the flips TestQuarantineLog_CorruptMetadata
// tries (every byte when tuned down by hand: about 3 minutes).
var metaStep = 61
