package bench

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// seqChecker fails the test when one client's calls overlap or its seq
// does not count up by one.
type seqChecker struct {
	t      *testing.T
	mu     sync.Mutex // guards the following fields
	busy   map[int]bool
	last   map[int]int
	called atomic.Int64
}

func newSeqChecker(t *testing.T) *seqChecker {
	return &seqChecker{t: t, busy: map[int]bool{}, last: map[int]int{}}
}

func (c *seqChecker) enter(client, seq int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy[client] {
		c.t.Errorf("client %d: overlapping calls", client)
	}
	if seq != c.last[client]+1 {
		c.t.Errorf("client %d: seq %d after %d", client, seq, c.last[client])
	}
	c.busy[client], c.last[client] = true, seq
	c.called.Add(1)
}

func (c *seqChecker) leave(client int) {
	c.mu.Lock()
	c.busy[client] = false
	c.mu.Unlock()
}

var errOp = errors.New("op failed")

func TestRunLoad(t *testing.T) {
	tests := []struct {
		name      string
		cfg       LoadConfig
		fail      func(client, seq int) bool
		sleep     time.Duration
		wantErr   error
		check     func(t *testing.T, s Sample)
		minCalled int64
	}{
		{
			name: "count bounds the measured phase",
			cfg:  LoadConfig{Clients: 4, Count: 100, Duration: time.Minute},
			check: func(t *testing.T, s Sample) {
				if s.Ops != 100 || s.Errors != 0 || len(s.LatenciesNs) != 100 {
					t.Fatalf("ops %d errors %d latencies %d, want 100, 0, 100", s.Ops, s.Errors, len(s.LatenciesNs))
				}
			},
		},
		{
			name:  "duration bounds the measured phase",
			cfg:   LoadConfig{Clients: 3, Count: 1 << 30, Duration: 150 * time.Millisecond},
			sleep: time.Millisecond,
			check: func(t *testing.T, s Sample) {
				el := time.Duration(s.ElapsedNs)
				if el < 150*time.Millisecond || el > 5*time.Second {
					t.Fatalf("elapsed %v, want about 150ms", el)
				}
				if s.Ops == 0 {
					t.Fatal("nothing measured")
				}
				for _, l := range s.LatenciesNs {
					if time.Duration(l) < time.Millisecond {
						t.Fatalf("latency %v is shorter than the operation", time.Duration(l))
					}
				}
			},
		},
		{
			name: "failures are counted, not measured",
			cfg:  LoadConfig{Clients: 2, Count: 50, Duration: time.Minute},
			fail: func(_, seq int) bool { return seq > 1 && seq%2 == 0 },
			check: func(t *testing.T, s Sample) {
				if s.Ops+s.Errors != 50 || s.Errors < 20 || s.FirstError != errOp.Error() {
					t.Fatalf("ops %d errors %d first %q", s.Ops, s.Errors, s.FirstError)
				}
			},
		},
		{
			name: "warm-up operations are not measured",
			cfg:  LoadConfig{Clients: 2, Count: 10, Duration: time.Minute, Warmup: 50 * time.Millisecond},
			check: func(t *testing.T, s Sample) {
				if s.Ops != 10 {
					t.Fatalf("ops %d, want 10", s.Ops)
				}
			},
			minCalled: 2 + 10 + 2, // first ops, measured ops, at least one warm-up round
		},
		{
			name:    "a failing first operation stops the run",
			cfg:     LoadConfig{Clients: 3, Count: 10, Duration: time.Second},
			fail:    func(client, seq int) bool { return client == 1 && seq == 1 },
			wantErr: errOp,
		},
		{name: "no clients", cfg: LoadConfig{Clients: 0, Count: 1, Duration: time.Second}, wantErr: ErrBadConfig},
		{name: "no count", cfg: LoadConfig{Clients: 1, Count: 0, Duration: time.Second}, wantErr: ErrBadConfig},
		{name: "no duration", cfg: LoadConfig{Clients: 1, Count: 1}, wantErr: ErrBadConfig},
		{name: "negative warm-up", cfg: LoadConfig{Clients: 1, Count: 1, Duration: time.Second, Warmup: -1}, wantErr: ErrBadConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newSeqChecker(t)
			op := func(_ context.Context, client, seq int) error {
				c.enter(client, seq)
				defer c.leave(client)
				time.Sleep(tt.sleep)
				if tt.fail != nil && tt.fail(client, seq) {
					return errOp
				}
				return nil
			}
			s, err := RunLoad(context.Background(), "fake", tt.cfg, op)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.System != "fake" || s.Clients != tt.cfg.Clients {
				t.Fatalf("sample labelled %q with %d clients", s.System, s.Clients)
			}
			tt.check(t, s)
			if n := c.called.Load(); n < tt.minCalled {
				t.Fatalf("op called %d times, want at least %d", n, tt.minCalled)
			}
		})
	}
}

func TestRunLoadStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	op := func(context.Context, int, int) error {
		if n.Add(1) == 20 {
			cancel()
		}
		return nil
	}
	_, err := RunLoad(ctx, "fake", LoadConfig{Clients: 2, Count: 1 << 30, Duration: time.Hour}, op)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}
