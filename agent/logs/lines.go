package logs

import (
	"bytes"
	"errors"
	"io"
)

// errLineLimit ends a source whose line grew past the line limit.
var errLineLimit = errors.New("log line over the limit")

// Read buffer of a source: it starts small, since most followed sources
// are quiet most of the time and an agent may hold hundreds of them, and
// doubles each time a read fills it, up to maxReadBuffer for a busy one.
const (
	minReadBuffer = 512
	maxReadBuffer = 64 << 10
)

// lineReader splits a log stream at '\n'. It keeps at most keep bytes of a
// line (the rest would be truncated anyway) and gives up on a line longer
// than limit.
type lineReader struct {
	r     io.Reader
	buf   []byte // nil until the first read
	start int    // buf[start:end] is read but not returned yet
	end   int
	full  bool // the last read filled buf
	empty int  // reads in a row that returned nothing
	keep  int
	limit int
	err   error // the reader's error, returned once the buffer is drained
}

func newLineReader(r io.Reader, keep, limit int) *lineReader {
	return &lineReader{r: r, keep: keep, limit: limit}
}

// next returns the next line without its '\n'. A last line without '\n'
// is returned before the end. The error is io.EOF at the end,
// errLineLimit for an endless line, or the reader's.
func (l *lineReader) next() ([]byte, error) {
	var line []byte
	total := 0
	for {
		data := l.buf[l.start:l.end]
		i := bytes.IndexByte(data, '\n')
		frag := data
		if i >= 0 {
			frag = data[:i]
			l.start += i + 1
		} else {
			l.start, l.end = 0, 0
		}
		total += len(frag)
		if room := l.keep - len(line); room > 0 {
			line = append(line, frag[:min(room, len(frag))]...)
		}
		if total > l.limit {
			l.err = errLineLimit
			l.start, l.end = 0, 0
			return nil, l.err
		}
		if i >= 0 {
			return orEmpty(line), nil
		}
		if l.err != nil {
			if total > 0 {
				return line, nil
			}
			return nil, l.err
		}
		l.fill()
	}
}

// maxEmptyReads ends a reader that keeps returning nothing, as bufio
// does.
const maxEmptyReads = 100

// fill reads once into the drained buffer, allocating it at the first
// read and growing it when the last read filled it.
func (l *lineReader) fill() {
	switch {
	case l.buf == nil:
		l.buf = make([]byte, minReadBuffer)
	case l.full && len(l.buf) < maxReadBuffer:
		l.buf = make([]byte, 2*len(l.buf))
	}
	n, err := l.r.Read(l.buf)
	l.start, l.end, l.full = 0, n, n == len(l.buf)
	switch {
	case err != nil:
		l.err = err
	case n > 0:
		l.empty = 0
	default:
		if l.empty++; l.empty >= maxEmptyReads {
			l.err = io.ErrNoProgress
		}
	}
}

// orEmpty keeps an empty line distinct from no line.
func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
