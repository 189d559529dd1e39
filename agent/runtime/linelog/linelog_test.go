package linelog

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/clock"
)

// The selection the runtimes' Logs promise: Since and Until by the
// lines' times, Tail after them, lines in another format skipped, and a
// last line without its newline left for the writer to finish.
func TestReaderSelects(t *testing.T) {
	base := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	var b strings.Builder
	for i := range 6 {
		b.WriteString(base.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano) + " O line" + string(rune('0'+i)) + "\n")
	}
	b.WriteString("not a log line\n")
	b.WriteString(base.Add(9*time.Second).Format(time.RFC3339Nano) + " E unfinished")
	path := filepath.Join(t.TempDir(), "output.log")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    runtime.LogOptions
		want string
	}{
		{"all", runtime.LogOptions{Tail: -1}, "line0\nline1\nline2\nline3\nline4\nline5\n"},
		{"tail 2", runtime.LogOptions{Tail: 2}, "line4\nline5\n"},
		{"tail 0", runtime.LogOptions{Tail: 0}, ""},
		{"since and until", runtime.LogOptions{Tail: -1, Since: base.Add(time.Second), Until: base.Add(3 * time.Second)}, "line1\nline2\nline3\n"},
		{"tail after since", runtime.LogOptions{Tail: 1, Since: base.Add(2 * time.Second), Until: base.Add(4 * time.Second)}, "line4\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			r := Reader(context.Background(), f, tc.o, clock.Real(), Follow{Every: time.Millisecond, Ended: func() bool { return true }})
			defer r.Close()
			got, err := io.ReadAll(r)
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
