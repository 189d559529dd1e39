package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/internal/durable"
)

// incarnationPath is where the agent keeps its incarnation counter.
func incarnationPath(runFolder, agent string) string {
	return filepath.Join(runFolder, agent+".incarnation")
}

// nextIncarnation reads the counter at path, advances it and writes it
// back atomically (a temporary file, fsynced, renamed over it, and the
// directory fsynced) before the agent says hello with it.
//
// The replicas keep the newest incarnation they accepted from every agent
// in their replicated state and drop reports of older ones, so the number
// must never go back, not even when the counter is lost: the default run
// folder lives under /tmp, and a run folder on a tmpfs loses it at every
// power cut. The next value is therefore the stored one plus one, but at
// least the current Unix time in milliseconds, which stays ahead of a
// counter that advanced once per start unless the agent restarted more
// than once a millisecond on average. (It was seconds: two power cycles
// within one second gave a tmpfs agent the same number twice, and the
// second life's reports were dropped as stale.) Milliseconds are ahead of
// any count of seconds an older agent stored. A missing file starts from
// the clock; an unreadable one too, with a warning.
//
// With an error next is still the number to use, from the clock when the
// counter could not be read: the caller decides whether the error ends
// the agent. A run folder whose storage failed does not (agent/storage):
// the agent runs with the number and writes it once the run folder works.
func nextIncarnation(path string, now time.Time, log *slog.Logger) (next uint64, err error) {
	prev, err := readIncarnation(path, log)
	next = prev + 1
	if clock := now.UnixMilli(); clock > 0 && uint64(clock) > next {
		next = uint64(clock)
	}
	if err != nil {
		return next, err
	}
	return next, writeIncarnation(durable.OS, path, next)
}

// readIncarnation is the counter stored at path: 0 when there is none,
// or when it is unreadable (with a warning).
func readIncarnation(path string, log *slog.Logger) (uint64, error) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("incarnation file %s: %w", path, err)
	}
	prev, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		log.Warn("incarnation file unreadable; starting from the clock", "file", path, "error", err)
		return 0, nil
	}
	return prev, nil
}

// writeIncarnation replaces the counter at path with n, so that a crash
// leaves the old or the new one and a returned call the new one.
func writeIncarnation(files durable.Files, path string, n uint64) error {
	if err := files.WriteFile(path, []byte(strconv.FormatUint(n, 10)+"\n"), 0o600); err != nil {
		return fmt.Errorf("incarnation file %s: %w", path, err)
	}
	return nil
}
