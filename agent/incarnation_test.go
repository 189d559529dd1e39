package agent

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"

	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/grapnel-io/grapnel/internal/durable/crashfs"
)

// A power cut at any point of writing the incarnation counter leaves the
// agent reading the old counter or the new one, never a damaged one it
// would have to warn about, and the new one once the write returned (the
// hello that follows carries it). A missing counter only shows when
// there was none before.
func TestIncarnationCrashSafe(t *testing.T) {
	const path = "/run/agent_A.incarnation"
	for _, old := range []uint64{0, 1_000_000} {
		t.Run(fmt.Sprintf("old=%d", old), func(t *testing.T) {
			const next = 1_000_001
			s := crashfs.Sequence{
				Seed: func(m *crashfs.FS) {
					m.SeedDir("/run")
					if old > 0 {
						m.Seed(path, []byte(fmt.Sprintf("%d\n", old)), 0o600)
					}
				},
				Run: func(m *crashfs.FS) error { return writeIncarnation(durable.On(m), path, next) },
				Check: func(c crashfs.Crash) error {
					var warnings bytes.Buffer
					got, err := readIncarnation(c.Path(path), slog.New(slog.NewTextHandler(&warnings, nil)))
					switch {
					case err != nil:
						return err
					case warnings.Len() > 0:
						return fmt.Errorf("the counter was damaged: %s", warnings.String())
					case got == next:
						return nil
					case c.Done:
						return fmt.Errorf("read %d once the write returned, want %d", got, next)
					case got != old:
						return fmt.Errorf("read %d, want the old %d or the new %d", got, old, next)
					}
					return nil
				},
			}
			crashfs.Check(t, s)
		})
	}
}
