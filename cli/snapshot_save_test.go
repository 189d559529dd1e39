package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"testing"

	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/grapnel-io/grapnel/internal/durable/crashfs"
)

// chunks returns a recv that hands out parts one by one, then io.EOF.
func chunks(parts ...[]byte) func() ([]byte, error) {
	return func() ([]byte, error) {
		if len(parts) == 0 {
			return nil, io.EOF
		}
		p := parts[0]
		parts = parts[1:]
		return p, nil
	}
}

// A power cut while `grapnel cluster snapshot save FILE` writes over an
// earlier backup leaves the earlier backup or the new one, whole; once
// it said "saved", the new one.
func TestSnapshotSaveCrashSafe(t *testing.T) {
	const file = "/backup/state.snap"
	old := []byte("an earlier snapshot")
	parts := [][]byte{[]byte("GRAPNEL-SNAPSHOT "), []byte("records "), []byte("end")}
	whole := bytes.Join(parts, nil)
	crashfs.Check(t, crashfs.Sequence{
		Seed: func(m *crashfs.FS) { m.Seed(file, old, 0o600) },
		Run: func(m *crashfs.FS) error {
			n, err := saveSnapshot(durable.On(m), file, chunks(parts...))
			if err == nil && n != int64(len(whole)) {
				return fmt.Errorf("saved %d bytes, want %d", n, len(whole))
			}
			return err
		},
		Check: func(c crashfs.Crash) error {
			data, err := os.ReadFile(c.Path(file))
			switch {
			case err != nil:
				return err
			case bytes.Equal(data, whole), bytes.Equal(data, old) && !c.Done:
				return nil
			}
			return fmt.Errorf("the backup holds %q", data)
		},
	})
}

// A save that receives nothing, or whose stream breaks, leaves the
// earlier file as it was and no temporary file.
func TestSnapshotSaveFailureKeepsFile(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/state.snap"
	if err := os.WriteFile(file, []byte("earlier"), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := errors.New("stream reset")
	for _, tc := range []struct {
		recv func() ([]byte, error)
		want string
	}{
		{chunks(), "the server sent an empty snapshot"},
		{func() ([]byte, error) { return nil, broken }, broken.Error()},
	} {
		if _, err := saveSnapshot(durable.OS, file, tc.recv); err == nil || err.Error() != tc.want {
			t.Fatalf("got %v, want %q", err, tc.want)
		}
		if data, _ := os.ReadFile(file); string(data) != "earlier" {
			t.Fatalf("the earlier file now holds %q", data)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Fatalf("left behind: %v", entries)
		}
	}
	if _, err := saveSnapshot(durable.OS, dir+"/missing/state.snap", chunks([]byte("x"))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a save into a missing directory: %v", err)
	}
}
