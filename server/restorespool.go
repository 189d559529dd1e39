package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// DefaultMaxRestoreBytes caps a snapshot upload when Config.MaxRestoreBytes
// is zero. The desired-state limits keep a snapshot to some tens of MiB;
// the cap only keeps an upload from filling the data directory's disk.
const DefaultMaxRestoreBytes int64 = 256 << 20

// RestoreSpoolDir is the directory under the data directory that holds a
// snapshot upload while it is checked: the snapshot is copied to the same
// disk by Raft anyway, while /tmp may be a small tmpfs in RAM.
const RestoreSpoolDir = "restore-spool"

// restoreSpool receives, bounds and checks snapshot uploads before Raft
// sees them: hashicorp/raft panics when the FSM refuses a user snapshot,
// after having stored it among the replica's snapshots, where it then
// stops the replica from starting.
type restoreSpool struct {
	dir string
	max int64
	// sem lets one restore run at a time, so the spool holds at most max
	// bytes.
	sem chan struct{}
}

// newRestoreSpool prepares the spool under dataDir and removes what a
// restore that was running when the replica stopped left there.
func newRestoreSpool(dataDir string, max int64, log *slog.Logger) *restoreSpool {
	if max <= 0 {
		max = DefaultMaxRestoreBytes
	}
	s := &restoreSpool{dir: filepath.Join(dataDir, RestoreSpoolDir), max: max, sem: make(chan struct{}, 1)}
	if err := os.RemoveAll(s.dir); err != nil {
		log.Warn("could not remove stale snapshot uploads", "dir", s.dir, "error", err)
	}
	return s
}

// restore receives one upload through recv into a spool file, checks that
// it is a whole, undamaged snapshot with the FSM's own reader, and only
// then hands it to apply with its size. The file is removed whatever
// happens. A refused upload leaves the replica as it was.
func (s *restoreSpool) restore(ctx context.Context, recv func() (*grapnelpb.SnapshotChunk, error), apply func(r io.Reader, size int64) error) error {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.sem }()
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("snapshot restore: spool directory: %w", err)
	}
	f, err := os.CreateTemp(s.dir, "upload-*.snap")
	if err != nil {
		return fmt.Errorf("snapshot restore: spool file: %w", err)
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	size, err := s.receive(f, recv)
	if err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	if _, err := fsm.VerifySnapshot(f); err != nil {
		return fmt.Errorf("snapshot restore: %w; nothing was changed", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	return apply(f, size)
}

// receive writes the chunks to f until the client closes its side, and
// stops at once when they pass the cap.
func (s *restoreSpool) receive(f *os.File, recv func() (*grapnelpb.SnapshotChunk, error)) (int64, error) {
	var size int64
	for {
		chunk, err := recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
		if size+int64(len(chunk.GetData())) > s.max {
			return 0, errs.WithText(errs.ErrSnapshotTooLarge, fmt.Sprintf(
				"snapshot restore: the upload is larger than this replica accepts (%d bytes, --max-restore-bytes); nothing was changed", s.max))
		}
		n, err := f.Write(chunk.GetData())
		size += int64(n)
		if err != nil {
			return 0, fmt.Errorf("snapshot restore: spooling to %s: %w", f.Name(), err)
		}
	}
	if size == 0 {
		return 0, fmt.Errorf("%w: snapshot: no data received", state.ErrInvalid)
	}
	return size, nil
}
