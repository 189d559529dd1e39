package cli

import (
	"bytes"
	"testing"
)

func TestScreen(t *testing.T) {
	tests := []struct {
		name     string
		terminal bool
		width    int
		shows    []string
		want     string
	}{
		{
			name:  "a pipe gets every block, then an empty line",
			shows: []string{"a\nb", "c"},
			want:  "a\nb\n\nc\n\n",
		},
		{
			name:     "a terminal redraws in place",
			terminal: true,
			shows:    []string{"a\nb", "c\nd"},
			want:     "\ra\x1b[K\nb\x1b[K\n" + "\r\x1b[2Ac\x1b[K\nd\x1b[K\n",
		},
		{
			name:     "a shorter block blanks the rest",
			terminal: true,
			shows:    []string{"a\nb\nc", "d"},
			want:     "\ra\x1b[K\nb\x1b[K\nc\x1b[K\n" + "\r\x1b[3Ad\x1b[K\n\x1b[K\n\x1b[K\n\x1b[2A",
		},
		{
			name:     "lines the terminal wraps count as several rows",
			terminal: true,
			width:    4,
			shows:    []string{"abcdefghi", "x"},
			want:     "\rabcdefghi\x1b[K\n" + "\r\x1b[3Ax\x1b[K\n\x1b[K\n\x1b[K\n\x1b[2A",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			s := &screen{w: &b, terminal: tt.terminal, width: tt.width}
			for _, text := range tt.shows {
				s.show(text)
			}
			if b.String() != tt.want {
				t.Fatalf("got %q\nwant %q", b.String(), tt.want)
			}
		})
	}
}
