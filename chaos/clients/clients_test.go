package clients

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/history"
	"github.com/grapnel-io/grapnel/server/testcluster"
)

var testKeys = []string{"chaos_a", "chaos_b", "chaos_c"}

// staleReads returns a description of every OK read that a linearizable
// register per key could not have returned: a value nobody wrote to the
// key, a value whose write began after the read returned, or a value
// certainly overwritten (by an OK write or delete that began after the
// value's write returned and returned before the read began).
func staleReads(ops []history.Op) []string {
	writes := map[string]history.Op{} // value → its write
	for _, op := range ops {
		if op.Kind == history.Write {
			writes[op.Value] = op
		}
	}
	var bad []string
	for _, r := range ops {
		if r.Kind != history.Read || r.Outcome != history.OK {
			continue
		}
		for key, v := range r.Read {
			w, ok := writes[v]
			switch {
			case !ok || w.Key != key:
				bad = append(bad, fmt.Sprintf("op %d read %s=%q, which no write of %s produced", r.ID, key, v, key))
				continue
			case w.Call.After(r.Return):
				bad = append(bad, fmt.Sprintf("op %d read %s=%q before its write %d began", r.ID, key, v, w.ID))
				continue
			}
			for _, o := range ops {
				if o.Key == key && o.Outcome == history.OK && o.Kind != history.Read && o.ID != w.ID &&
					!w.Return.IsZero() && o.Call.After(w.Return) && o.Return.Before(r.Call) {
					bad = append(bad, fmt.Sprintf("op %d read %s=%q, overwritten by op %d before the read began", r.ID, key, v, o.ID))
					break
				}
			}
		}
	}
	return bad
}

// count tallies ops by kind and outcome.
func count(ops []history.Op) map[history.Kind]map[history.Outcome]int {
	out := map[history.Kind]map[history.Outcome]int{}
	for _, op := range ops {
		if out[op.Kind] == nil {
			out[op.Kind] = map[history.Outcome]int{}
		}
		out[op.Kind][op.Outcome]++
	}
	return out
}

func runFor(t *testing.T, d time.Duration, cfg Config, rec *history.Recorder) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	if err := Run(ctx, cfg, rec); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// Clients running for 2 s against a healthy cluster write, delete and
// read through the leader; every answered read is one a linearizable
// store could give, and the ack counter counts every acknowledged update.
func TestRunHealthyCluster(t *testing.T) {
	c := testcluster.New(t, 3)
	leader := c.WaitServing(20 * time.Second)
	acks := &Acks{}
	cfg := Config{
		Addrs: c.Addrs(), Clients: 3, Keys: testKeys, ReadShare: 0.3, DeleteShare: 0.15,
		Timeout: 2 * time.Second, Seed: 7, Acks: acks,
	}
	rec := history.NewRecorder()
	if took := runFor(t, 2*time.Second, cfg, rec); took > 2*time.Second+cfg.Timeout {
		t.Errorf("Run returned %v after its context ended", took-2*time.Second)
	}
	ops := rec.Ops()
	n := count(ops)
	t.Logf("%d ops: %v", len(ops), n)
	for _, k := range []history.Kind{history.Write, history.Read, history.Delete} {
		if n[k][history.OK] == 0 {
			t.Errorf("no OK %s among %d ops", k, len(ops))
		}
	}
	acked := 0
	for _, op := range ops {
		if op.Return.IsZero() || op.Outcome == "" {
			t.Fatalf("op %d still pending after Run returned: %+v", op.ID, op)
		}
		if op.Outcome != history.OK {
			continue
		}
		if op.Replica != leader {
			t.Errorf("op %d answered by %q, the leader is %q", op.ID, op.Replica, leader)
		}
		if op.Kind != history.Read {
			acked++
		}
	}
	if acks.Total() != acked {
		t.Errorf("Acks counted %d, the history has %d acknowledged updates", acks.Total(), acked)
	}
	for _, b := range staleReads(ops) {
		t.Error(b)
	}
}

// Stopping the leader mid-run gives Unknown or Fail outcomes for the
// operations caught by it, never a hang: Run returns within the timeout
// of its context ending, every op has ended, and the clients carry on
// with the new leader.
func TestRunLeaderStopped(t *testing.T) {
	c := testcluster.New(t, 3)
	old := c.WaitServing(20 * time.Second)
	cfg := Config{
		Addrs: c.Addrs(), Clients: 3, Keys: testKeys, ReadShare: 0.3, DeleteShare: 0.1,
		Timeout: time.Second, Seed: 11,
	}
	rec := history.NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, rec) }()
	time.Sleep(time.Second)
	c.Stop(old)
	stopped := time.Now()
	next := c.WaitServing(20*time.Second, old)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(6*time.Second + cfg.Timeout + 2*time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	ops := rec.Ops()
	t.Logf("%d ops: %v", len(ops), count(ops))
	var okAfter int
	for _, op := range ops {
		if op.Return.IsZero() || op.Outcome == "" {
			t.Fatalf("op %d still pending after Run returned: %+v", op.ID, op)
		}
		if d := op.Return.Sub(op.Call); d > cfg.Timeout+time.Second {
			t.Errorf("op %d took %v, the timeout is %v", op.ID, d, cfg.Timeout)
		}
		if op.Outcome == history.OK && op.Call.After(stopped) {
			okAfter++
			if op.Replica == old {
				t.Errorf("op %d answered by the stopped replica %s", op.ID, old)
			}
		}
	}
	if okAfter == 0 {
		t.Errorf("no OK op after the leader %s stopped (new leader %s)", old, next)
	}
	for _, b := range staleReads(ops) {
		t.Error(b)
	}
}

// Operations against addresses where nothing listens were never sent,
// so they fail, each within the timeout.
func TestRunNoServerFails(t *testing.T) {
	cfg := Config{Addrs: []string{"127.0.0.1:1"}, Clients: 2, Keys: testKeys, Timeout: 200 * time.Millisecond}
	rec := history.NewRecorder()
	runFor(t, 700*time.Millisecond, cfg, rec)
	ops := rec.Ops()
	if len(ops) == 0 {
		t.Fatal("no op recorded")
	}
	for _, op := range ops {
		if op.Outcome != history.Fail || op.Err == "" {
			t.Errorf("op %d: outcome %q err %q, want fail with a reason", op.ID, op.Outcome, op.Err)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	good := Config{Addrs: []string{"127.0.0.1:1"}, Clients: 1, Keys: []string{"a"}}
	tests := []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"no address", func(c *Config) { c.Addrs = nil }, "Addrs"},
		{"no client", func(c *Config) { c.Clients = 0 }, "Clients"},
		{"no key", func(c *Config) { c.Keys = nil }, "Keys"},
		{"bad key", func(c *Config) { c.Keys = []string{"a", "no.dots"} }, "Keys[1]"},
		{"key twice", func(c *Config) { c.Keys = []string{"a", "a"} }, "Keys[1]"},
		{"bad agent", func(c *Config) { c.Agent = "a b" }, "Agent"},
		{"read share", func(c *Config) { c.ReadShare = 1.5 }, "ReadShare"},
		{"delete share", func(c *Config) { c.DeleteShare = -0.1 }, "DeleteShare"},
		{"shares", func(c *Config) { c.ReadShare, c.DeleteShare = 0.6, 0.6 }, "ReadShare+DeleteShare"},
		{"timeout", func(c *Config) { c.Timeout = -1 }, "Timeout"},
		{"rate", func(c *Config) { c.Rate = -1 }, "Rate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.edit(&cfg)
			err := Run(context.Background(), cfg, history.NewRecorder())
			if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), ": "+tt.field+": ") {
				t.Fatalf("Run = %v, want ErrBadConfig naming %s", err, tt.field)
			}
		})
	}
	if err := Run(context.Background(), good, nil); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("nil recorder: %v", err)
	}
}
