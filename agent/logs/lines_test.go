package logs

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func TestLineReader(t *testing.T) {
	tests := []struct {
		name   string
		input  string
		keep   int
		limit  int
		want   []string
		endErr error
	}{
		{"lines", "a\nbb\n", 100, 1000, []string{"a", "bb"}, io.EOF},
		{"empty lines kept", "a\n\n\nb\n", 100, 1000, []string{"a", "", "", "b"}, io.EOF},
		{"last line without newline", "a\nlast", 100, 1000, []string{"a", "last"}, io.EOF},
		{"carriage return kept", "dos\r\n", 100, 1000, []string{"dos\r"}, io.EOF},
		{"nothing", "", 100, 1000, nil, io.EOF},
		{"long line cut to keep", "0123456789\nx\n", 4, 1000, []string{"0123", "x"}, io.EOF},
		{"line over the limit", "ok\n" + strings.Repeat("x", 70<<10) + "\nnever\n", 100, 65 << 10, []string{"ok"}, errLineLimit},
		{"line at the limit", strings.Repeat("x", 10) + "\n", 100, 10, []string{strings.Repeat("x", 10)}, io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLineReader(strings.NewReader(tt.input), tt.keep, tt.limit)
			var got []string
			for {
				line, err := l.next()
				if err != nil {
					if !errors.Is(err, tt.endErr) {
						t.Fatalf("end %v, want %v", err, tt.endErr)
					}
					break
				}
				got = append(got, string(line))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("lines %q, want %q", got, tt.want)
			}
			if _, err := l.next(); !errors.Is(err, tt.endErr) {
				t.Fatalf("after the end: %v", err)
			}
		})
	}
}

// splitRef is what lineReader must return, computed the plain way.
func splitRef(input string, keep, limit int) ([]string, error) {
	var out []string
	for input != "" {
		line, rest, found := strings.Cut(input, "\n")
		if len(line) > limit {
			return out, errLineLimit
		}
		out = append(out, line[:min(keep, len(line))])
		if !found {
			break
		}
		input = rest
	}
	return out, io.EOF
}

func readAll(t testing.TB, l *lineReader) ([]string, error) {
	var got []string
	for {
		line, err := l.next()
		if err != nil {
			return got, err
		}
		if line == nil {
			t.Fatal("a line is nil")
		}
		got = append(got, string(line))
	}
}

// TestLineReaderReads: lines come out the same whatever sizes the reads
// have, across the buffer's growth.
func TestLineReaderReads(t *testing.T) {
	long := strings.Repeat("l", 3*maxReadBuffer+7)
	input := "a\n" + long + "\n\nb" + strings.Repeat("c", 900) + "\n" + long[:maxReadBuffer] + "\nend"
	for _, keep := range []int{1, 100, maxReadBuffer + 1, 4 * maxReadBuffer} {
		want, _ := splitRef(input, keep, 1<<30)
		for name, r := range map[string]io.Reader{
			"whole":         strings.NewReader(input),
			"one byte":      iotest.OneByteReader(strings.NewReader(input)),
			"half":          iotest.HalfReader(strings.NewReader(input)),
			"err with data": iotest.DataErrReader(strings.NewReader(input)),
		} {
			got, err := readAll(t, newLineReader(r, keep, 1<<30))
			if !errors.Is(err, io.EOF) || !reflect.DeepEqual(got, want) {
				t.Fatalf("keep %d, %s reads: %d lines, %v; want %d", keep, name, len(got), err, len(want))
			}
		}
	}
}

// TestLineReaderBuffer: a quiet source holds a small buffer, a busy one
// grows it to the maximum and no further.
func TestLineReaderBuffer(t *testing.T) {
	pr, pw := io.Pipe()
	l := newLineReader(pr, DefaultMaxBatch, lineLimit)
	if l.buf != nil {
		t.Fatal("buffer allocated before the first read")
	}
	go func() {
		for range 10 {
			_, _ = io.WriteString(pw, "a short line\n")
		}
		_, _ = io.WriteString(pw, strings.Repeat("x", 1<<20)+"\n")
		pw.Close()
	}()
	for range 10 {
		if line, err := l.next(); err != nil || string(line) != "a short line" {
			t.Fatalf("%q, %v", line, err)
		}
	}
	if len(l.buf) != minReadBuffer {
		t.Fatalf("quiet source: buffer of %d bytes, want %d", len(l.buf), minReadBuffer)
	}
	if line, err := l.next(); err != nil || len(line) != 1<<20 {
		t.Fatalf("long line: %d bytes, %v", len(line), err)
	}
	if len(l.buf) != maxReadBuffer {
		t.Fatalf("busy source: buffer of %d bytes, want %d", len(l.buf), maxReadBuffer)
	}
}

// TestLineReaderNoProgress: a reader that returns nothing, forever, ends.
func TestLineReaderNoProgress(t *testing.T) {
	l := newLineReader(emptyReader{}, 100, 100)
	if _, err := l.next(); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("err %v", err)
	}
}

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

func FuzzLineReader(f *testing.F) {
	f.Add("a\nbb\n", 100, 1000, 3)
	f.Add("", 1, 1, 1)
	f.Add("x\n\n\nlast", 2, 3, 1)
	f.Add(strings.Repeat("y", 2000)+"\nz", 5, 1500, 700)
	f.Fuzz(func(t *testing.T, input string, keep, limit, chunk int) {
		if keep <= 0 || limit < 0 || chunk <= 0 {
			t.Skip()
		}
		want, wantErr := splitRef(input, keep, limit)
		got, err := readAll(t, newLineReader(&chunked{s: input, n: chunk}, keep, limit))
		if !errors.Is(err, wantErr) || !reflect.DeepEqual(got, want) {
			t.Fatalf("got %q, %v; want %q, %v", got, err, want, wantErr)
		}
	})
}

// chunked reads at most n bytes at a time.
type chunked struct {
	s string
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), c.n)], c.s)
	c.s = c.s[k:]
	return k, nil
}
