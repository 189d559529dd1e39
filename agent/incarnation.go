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
func nextIncarnation(path string, now time.Time, log *slog.Logger) (uint64, error) {
	var prev uint64
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return 0, fmt.Errorf("incarnation file %s: %w", path, err)
	default:
		prev, err = strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			log.Warn("incarnation file unreadable; starting from the clock", "file", path, "error", err)
			prev = 0
		}
	}
	next := prev + 1
	if clock := now.UnixMilli(); clock > 0 && uint64(clock) > next {
		next = uint64(clock)
	}
	if err := writeFileSync(path, []byte(strconv.FormatUint(next, 10)+"\n")); err != nil {
		return 0, fmt.Errorf("incarnation file %s: %w", path, err)
	}
	return next, nil
}

// writeFileSync replaces path with data so that a crash leaves either the
// old or the new content, both on disk.
func writeFileSync(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
