package logs

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
)

func ptr[T any](v T) *T { return &v }

// swdd~agent-log-request-configuration~1
func TestOptions(t *testing.T) {
	since := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	until := time.Date(2026, 5, 1, 13, 30, 0, 500_000_000, time.FixedZone("", 2*3600))
	tests := []struct {
		name string
		req  *ankbase.LogsRequest
		want runtime.LogOptions
		err  string
	}{
		{"defaults", &ankbase.LogsRequest{}, runtime.LogOptions{Tail: -1}, ""},
		{"nil request", nil, runtime.LogOptions{Tail: -1}, ""},
		{"follow and tail", &ankbase.LogsRequest{Follow: ptr(true), Tail: ptr(int32(10))}, runtime.LogOptions{Follow: true, Tail: 10}, ""},
		{"tail -1 is all", &ankbase.LogsRequest{Tail: ptr(int32(-1))}, runtime.LogOptions{Tail: -1}, ""},
		{"since and until", &ankbase.LogsRequest{Since: ptr("2026-05-01T12:00:00Z"), Until: ptr("2026-05-01T13:30:00.5+02:00")},
			runtime.LogOptions{Tail: -1, Since: since, Until: until}, ""},
		{"empty times are unbounded", &ankbase.LogsRequest{Since: ptr(""), Until: ptr("")}, runtime.LogOptions{Tail: -1}, ""},
		{"bad since", &ankbase.LogsRequest{Since: ptr("yesterday")}, runtime.LogOptions{}, "logsRequest.since: 'yesterday' is not an RFC 3339 time"},
		{"bad until", &ankbase.LogsRequest{Until: ptr("2026-05-01")}, runtime.LogOptions{}, "logsRequest.until: '2026-05-01' is not an RFC 3339 time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := options(tt.req)
			if tt.err != "" {
				if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got.Follow != tt.want.Follow || got.Tail != tt.want.Tail ||
				!got.Since.Equal(tt.want.Since) || !got.Until.Equal(tt.want.Until) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestBatching: lines go out in order, in batches that never pass the
// limit, by default 2 MiB.
//
// swdd~agent-checks-size-of-logs~1
// swdd~agent-workload-log-facade-forwards-logs-to-server~1
func TestBatching(t *testing.T) {
	tests := []struct {
		name     string
		maxBatch int
		lines    int
		lineLen  int
	}{
		{"2 MiB default, 6 MiB of lines", 0, 6 << 10, 1 << 10},
		{"small batches", 4096, 2000, 100},
		{"lines of every length", 4096, 300, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.maxBatch)
			var want []string
			var raw strings.Builder
			for i := range tt.lines {
				n := tt.lineLen
				if n == 0 {
					n = i * 13 % 4000
				}
				l := fmt.Sprintf("%05d %s", i, strings.Repeat("y", n))
				want = append(want, l)
				raw.WriteString(l + "\n")
			}
			f.add("big", io.NopCloser(strings.NewReader(raw.String())))
			f.c.Start(request("r1", nil, "big"))
			batches := 0
			got := []string{}
			for stopped := false; !stopped; {
				m := f.nextFlushing()
				if r := m.GetLogEntriesResponse(); r != nil {
					batches++
					if size, limit := proto.Size(r.GetLogEntriesResponse()), f.c.cfg.MaxBatch; size > limit {
						t.Fatalf("batch of %d bytes over %d", size, limit)
					}
					for _, e := range r.GetLogEntriesResponse().GetLogEntries() {
						got = append(got, e.GetMessage())
					}
				}
				stopped = m.GetLogsStopResponse() != nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %d lines, want %d (or out of order)", len(got), len(want))
			}
			if min := tt.lines * (tt.lineLen + 6) / f.c.cfg.MaxBatch; batches < min {
				t.Fatalf("%d batches, want at least %d", batches, min)
			}
		})
	}
}

// TestTruncation: a line too long for a batch is cut, marked, and
// followed by a notice, both in a batch of their own.
//
// swdd~agent-checks-size-of-logs~1
func TestTruncation(t *testing.T) {
	const limit = 4096
	tests := []struct {
		name string
		long string
	}{
		{"ascii", strings.Repeat("x", 10000)},
		{"multi-byte", strings.Repeat("ä€😀", 2000)},
		{"invalid utf-8", strings.Repeat("a\xff", 5000)},
		{"longer than a read buffer", strings.Repeat("z", 200<<10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, limit)
			f.add("wl", readerOf("before\n", tt.long+"\n", "after\n"))
			f.c.Start(request("r", nil, "wl"))
			var batches [][]*ankbase.LogEntry
			for {
				m := f.nextFlushing()
				if m.GetLogsStopResponse() != nil {
					break
				}
				batches = append(batches, m.GetLogEntriesResponse().GetLogEntriesResponse().GetLogEntries())
			}
			if len(batches) != 3 || len(batches[0]) != 1 || batches[0][0].GetMessage() != "before" ||
				len(batches[2]) != 1 || batches[2][0].GetMessage() != "after" {
				t.Fatalf("batches %d: %v", len(batches), batches)
			}
			pair := batches[1]
			size := proto.Size(&ankbase.LogEntriesResponse{LogEntries: pair})
			if len(pair) != 2 || size > limit || size < limit-16 {
				t.Fatalf("truncated batch: %d entries, %d bytes", len(pair), size)
			}
			cut := pair[0].GetMessage()
			clean := strings.ToValidUTF8(tt.long, "\uFFFD")
			if !strings.HasSuffix(cut, " [truncated]") || !strings.HasPrefix(clean, strings.TrimSuffix(cut, " [truncated]")) || !utf8.ValidString(cut) {
				t.Fatalf("cut message %q...", cut[:40])
			}
			if want := fmt.Sprintf("The previous message was truncated due to exceeding the maximum %d bytes size.", limit); pair[1].GetMessage() != want {
				t.Fatalf("notice %q", pair[1].GetMessage())
			}
			if pair[1].GetWorkloadName().GetWorkloadName() != "wl" {
				t.Fatalf("notice names %v", pair[1].GetWorkloadName())
			}
		})
	}
}

func TestTruncateDefaultLimitText(t *testing.T) {
	e := &ankbase.LogEntry{Message: strings.Repeat("m", DefaultMaxBatch+10)}
	pair := truncate(e, DefaultMaxBatch)
	if got := pair[1].GetMessage(); got != "The previous message was truncated due to exceeding the maximum 2 MB size." {
		t.Fatalf("notice %q", got)
	}
	if size := proto.Size(&ankbase.LogEntriesResponse{LogEntries: pair}); size > DefaultMaxBatch {
		t.Fatalf("%d bytes", size)
	}
}

// TestLineLimit: a line past the line limit ends its source with a
// notice, as in Ankaios.
func TestLineLimit(t *testing.T) {
	f := newFixture(t, 4096)
	f.c.lineLimit = 1000
	f.add("wl", readerOf("ok\n", strings.Repeat("x", 1001)+"\n", "never\n"))
	f.c.Start(request("r", nil, "wl"))
	entries, _ := f.collect("r", "wl")
	want := []string{"ok", "The previous log message exceeded the maximum 1000 bytes size. Closing the log campaign."}
	if !reflect.DeepEqual(entries["wl"], want) {
		t.Fatalf("entries %q", entries["wl"])
	}
}

// TestStopPerSource: each source gets its LogsStopResponse when it ends,
// after its last line; an instance the agent does not run, or whose logs
// the runtime cannot give, gets one at once.
//
// swdd~agent-workload-log-facade-sends-logs-stop-response~1
func TestStopPerSource(t *testing.T) {
	f := newFixture(t, 0)
	short := newStream()
	long := newStream()
	f.add("short", short)
	f.add("long", long)
	f.known[instance("vanished")] = "vanished" // the runtime has no such id
	f.c.Start(request("r", &ankbase.LogsRequest{Follow: ptr(true)}, "unknown", "short", "vanished", "long"))

	for _, want := range []string{"unknown", "vanished"} {
		m := f.next()
		if got := m.GetLogsStopResponse().GetLogsStopResponse().GetWorkloadName().GetWorkloadName(); got != want {
			t.Fatalf("first stops: got %v, want %s", m, want)
		}
	}
	short.line(t, "s1", "s2")
	long.line(t, "l1")
	short.end()
	// "long" is still open when "short" stops.
	entries, stops := f.collectAlso("r", []string{"long"}, "short")
	if !reflect.DeepEqual(entries["short"], []string{"s1", "s2"}) || !reflect.DeepEqual(stops, []string{"short"}) {
		t.Fatalf("short: %v, stops %v", entries, stops)
	}
	long.line(t, "l2")
	long.end()
	more, _ := f.collect("r", "long")
	if got := append(entries["long"], more["long"]...); !reflect.DeepEqual(got, []string{"l1", "l2"}) {
		t.Fatalf("long: %v", got)
	}
	short.waitClosed(t)
	long.waitClosed(t)
	f.c.wait()
	f.none()
	if n := len(f.c.byID); n != 0 {
		t.Fatalf("%d campaigns left after every source ended", n)
	}
}
