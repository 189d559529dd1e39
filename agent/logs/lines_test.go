package logs

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
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
