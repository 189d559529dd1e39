package bench

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/testwait"
)

func TestAckLogWaitsForAnUpdateSentAfterTheKill(t *testing.T) {
	l := &ackLog{changed: make(chan struct{})}
	base := time.Now()
	kill := base.Add(10 * time.Millisecond)
	done := make(chan time.Time, 1)
	go func() {
		acked, err := l.waitSentAfter(context.Background(), kill)
		if err != nil {
			t.Error(err)
		}
		done <- acked
	}()
	// Sent before the kill, acknowledged after it: an answer that was on
	// its way, not one the new leader gave.
	l.record(base, kill.Add(time.Millisecond), nil)
	l.record(kill, kill.Add(2*time.Millisecond), errors.New("connection lost"))
	select {
	case got := <-done:
		t.Fatalf("returned %v for an update sent before the kill", got)
	case <-time.After(50 * time.Millisecond):
	}
	want := kill.Add(400 * time.Millisecond)
	l.record(kill.Add(time.Millisecond), want, nil)
	select {
	case got := <-done:
		if !got.Equal(want) {
			t.Fatalf("acknowledged at %v, want %v", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the acknowledgement after the kill was not seen")
	}
	if l.acks != 2 || l.errs != 1 {
		t.Fatalf("acks %d errs %d, want 2 and 1", l.acks, l.errs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.waitSentAfter(ctx, want.Add(time.Hour)); !errors.Is(err, ErrNotReady) {
		t.Fatalf("err %v, want ErrNotReady", err)
	}
}

// TestFailoverFreezes is the short freeze measurement: two SIGSTOPs of the
// leader of three replicas, each thawed once a new leader acknowledged an
// update. Every freeze must give figures and a new leader other than the
// frozen one, and no replica may be left stopped, neither after the run
// nor after a run cancelled while the leader is frozen. As with the kills,
// the figures are logged, not judged.
func TestFailoverFreezes(t *testing.T) {
	g, _ := startCluster(t, 3)
	pids := make([]int, len(g.Replicas))
	for i := range pids {
		pids[i] = g.Pid(i)
	}
	cfg := FailoverConfig{
		Fault: Freeze, Faults: 2, Lookout: true,
		Payload: 256, Timeout: 5 * time.Second, Bound: 20 * time.Second, Settle: 200 * time.Millisecond, Logf: t.Logf,
	}
	res, err := MeasureFailover(context.Background(), g, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Fault != Freeze || !res.Lookout {
		t.Fatalf("result of fault %v lookout %v, want a freeze with a lookout", res.Fault, res.Lookout)
	}
	if len(res.Outage) != 2 || len(res.Election) != 2 || len(res.Rejoin) != 2 || len(res.Leaders) != 2 {
		t.Fatalf("%d outages, %d elections, %d rejoins and %d leader changes, want 2 each",
			len(res.Outage), len(res.Election), len(res.Rejoin), len(res.Leaders))
	}
	for k, c := range res.Leaders {
		if c.From == "" || c.To == "" || c.From == c.To {
			t.Fatalf("freeze %d: leader %q, then %q: want a new leader other than the frozen one", k+1, c.From, c.To)
		}
		if res.Outage[k] <= 0 || res.Election[k] <= 0 || res.Rejoin[k] <= 0 {
			t.Fatalf("freeze %d: outage %v, election %v, rejoin %v: want each measured", k+1, res.Outage[k], res.Election[k], res.Rejoin[k])
		}
	}
	if res.Acks == 0 {
		t.Fatal("the writer never got an update acknowledged")
	}
	checkNoneStopped(t, g, pids)
	t.Logf("freeze -> next acknowledged update %v, -> new leader %v, thaw -> healthy %v; %d acknowledged, %d failed",
		res.Outage, res.Election, res.Rejoin, res.Acks, res.Errors)

	// Cancelled while the leader is frozen: the measurement ends with an
	// error and thaws it on the way out.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		testwait.Until(20*time.Second, func() bool {
			for i := range g.Replicas {
				if g.Frozen(i) {
					return true
				}
			}
			return false
		})
		cancel()
	}()
	cfg.Faults = 1
	if _, err := MeasureFailover(ctx, g, cfg); err == nil {
		t.Fatal("a measurement cancelled during the freeze reported no error")
	}
	checkNoneStopped(t, g, pids)

	// A frozen follower is not asked for its Status. Asking it would hold
	// the round up for statusTimeout, longer than this bound; the first
	// follower is frozen, so that the other one would be asked only after
	// the bound, and the leader would lack its majority.
	bctx, bcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer bcancel()
	leader, err := g.WaitHealthy(bctx)
	if err != nil {
		t.Fatal(err)
	}
	follower := 0
	if leader == 0 {
		follower = 1
	}
	if err := g.Freeze(follower); err != nil {
		t.Fatal(err)
	}
	defer g.Thaw(follower)
	if runtime.GOOS == "linux" {
		waitState(t, g.Pid(follower), 'T')
	}
	wctx, wcancel := context.WithTimeout(context.Background(), statusTimeout*4/5)
	defer wcancel()
	if got, err := g.WaitLeader(wctx); err != nil || got != leader {
		t.Fatalf("WaitLeader with %s frozen: %d, %v; want %d at once", g.Replicas[follower].Name, got, err, leader)
	}
	if _, err := g.WaitHealthy(bctx); !errors.Is(err, ErrNotReady) {
		t.Fatalf("WaitHealthy with a frozen replica: %v, want ErrNotReady", err)
	}
}

// checkNoneStopped fails t when any of the replicas' processes is stopped
// (state T in /proc) or still marked frozen.
func checkNoneStopped(t *testing.T, g *Grapnel, pids []int) {
	t.Helper()
	for i, pid := range pids {
		if runtime.GOOS == "linux" {
			st, err := procState(pid)
			if err != nil {
				t.Fatalf("%s: %v", g.Replicas[i].Name, err)
			}
			if st == 'T' {
				t.Fatalf("%s (pid %d) is left stopped", g.Replicas[i].Name, pid)
			}
		}
		if g.Frozen(i) {
			t.Fatalf("%s is still marked frozen", g.Replicas[i].Name)
		}
	}
}
