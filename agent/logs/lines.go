package logs

import (
	"bufio"
	"errors"
	"io"
)

// errLineLimit ends a source whose line grew past the line limit.
var errLineLimit = errors.New("log line over the limit")

// lineReader splits a log stream at '\n'. It keeps at most keep bytes of a
// line (the rest would be truncated anyway) and gives up on a line longer
// than limit.
type lineReader struct {
	br    *bufio.Reader
	keep  int
	limit int
	err   error // returned after the last, unterminated line
}

func newLineReader(r io.Reader, keep, limit int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), keep: keep, limit: limit}
}

// next returns the next line without its '\n'. A last line without '\n'
// is returned before the end. The error is io.EOF at the end,
// errLineLimit for an endless line, or the reader's.
func (l *lineReader) next() ([]byte, error) {
	if l.err != nil {
		return nil, l.err
	}
	var line []byte
	total := 0
	for {
		frag, err := l.br.ReadSlice('\n')
		if err == nil {
			frag = frag[:len(frag)-1]
		}
		total += len(frag)
		if room := l.keep - len(line); room > 0 {
			line = append(line, frag[:min(room, len(frag))]...)
		}
		if total > l.limit {
			l.err = errLineLimit
			return nil, l.err
		}
		switch {
		case err == nil:
			return orEmpty(line), nil
		case errors.Is(err, bufio.ErrBufferFull):
		case total > 0:
			l.err = err
			return line, nil
		default:
			l.err = err
			return nil, err
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
