// Package linelog reads the workload output logs the agent's own loggers
// write, one line per output line: "<RFC3339Nano> <O|E> <text>\n", stdout
// and stderr merged in the order they were written. The process runtime's
// shim and the containerd runtime's logger write this format; Reader
// serves runtime.Runtime.Logs from it for both, with Since, Until, Tail
// and Follow.
package linelog

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/clock"
)

// Follow tells a following reader how often to look for new output and
// when no more can come.
type Follow struct {
	// Every is the time between looks.
	Every time.Duration
	// Ended reports that the writer is done: what the file holds now is
	// all there will be. It is called before each read, so that the read
	// that follows sees everything written before it returned true.
	Ended func() bool
}

// Reader streams the selected lines of f (which it closes) without their
// timestamp and stream prefix. Tail applies to the lines left after Since
// and Until. With o.Follow the reader ends (io.EOF) once fl.Ended and the
// file is drained, once a line past Until is seen or Until has passed on
// clk, or when ctx ends or the reader is closed.
func Reader(ctx context.Context, f *os.File, o runtime.LogOptions, clk clock.Clock, fl Follow) io.ReadCloser {
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	// Ending ctx ends the reader even while a write waits for it.
	context.AfterFunc(ctx, func() { pw.Close() })
	go func() {
		defer f.Close()
		s := &stream{opts: o, w: pw, ctx: ctx, clock: clk, follow: fl}
		pw.CloseWithError(s.run(f))
	}()
	return &reader{PipeReader: pr, cancel: cancel}
}

// reader ends the streaming goroutine when closed.
type reader struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (r *reader) Close() error {
	r.cancel()
	return r.PipeReader.Close()
}

// stream copies the selected lines of one log file to w.
type stream struct {
	opts   runtime.LogOptions
	w      io.Writer
	ctx    context.Context
	clock  clock.Clock
	follow Follow
	// partial holds the start of a line the writer is still writing.
	partial []byte
	// pastUntil is set once a line later than Until was read.
	pastUntil bool
}

func (s *stream) run(f *os.File) error {
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
	tick := clock.NewTicker(s.clock, s.follow.Every)
	defer tick.Stop()
	for {
		ended := s.follow.Ended()
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

// readLines reads the complete lines up to the end of the file and hands
// the text of those within Since and Until to fn.
func (s *stream) readLines(br *bufio.Reader, fn func([]byte) error) error {
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

func (s *stream) filter(line []byte, fn func([]byte) error) error {
	at, text, ok := ParseLine(line)
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
func (s *stream) emit(text []byte) error {
	out := make([]byte, 0, len(text)+1)
	out = append(append(out, text...), '\n')
	_, err := s.w.Write(out)
	return err
}

// ParseLine splits "<RFC3339Nano> <stream> <text>\n" into the time and
// the text; ok is false for a line not in that format.
func ParseLine(line []byte) (at time.Time, text []byte, ok bool) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return time.Time{}, nil, false
	}
	at, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return time.Time{}, nil, false
	}
	_, text, ok = bytes.Cut(rest, []byte{' '})
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
