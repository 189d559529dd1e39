package cluster

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
	bolt "go.etcd.io/bbolt"

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
// Before all that, checkMeta reads raft-wal's metadata file whole: a
// corrupt one moves the log to the quarantine (quarantineLog). Then
// repairHeaders checks each segment's 32-byte file header
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
	// Frame header by frame header, from a window read ahead
	// (readahead.go).
	loss, err := scanTail(&aheadReader{r: f}, base)
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

// checkMeta reads the WAL's metadata file (raft-wal's wal-meta.db, a
// bbolt file: the segment list, the term and the vote) whole and
// read-only, before raft-wal opens it. A bit flipped in it can make bbolt
// fault on its memory map (a SIGSEGV no recover catches unless the
// goroutine asks for it), panic, or raft-wal refuse the log: the replica
// would exit at every start. It returns an error wrapping ErrCorrupt for
// such a file, and any other error (locked, unreadable directory) as it
// is.
func checkMeta(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster: raft log metadata: %w", err)
	}
	if err := checkBolt(b); err != nil {
		return err
	}
	// The structure is sound; what bbolt and raft-wal then read is read
	// here first, guarded all the same.
	done := make(chan error, 1)
	go func() {
		debug.SetPanicOnFault(true)
		defer func() {
			if r := recover(); r != nil {
				done <- &CorruptError{What: "raft log metadata", Reason: fmt.Sprint(r)}
			}
		}()
		done <- readMeta(path)
	}()
	return <-done
}

func readMeta(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		var pe *fs.PathError
		if errors.Is(err, bolt.ErrTimeout) || errors.As(err, &pe) {
			return fmt.Errorf("cluster: raft log metadata %s: %w", path, err)
		}
		return &CorruptError{What: "raft log metadata", Reason: err.Error()}
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		// Every page reachable, as raft-wal and Raft will read them.
		err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error { return nil })
		})
		if err != nil {
			return &CorruptError{What: "raft log metadata", Reason: err.Error()}
		}
		meta := tx.Bucket([]byte(metadb.MetaBucket))
		if meta == nil {
			return &CorruptError{What: "raft log metadata", Reason: "no " + metadb.MetaBucket + " bucket"}
		}
		raw := meta.Get([]byte(metadb.MetaKey))
		if raw == nil {
			// raft-wal takes that for an empty log and creates its first
			// segment, which fails where segments are there.
			if segs, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.wal")); len(segs) > 0 {
				return &CorruptError{What: "raft log metadata", Reason: fmt.Sprintf("no segment list, and %d segment files", len(segs))}
			}
			return nil
		}
		if err := checkSegmentList(raw, filepath.Dir(path)); err != nil {
			return &CorruptError{What: "raft log metadata", Reason: "segment list: " + err.Error()}
		}
		return nil
	})
}

// quarantineLog moves the WAL to the quarantine when its metadata is
// corrupt (checkMeta), after the vote hold for an empty start is on disk:
// the segments cannot be read without their list, and the term and vote
// are gone with it. The replica starts from its newest snapshot and holds
// its vote as one that knows nothing of what it had (votehold.go). It
// reports whether it moved the WAL.
func quarantineLog(dataDir string, hold *holdState, now func() time.Time, logger hclog.Logger) (bool, error) {
	dir := filepath.Join(dataDir, walDir)
	err := checkMeta(filepath.Join(dir, metadb.FileName))
	var ce *CorruptError
	if !errors.As(err, &ce) {
		return false, err
	}
	if err := hold.hold(voteHold{Reason: "lost its Raft log: " + ce.Error(), Empty: true, Since: now()}); err != nil {
		return false, err
	}
	q := filepath.Join(dataDir, quarantineDir)
	if err := durable.MkdirAll(q, 0o700); err != nil {
		return false, fmt.Errorf("cluster: integrity: %w", err)
	}
	to := filepath.Join(q, fmt.Sprintf("%s-%d", walDir, now().UnixNano()))
	if err := durable.Rename(dir, to); err != nil {
		return false, fmt.Errorf("cluster: integrity: move the raft log to the quarantine: %w", err)
	}
	logger.Error("corrupt Raft log: its metadata (segment list, term, vote) cannot be read; the log was moved to the quarantine, "+
		"this replica starts from its newest snapshot, catches up from the leader and holds its vote meanwhile",
		"reason", ce.Reason, "quarantine", to)
	return true, nil
}

// checkSegmentList checks raft-wal's segment list as far as a flipped bit
// in it would make raft-wal refuse the log or lose track of a segment: a
// field name flipped drops that field silently (so unknown fields are
// refused), and a base index or ID flipped names a file that is not there.
// Flips in the other numbers are found when the entries are read.
func checkSegmentList(raw []byte, dir string) error {
	var st types.PersistentState
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return err
	}
	for i, seg := range st.Segments {
		if seg.ID >= st.NextSegmentID {
			return fmt.Errorf("segment ID %d not below the next ID %d", seg.ID, st.NextSegmentID)
		}
		if seg.SealTime.IsZero() && i != len(st.Segments)-1 {
			return fmt.Errorf("segment %d open but not the last", seg.ID)
		}
		if i > 0 && seg.BaseIndex <= st.Segments[i-1].BaseIndex {
			return fmt.Errorf("segment %d starts at %d, not after the one before", seg.ID, seg.BaseIndex)
		}
		if _, err := os.Stat(filepath.Join(dir, segment.FileName(seg))); err != nil {
			return fmt.Errorf("segment %d: %w", seg.ID, err)
		}
	}
	return nil
}
