package controlif

import (
	"bufio"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
)

func logEntries(id string, size int) *ankbase.Response {
	return &ankbase.Response{RequestId: id, ResponseContent: &ankbase.Response_LogEntriesResponse{
		LogEntriesResponse: &ankbase.LogEntriesResponse{LogEntries: []*ankbase.LogEntry{{
			WorkloadName: &ankbase.WorkloadInstanceName{WorkloadName: "nginx", AgentName: "agent_A", Id: "1"},
			Message:      strings.Repeat("x", size),
		}}}}}
}

func bigAnswer(id string, size int) *ankbase.Response {
	r := completeStateResponse(id)
	r.GetCompleteStateResponse().AlteredFields = &ankbase.AlteredFields{AddedFields: []string{strings.Repeat("f", size)}}
	return r
}

// recorder is a slog handler that passes every message on a channel.
type recorder struct{ msgs chan string }

func (r recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r recorder) Handle(_ context.Context, rec slog.Record) error {
	select {
	case r.msgs <- rec.Message:
	default:
	}
	return nil
}
func (r recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r recorder) WithGroup(string) slog.Handler      { return r }

// TestWorkloadGone: a workload that does not take what the agent writes
// loses its log campaign; other answers are only dropped, and the
// interface stays for the workload to recover.
//
// swdd~agent-handles-control-interface-full-output-pipe-buffer~1
// swdd~agent-handles-control-interface-output-pipe-closed~1
// swdd~agent-handles-control-interface-workload-gone~1
func TestWorkloadGone(t *testing.T) {
	tests := []struct {
		name        string
		inputClosed bool // else the workload keeps `input` open but stops reading
		resp        *ankbase.Response
		wantCancel  bool
		// waits is how often the agent must wait on the clock before it
		// gives up: once for the write timeout, once per retry.
		waits int
	}{
		{"full pipe, log entries", false, logEntries("dyn@logs", 256<<10), true, 1},
		{"full pipe, other answer", false, bigAnswer("dyn@q", 256<<10), false, 1},
		{"input closed, log entries", true, logEntries("dyn@logs", 10), true, ankaiosTiming.retries},
		{"input closed, other answer", true, completeStateResponse("dyn@q"), false, ankaiosTiming.retries},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newForwarder()
			clk := clock.NewFake(time.Unix(0, 0))
			logs := recorder{msgs: make(chan string, 100)}
			c := New(Config{Agent: "agent_A", RunFolder: t.TempDir(), Forward: f.forward, Logger: slog.New(logs), Clock: clk})
			t.Cleanup(c.Shutdown)
			dir, err := c.Open(testInst, readAccess, nil)
			if err != nil {
				t.Fatal(err)
			}
			w := connect(t, dir)
			w.handshake()
			if tt.inputClosed {
				w.closeInput()
			}
			if !c.Deliver(tt.resp) {
				t.Fatal("not delivered")
			}
			waits := 0
			testwait.For(t, wait, func() bool {
				if clk.Pending() > 0 {
					waits++
					clk.Advance(ankaiosTiming.writeTimeout)
				}
				for {
					select {
					case m := <-logs.msgs:
						if strings.Contains(m, "does not read its input") {
							return true
						}
						continue
					default:
					}
					return false
				}
			}, "the agent gives up")
			// A wait may be counted twice when the clock is read while a
			// failing attempt has just armed its timeout, never less.
			if waits < tt.waits {
				t.Fatalf("the agent gave up after %d waits, want %d", waits, tt.waits)
			}
			if tt.wantCancel {
				if r := f.next(t); r.GetRequestId() != "dyn@logs" || r.GetLogsCancelRequest() == nil {
					t.Fatalf("forwarded %v, want a LogsCancelRequest for dyn@logs", r)
				}
			} else {
				f.none(t)
			}
			if !tt.inputClosed {
				return
			}
			// The workload opens `input` again and gets the next answer.
			in, err := os.OpenFile(filepath.Join(dir, inputName), os.O_RDONLY|unix.O_NONBLOCK, 0)
			if err != nil {
				t.Fatal(err)
			}
			w.in, w.reader = in, bufio.NewReader(in)
			c.Deliver(completeStateResponse("dyn@again"))
			if got := w.recv().GetResponse().GetRequestId(); got != "again" {
				t.Fatalf("after recovering got %q", got)
			}
		})
	}
}
