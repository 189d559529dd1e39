package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// FailoverConfig bounds a failover measurement.
type FailoverConfig struct {
	// Kills is how many times the leader is killed.
	Kills int
	// Payload is the runtimeConfig size of the continuous writer.
	Payload int
	// Timeout bounds one request of the writer.
	Timeout time.Duration
	// Bound is the longest wait for a failover, a leader, or a restarted
	// replica to be healthy again before the measurement fails.
	Bound time.Duration
	// Settle is how long the writer must have been acknowledged by the
	// healthy cluster before the next kill, so that every kill hits a
	// cluster in steady state, not one still busy with the last restart.
	Settle time.Duration
	// Logf reports progress; nil is silent.
	Logf func(format string, args ...any)
}

// FailoverResult holds one entry per kill.
type FailoverResult struct {
	// Outage is the time from SIGKILL of the leader to the first
	// acknowledgement of an update sent after the kill.
	Outage []time.Duration
	// Election is the time from SIGKILL until a majority of the replicas
	// name the same new leader, as their Status says (polled every 10 ms):
	// the share of the outage that is Raft's, the rest is the client's.
	Election []time.Duration
	// Rejoin is the time from restarting the killed replica (same data
	// directory) until the cluster is healthy again with it caught up.
	Rejoin []time.Duration
	// Acks and Errors count the writer's updates over the whole run.
	Acks, Errors int
}

// ackLog is what the continuous writer tells the measurement.
type ackLog struct {
	mu       sync.Mutex // guards the following fields
	lastSent time.Time  // when the last acknowledged update was sent
	lastAck  time.Time  // when it was acknowledged
	acks     int
	errs     int
	changed  chan struct{} // closed and replaced on every acknowledgement
}

func (l *ackLog) record(sent, acked time.Time, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.errs++
		return
	}
	l.lastSent, l.lastAck = sent, acked
	l.acks++
	close(l.changed)
	l.changed = make(chan struct{})
}

// waitSentAfter waits for the acknowledgement of an update sent at or
// after t and returns when it was acknowledged.
func (l *ackLog) waitSentAfter(ctx context.Context, t time.Time) (time.Time, error) {
	for {
		l.mu.Lock()
		sent, acked, ch := l.lastSent, l.lastAck, l.changed
		l.mu.Unlock()
		if !sent.Before(t) {
			return acked, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%w: no update acknowledged: %v", ErrNotReady, context.Cause(ctx))
		}
	}
}

// MeasureFailover runs one writer that updates a workload continuously
// and, Kills times: waits for a healthy cluster and Settle of steady
// writes, SIGKILLs the leader, measures the time to the next acknowledged
// update (and, by polling Status, to the election of a new leader),
// restarts the killed replica with its data directory and measures until
// the cluster is healthy again with it caught up.
func MeasureFailover(ctx context.Context, g *Grapnel, cfg FailoverConfig) (res FailoverResult, err error) {
	if cfg.Kills < 1 {
		return res, fmt.Errorf("%w: kills %d: need at least 1", ErrBadConfig, cfg.Kills)
	}
	if len(g.Replicas) < 3 {
		return res, fmt.Errorf("%w: failover needs at least 3 replicas, have %d", ErrBadConfig, len(g.Replicas))
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	w, err := NewWriter(g.Addrs(), "failover", cfg.Payload, cfg.Timeout)
	if err == nil {
		w.Secure(g.ClientOptions())
	}
	if err != nil {
		return res, err
	}
	acks := &ackLog{changed: make(chan struct{})}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer w.Close()
		for seq := 1; wctx.Err() == nil; seq++ {
			sent := time.Now()
			err := w.Update(wctx, seq)
			acks.record(sent, time.Now(), err)
			if err != nil {
				// Do not spin on a cluster without a leader; 2 ms is the
				// resolution the measurement can live with.
				select {
				case <-time.After(2 * time.Millisecond):
				case <-wctx.Done():
				}
			}
		}
	}()
	defer func() {
		stop()
		wg.Wait()
		acks.mu.Lock()
		res.Acks, res.Errors = acks.acks, acks.errs
		acks.mu.Unlock()
	}()

	bounded := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, cfg.Bound) }
	type elected struct {
		at     time.Time
		leader int
		err    error
	}
	for k := 1; k <= cfg.Kills; k++ {
		bctx, cancel := bounded()
		leader, err := g.WaitHealthy(bctx)
		if err == nil {
			// The writer is through to the current leader and has been
			// for Settle.
			from := time.Now()
			_, err = acks.waitSentAfter(bctx, from)
			if err == nil && cfg.Settle > 0 {
				_, err = acks.waitSentAfter(bctx, from.Add(cfg.Settle))
			}
		}
		cancel()
		if err != nil {
			return res, fmt.Errorf("before kill %d: %w", k, err)
		}
		name := g.Replicas[leader].Name
		t0 := time.Now()
		g.Kill(leader)
		ech := make(chan elected, 1)
		go func() {
			bctx, cancel := bounded()
			defer cancel()
			l, err := g.WaitLeader(bctx)
			ech <- elected{time.Now(), l, err}
		}()
		bctx, cancel = bounded()
		acked, err := acks.waitSentAfter(bctx, t0)
		cancel()
		e := <-ech
		if err == nil {
			err = e.err
		}
		if err != nil {
			return res, fmt.Errorf("kill %d of leader %s: %w", k, name, err)
		}
		outage := acked.Sub(t0)
		res.Outage = append(res.Outage, outage)
		res.Election = append(res.Election, e.at.Sub(t0))
		next := e.leader

		restart := time.Now()
		if err := g.Start(leader); err != nil {
			return res, err
		}
		bctx, cancel = bounded()
		_, err = g.WaitHealthy(bctx)
		cancel()
		if err != nil {
			return res, fmt.Errorf("rejoin of %s after kill %d: %w", name, k, err)
		}
		res.Rejoin = append(res.Rejoin, time.Since(restart))
		logf("kill %d/%d: leader %s killed; new leader %s after %v; next update acknowledged after %v; rejoined in %v",
			k, cfg.Kills, name, g.Replicas[next].Name, res.Election[k-1].Round(time.Millisecond),
			outage.Round(time.Millisecond), res.Rejoin[k-1].Round(time.Millisecond))
	}
	return res, nil
}
