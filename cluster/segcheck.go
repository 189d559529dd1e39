package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/hashicorp/go-hclog"
	wal "github.com/hashicorp/raft-wal"

	"github.com/grapnel-io/grapnel/internal/durable"
)

// The WAL's segments before raft-wal opens them (issue 29 point 3; docs/operations.md,
// "Corrupted or lost data").
//
// raft-wal checks a CRC over the last commit batch of the open segment at
// open, and stops reading it at the first frame header it cannot decode.
// Either way it takes what follows for a torn write (a power cut in the
// middle of an unsynced append) and drops it silently. A torn write was
// never synced, so never acknowledged; but a bit flipped at rest in that
// batch, or in any frame header of the open segment, makes raft-wal drop
// synced entries the same way, and a replica that forgets what it
// acknowledged must hold its vote (votehold.go).
//
// checkTail tells the two apart before raft-wal opens the segment, from
// what a torn write leaves behind. Segments are preallocated with zeros
// and written in order, one batch per write, each batch ending with its
// commit frame, so a torn append leaves either no commit frame at its end
// (a prefix reached the flash) or a hole of zeros (sectors reached it out
// of order). Data that was whole when written and rotted since ends with
// a commit frame and has no hole. That is what the check asks: past the
// point where raft-wal's recovery stops, is there data up to a commit
// frame with no run of zeros? Then entries are dropped that were synced,
// and the replica holds its vote for them, moves the bytes to the
// quarantine and zeroes them, so that the next start does not find them
// again. The check reads the frame headers (as raft-wal does) and the
// dropped bytes, no more.
//
// Before that, repairHeaders checks each segment's 32-byte file header
// against its name: raft-wal refuses to open a log whose header does not
// match, and the replica would exit at every start.

// The parts of raft-wal's segment format the check reads
// (raft-wal/segment/format.go, v0.4.2).
const (
	segFileHeader  = 32
	segFrameHeader = 8
	segFrameEntry  = 1
	segFrameIndex  = 2
	segFrameCommit = 3
	segMagic       = 0x58eb6b0d
	// segHole is the shortest run of zero bytes taken for a hole a torn
	// write left. No frame has one: padding is under 8 bytes, and the
	// entries are protobuf and CRCs.
	segHole = 64
)

// tailLoss is what raft-wal will drop at open although it was synced.
type tailLoss struct {
	seg string // the segment file
	// from and to bound the dropped bytes: from is where raft-wal's
	// recovery resumes writing (after the last commit it keeps).
	from, to int64
	// kept is how many entries of the segment raft-wal keeps; baseIndex
	// is the segment's first index.
	kept, baseIndex uint64
	// lastIndex and lastTerm are the last dropped entry's, when every
	// frame of the dropped bytes could be read (exact); otherwise 0.
	lastIndex, lastTerm uint64
	// frames is how many entry frames the dropped bytes hold, at least.
	frames uint64
}

// checkTail reads the newest segment of the WAL in dir, if any, and
// returns what raft-wal's recovery will drop of it although it was synced
// (nil: nothing, or a torn write).
func checkTail(dir string) (*tailLoss, error) {
	segs, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil || len(segs) == 0 {
		return nil, err
	}
	// Names are zero-padded base index, then ID: the last sorts last.
	slices.Sort(segs)
	seg := segs[len(segs)-1]
	f, err := os.Open(seg)
	if err != nil {
		return nil, fmt.Errorf("cluster: check the raft log's tail: %w", err)
	}
	defer f.Close()
	var base, id uint64
	if _, err := fmt.Sscanf(filepath.Base(seg), "%020d-%016x.wal", &base, &id); err != nil {
		return nil, fmt.Errorf("cluster: check the raft log's tail: segment name %s: %w", filepath.Base(seg), err)
	}
	loss, err := scanTail(f, base)
	if err != nil || loss == nil {
		return nil, err
	}
	loss.seg = seg
	return loss, nil
}

// scanTail is checkTail on one segment file whose first index is base
// (from its name).
func scanTail(f io.ReaderAt, base uint64) (*tailLoss, error) {

	// Walk the frames as raft-wal's readThroughSegment does, keeping the
	// last two commits as its recoverTail does.
	type commit struct {
		off     int64
		entries uint64
	}
	var prev, final *commit
	var entries uint64
	off := int64(segFileHeader)
	var fh [segFrameHeader]byte
	for {
		n, err := f.ReadAt(fh[:], off)
		if n < segFrameHeader {
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("cluster: check the raft log's tail: %w", err)
			}
			break
		}
		typ := fh[0]
		if typ == 0 || typ > segFrameCommit {
			break // zeros or a header raft-wal cannot decode: it stops here
		}
		if typ == segFrameCommit {
			prev, final = final, &commit{off: off, entries: entries}
			off += segFrameHeader
			continue
		}
		if typ == segFrameEntry {
			entries++
		}
		l := int64(binary.LittleEndian.Uint32(fh[4:8]))
		off += segFrameHeader + l + (8-l%8)%8
	}
	if final == nil {
		return scanDropped(f, base, 0, 0)
	}
	keep := final
	if final.entries == entries {
		// The last frame is a commit: raft-wal checks its batch's CRC,
		// from after the previous commit (from 0 for the first).
		start := int64(0)
		if prev != nil {
			start = prev.off + segFrameHeader
		}
		buf := make([]byte, final.off-start)
		if _, err := f.ReadAt(buf, start); err != nil {
			return nil, fmt.Errorf("cluster: check the raft log's tail: %w", err)
		}
		if _, err := f.ReadAt(fh[:], final.off); err != nil {
			return nil, fmt.Errorf("cluster: check the raft log's tail: %w", err)
		}
		if crc32.Checksum(buf, castagnoli) != binary.LittleEndian.Uint32(fh[4:8]) {
			keep = prev
		}
	}
	if keep == nil {
		return scanDropped(f, base, 0, 0)
	}
	return scanDropped(f, base, keep.off+segFrameHeader, keep.entries)
}

// scanDropped looks at the bytes after from, where raft-wal resumes
// writing, and returns the loss when they are a whole batch (see the top).
func scanDropped(f io.ReaderAt, base uint64, from int64, kept uint64) (*tailLoss, error) {
	start := max(from, segFileHeader)
	// Find the end of the data: the last non-zero byte before a hole or
	// the end of the file.
	end, zeros := start, int64(0)
	buf := make([]byte, 4096)
	for pos := start; ; {
		n, err := f.ReadAt(buf, pos)
		for i, b := range buf[:n] {
			if b != 0 {
				end, zeros = pos+int64(i)+1, 0
			} else if zeros++; zeros >= segHole {
				break
			}
		}
		if zeros >= segHole || n < len(buf) {
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("cluster: check the raft log's tail: %w", err)
			}
			break
		}
		pos += int64(n)
	}
	if end == start {
		return nil, nil // nothing past the last commit raft-wal keeps
	}
	data := make([]byte, end-start)
	if _, err := f.ReadAt(data, start); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("cluster: check the raft log's tail: %w", err)
	}
	// The data, up to the first hole (sectors of a torn write missing),
	// must end with a commit frame. Frames are 8-aligned in the
	// file; a torn prefix that ends inside the commit frame leaves its
	// last bytes zero, so the frame's last byte must be set (a CRC ends in
	// zero once in 256: such a flip goes unseen, as before).
	last := (end - 1) &^ 7
	if end-last != 8 || last < start {
		return nil, nil
	}
	c := data[last-start:]
	if c[0] != segFrameCommit || (c[1]|c[2]|c[3]) != 0 {
		return nil, nil // no commit at the end: a torn prefix
	}
	loss := &tailLoss{from: from, to: end, kept: kept, baseIndex: base}
	// Read the dropped entries' index and term (the codec's first two
	// varints) while the frames follow each other up to that commit.
	next := base + kept
	exact := true
	off := int64(0)
	for off < last-start {
		if off+segFrameHeader > int64(len(data)) {
			exact = false
			break
		}
		h := data[off : off+segFrameHeader]
		l := int64(binary.LittleEndian.Uint32(h[4:8]))
		switch h[0] {
		case segFrameCommit:
			off += segFrameHeader
			continue
		case segFrameEntry, segFrameIndex:
		default:
			exact = false
		}
		if !exact {
			break
		}
		p := off + segFrameHeader
		if p+l > int64(len(data)) {
			exact = false
			break
		}
		if h[0] == segFrameEntry {
			loss.frames++
			idx, k := binary.Uvarint(data[p : p+l])
			term, k2 := uint64(0), 0
			if k > 0 {
				term, k2 = binary.Uvarint(data[p+int64(k) : p+l])
			}
			if k <= 0 || k2 <= 0 || idx != next {
				exact = false
			} else {
				loss.lastIndex, loss.lastTerm = idx, term
				next++
			}
		}
		off = p + l + (8-l%8)%8
	}
	if !exact || off != last-start || loss.frames == 0 {
		loss.lastIndex, loss.lastTerm = 0, 0
		// Each entry frame takes at least 16 bytes: a bound on how many
		// the dropped bytes held.
		loss.frames = max(loss.frames, uint64(end-start)/16)
	}
	return loss, nil
}

// repairTail holds the vote for what checkTail found raft-wal dropped,
// then moves the dropped bytes to the quarantine and zeroes them in the
// segment. w is the WAL raft-wal opened after the check.
func repairTail(dataDir string, loss *tailLoss, w *wal.WAL, hold *holdState, c *integrity,
	logger hclog.Logger, currentTerm func() uint64) error {
	if loss == nil {
		return nil
	}
	c.found.Add(1)
	last, err := w.LastIndex()
	if err != nil {
		return fmt.Errorf("cluster: integrity: %w", err)
	}
	v := voteHold{Reason: "lost synced entries at the end of its log", Since: hold.now()}
	if loss.lastIndex != 0 {
		v.Index, v.Term = loss.lastIndex, loss.lastTerm
	} else {
		// Not every dropped frame could be read: a bound on what was
		// there, no less than it (the current term bounds every entry's).
		v.Index, v.Term = max(last, loss.baseIndex+loss.kept-1)+loss.frames, currentTerm()
	}
	if err := hold.hold(v); err != nil {
		return err
	}
	// Zero the bytes only where raft-wal agrees on the entries it kept:
	// then they are past its end, and it overwrites them anyway.
	agrees := last == loss.baseIndex+loss.kept-1
	if agrees {
		if err := quarantineTail(dataDir, loss); err != nil {
			return err
		}
		c.repaired.Add(1)
	}
	logger.Error("corrupt Raft log: synced entries at the end of the open WAL segment failed their check and were dropped; "+
		"this replica catches up from the leader and votes only for a log at least as current as the one it had",
		"segment", filepath.Base(loss.seg), "offset", loss.from, "bytes", loss.to-loss.from, "entries", loss.frames,
		"kept_last_index", last, "hold_index", hold.Held().Index, "hold_term", hold.Held().Term,
		"quarantined", agrees)
	return nil
}

// quarantineTail copies the dropped bytes to the quarantine, durably,
// then zeroes them in the segment and syncs it.
func quarantineTail(dataDir string, loss *tailLoss) error {
	f, err := os.OpenFile(loss.seg, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("cluster: integrity: %w", err)
	}
	defer f.Close()
	b := make([]byte, loss.to-loss.from)
	if _, err := f.ReadAt(b, loss.from); err != nil {
		return fmt.Errorf("cluster: integrity: %w", err)
	}
	dir := filepath.Join(dataDir, quarantineDir)
	if err := durable.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cluster: integrity: %w", err)
	}
	name := fmt.Sprintf("%s.tail-%d", filepath.Base(loss.seg), loss.from)
	if err := durable.WriteFile(filepath.Join(dir, name), b, dataFileMode); err != nil {
		return fmt.Errorf("cluster: integrity: %w", err)
	}
	clear(b)
	if _, err := f.WriteAt(b, loss.from); err != nil {
		return fmt.Errorf("cluster: integrity: zero the dropped tail: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("cluster: integrity: zero the dropped tail: %w", err)
	}
	return nil
}

// repairHeaders checks the 32-byte file header of every segment of the
// WAL in dir against its name, before raft-wal opens them: a header that
// does not match makes raft-wal refuse to open the log ("segment header
// BaseIndex 0 doesn't match metadata 1"), and the replica would exit at
// every start. A header is rebuilt from the name (raft-wal's magic,
// version 0, base index, ID, its binary codec) when the segment's first
// commit, whose CRC covers the header, confirms the rebuilt bytes are
// the ones written. It returns the segments rebuilt.
func repairHeaders(dir string, logger hclog.Logger) ([]string, error) {
	segs, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		return nil, err
	}
	var fixed []string
	for _, seg := range segs {
		var base, id uint64
		if _, err := fmt.Sscanf(filepath.Base(seg), "%020d-%016x.wal", &base, &id); err != nil {
			continue // not raft-wal's: it ignores it too
		}
		ok, err := repairHeader(seg, base, id)
		if err != nil {
			return fixed, fmt.Errorf("cluster: check the raft log's segment headers: %w", err)
		}
		if ok {
			fixed = append(fixed, filepath.Base(seg))
			logger.Error("corrupt Raft log: a WAL segment's header failed its check; rebuilt from its name, "+
				"its first commit's CRC confirming it", "segment", filepath.Base(seg))
		}
	}
	return fixed, nil
}

// repairHeader rebuilds one segment's header if it differs from what its
// name says and the first commit confirms the rebuilt one.
func repairHeader(seg string, base, id uint64) (bool, error) {
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var want, got [segFileHeader]byte
	binary.LittleEndian.PutUint32(want[0:4], segMagic)
	binary.LittleEndian.PutUint64(want[8:16], base)
	binary.LittleEndian.PutUint64(want[16:24], id)
	binary.LittleEndian.PutUint64(want[24:32], wal.CodecBinaryV1)
	if n, err := f.ReadAt(got[:], 0); n < len(got) {
		if errors.Is(err, io.EOF) {
			return false, nil // never written
		}
		return false, err
	}
	if got == want || got == [segFileHeader]byte{} {
		return false, nil // whole, or never committed
	}
	// The first commit frame: the first frame of type commit, walking
	// the frames from the header (their own headers are not covered by
	// this question).
	var fh [segFrameHeader]byte
	off := int64(segFileHeader)
	for {
		if n, err := f.ReadAt(fh[:], off); n < segFrameHeader {
			if err != nil && !errors.Is(err, io.EOF) {
				return false, err
			}
			return false, nil
		}
		if fh[0] == segFrameCommit {
			break
		}
		if fh[0] == 0 || fh[0] > segFrameCommit {
			return false, nil // no commit to confirm a rebuilt header
		}
		l := int64(binary.LittleEndian.Uint32(fh[4:8]))
		off += segFrameHeader + l + (8-l%8)%8
	}
	batch := make([]byte, off)
	if _, err := f.ReadAt(batch, 0); err != nil {
		return false, err
	}
	copy(batch, want[:])
	if crc32.Checksum(batch, castagnoli) != binary.LittleEndian.Uint32(fh[4:8]) {
		return false, nil // the first batch is damaged too: leave it to raft-wal and the checks
	}
	if _, err := f.WriteAt(want[:], 0); err != nil {
		return false, err
	}
	return true, f.Sync()
}
