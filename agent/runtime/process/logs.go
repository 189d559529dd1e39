package process

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/clock"
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
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	// Ending ctx ends the reader even while a write waits for it.
	context.AfterFunc(ctx, func() { pw.Close() })
	go func() {
		defer f.Close()
		s := &logStream{dir: dir, boot: r.boot, opts: o, w: pw, ctx: ctx, clock: r.cfg.Clock}
		pw.CloseWithError(s.run(f))
	}()
	return &logReader{PipeReader: pr, cancel: cancel}, nil
}

// logReader ends the streaming goroutine when closed.
type logReader struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (l *logReader) Close() error {
	l.cancel()
	return l.PipeReader.Close()
}

// logStream copies the selected lines of one log file to w.
type logStream struct {
	dir  string
	boot string // the running boot, for observe
	opts runtime.LogOptions
	w    io.Writer
	ctx  context.Context
	// clock paces the follow polls and tells when Until has passed.
	clock clock.Clock
	// partial holds the start of a line the shim is still writing.
	partial []byte
	// pastUntil is set once a line later than Until was read.
	pastUntil bool
}

func (s *logStream) run(f *os.File) error {
	br := bufio.NewReader(f)
	var tail *ring
	if s.opts.Tail >= 0 {
		tail = &ring{max: s.opts.Tail}
	}
	// What is there now: buffered when a tail is asked for.
	if err := s.readLines(br, func(text []byte) error {
		if tail != nil {
			tail.push(text)
			return nil
		}
		return s.emit(text)
	}); err != nil {
		return err
	}
	if tail != nil {
		for _, text := range tail.lines() {
			if err := s.emit(text); err != nil {
				return err
			}
		}
	}
	if !s.opts.Follow {
		return nil
	}
	tick := clock.NewTicker(s.clock, followInterval)
	defer tick.Stop()
	for {
		// Look at the end before reading, so that the read that follows
		// sees everything written before the workload ended.
		ended := s.ended()
		if err := s.readLines(br, s.emit); err != nil {
			return err
		}
		if ended || s.pastUntil || (!s.opts.Until.IsZero() && s.clock.Now().After(s.opts.Until)) {
			return nil
		}
		select {
		case <-s.ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// ended reports whether no more output can come: the workload ended (or
// is lost) or its record was deleted.
func (s *logStream) ended() bool {
	st, err := observe(s.dir, s.boot)
	return err != nil || st.State == state.StateSucceeded || st.State == state.StateFailed
}

// readLines reads the complete lines up to the end of the file and hands
// the text of those within Since and Until to fn.
func (s *logStream) readLines(br *bufio.Reader, fn func([]byte) error) error {
	for !s.pastUntil {
		b, err := br.ReadSlice('\n')
		if len(b) > 0 {
			if errors.Is(err, io.EOF) || errors.Is(err, bufio.ErrBufferFull) {
				s.partial = append(s.partial, b...)
			} else {
				line := b
				if len(s.partial) > 0 {
					line = append(s.partial, b...)
					s.partial = s.partial[:0]
				}
				if err := s.filter(line, fn); err != nil {
					return err
				}
			}
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
	}
	return nil
}

func (s *logStream) filter(line []byte, fn func([]byte) error) error {
	at, text, ok := parseLogLine(line)
	switch {
	case !ok:
		return nil
	case !s.opts.Since.IsZero() && at.Before(s.opts.Since):
		return nil
	case !s.opts.Until.IsZero() && at.After(s.opts.Until):
		s.pastUntil = true // the log is in time order
		return nil
	}
	return fn(text)
}

// emit writes one line of text, '\n'-terminated.
func (s *logStream) emit(text []byte) error {
	out := make([]byte, 0, len(text)+1)
	out = append(append(out, text...), '\n')
	_, err := s.w.Write(out)
	return err
}

// parseLogLine splits "<RFC3339Nano> <stream> <text>\n".
func parseLogLine(line []byte) (time.Time, []byte, bool) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return time.Time{}, nil, false
	}
	at, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return time.Time{}, nil, false
	}
	_, text, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return time.Time{}, nil, false
	}
	return at, text, true
}

// ring keeps the newest max lines.
type ring struct {
	max  int
	buf  [][]byte
	next int
}

func (r *ring) push(b []byte) {
	if r.max == 0 {
		return
	}
	b = bytes.Clone(b)
	if len(r.buf) < r.max {
		r.buf = append(r.buf, b)
		return
	}
	r.buf[r.next] = b
	r.next = (r.next + 1) % r.max
}

func (r *ring) lines() [][]byte {
	return append(r.buf[r.next:len(r.buf):len(r.buf)], r.buf[:r.next]...)
}
