package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/runtime/linelog"
	"github.com/grapnel-io/grapnel/state"
)

// followInterval is how often a following reader looks for new output.
const followInterval = 100 * time.Millisecond

// Logs returns the workload's output lines, stdout and stderr merged in
// the order the shim logged them, without the log's timestamp and stream
// prefix. Tail applies to the lines left after Since and Until. With
// Follow the reader ends (io.EOF) once the workload has ended and its log
// is drained, once a line past Until is seen, or when ctx ends or the
// reader is closed.
func (r *Runtime) Logs(ctx context.Context, id runtime.ID, o runtime.LogOptions) (io.ReadCloser, error) {
	dir, err := r.recordDir(id)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(dir, logFile))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return nil, fmt.Errorf("%w: no process record for %s", runtime.ErrNotFound, id)
		}
		return nil, fmt.Errorf("process runtime: %s has no output log yet", id)
	}
	if err != nil {
		return nil, fmt.Errorf("process runtime: %w", err)
	}
	return linelog.Reader(ctx, f, o, r.cfg.Clock, linelog.Follow{Every: followInterval, Ended: func() bool {
		// No more output can come once the workload ended (or is lost)
		// or its record was deleted.
		st, err := observe(dir, r.boot)
		return err != nil || st.State == state.StateSucceeded || st.State == state.StateFailed
	}}), nil
}
