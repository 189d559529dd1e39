package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Fault is what a failover measurement does to the leader.
type Fault int

const (
	// Kill is SIGKILL of the leader; the replica then restarts from its
	// data directory. Its peers and clients hear of it from the kernel:
	// its connections end and its ports refuse new ones.
	Kill Fault = iota
	// Freeze is SIGSTOP of the leader (Grapnel.Freeze), a hung host: its
	// connections stay open and nothing answers, so only timeouts tell.
	// It is thawed (SIGCONT) once the new leader is known and has
	// acknowledged an update.
	Freeze
)

// String names the fault as the tables do.
func (f Fault) String() string {
	if f == Freeze {
		return "freeze"
	}
	return "kill"
}

// signal names the fault's signal for the progress lines.
func (f Fault) signal() string {
	if f == Freeze {
		return "SIGSTOP"
	}
	return "SIGKILL"
}

// FailoverConfig bounds a failover measurement.
type FailoverConfig struct {
	// Fault is what is done to the leader: Kill (the zero value) or Freeze.
	Fault Fault
	// Faults is how many times the leader is killed or frozen.
	Faults int
	// Lookout gives the writer a lookout at another replica
	// (client.Options.Lookout), as a long-lived client such as an agent
	// keeps: it learns of a new leader from the lookout's Watch the moment
	// one is elected. Without it the writer is a CLI-like client, which
	// learns of a frozen leader only when the leader's heartbeat stops.
	Lookout bool
	// Payload is the runtimeConfig size of the continuous writer.
	Payload int
	// Timeout bounds one request of the writer.
	Timeout time.Duration
	// Bound is the longest wait for a failover, a leader, or a restarted
	// or thawed replica to be healthy again before the measurement fails.
	Bound time.Duration
	// Settle is how long the writer must have been acknowledged by the
	// healthy cluster before the next fault, so that every fault hits a
	// cluster in steady state, not one still busy with the last rejoin.
	Settle time.Duration
	// Logf reports progress; nil is silent.
	Logf func(format string, args ...any)
}

// FailoverResult holds one entry per fault.
type FailoverResult struct {
	// Fault is what was done to the leader; Lookout whether the writer
	// kept a lookout.
	Fault   Fault
	Lookout bool
	// Outage is the time from the SIGKILL or SIGSTOP of the leader to the
	// first acknowledgement of an update sent after it.
	Outage []time.Duration
	// Election is the time from the fault until a majority of the replicas
	// name the same new leader, as their Status says (polled every 10 ms;
	// a frozen replica is not asked): the share of the outage that is
	// Raft's, the rest is the client's.
	Election []time.Duration
	// Rejoin is the time from restarting the killed replica (same data
	// directory) or thawing the frozen one until the cluster is healthy
	// again with it caught up.
	Rejoin []time.Duration
	// Leaders names, per fault, the leader it hit and the one elected
	// after it.
	Leaders []LeaderChange
	// Acks and Errors count the writer's updates over the whole run.
	Acks, Errors int
}

// LeaderChange is the leader a fault hit and the replica that led next.
type LeaderChange struct {
	From, To string
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
// and, Faults times: waits for a healthy cluster and Settle of steady
// writes, kills or freezes the leader, measures the time to the next
// acknowledged update (and, by polling Status, to the election of a new
// leader), restarts the killed replica with its data directory or thaws
// the frozen one, and measures until the cluster is healthy again with it
// caught up. A frozen replica is thawed on every way out.
func MeasureFailover(ctx context.Context, g *Grapnel, cfg FailoverConfig) (res FailoverResult, err error) {
	res.Fault, res.Lookout = cfg.Fault, cfg.Lookout
	switch {
	case cfg.Faults < 1:
		return res, fmt.Errorf("%w: faults %d: need at least 1", ErrBadConfig, cfg.Faults)
	case cfg.Fault != Kill && cfg.Fault != Freeze:
		return res, fmt.Errorf("%w: fault %d: neither Kill nor Freeze", ErrBadConfig, cfg.Fault)
	case len(g.Replicas) < 3:
		return res, fmt.Errorf("%w: failover needs at least 3 replicas, have %d", ErrBadConfig, len(g.Replicas))
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	w, err := NewWriter(g.Addrs(), "failover", cfg.Payload, cfg.Timeout)
	if err != nil {
		return res, err
	}
	w.Secure(g.ClientOptions())
	w.Lookout = cfg.Lookout
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
	m := measurement{g: g, cfg: cfg, acks: acks, res: &res}
	for k := 1; k <= cfg.Faults; k++ {
		if err := m.fault(ctx, k); err != nil {
			return res, err
		}
	}
	return res, nil
}

// measurement is one MeasureFailover run.
type measurement struct {
	g    *Grapnel
	cfg  FailoverConfig
	acks *ackLog
	res  *FailoverResult
}

func (m *measurement) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, m.cfg.Bound)
}

// fault is the k-th fault: wait for a healthy cluster in steady state,
// kill or freeze the leader, measure, bring the replica back, measure.
func (m *measurement) fault(ctx context.Context, k int) (err error) {
	g, cfg := m.g, m.cfg
	bctx, cancel := m.bounded(ctx)
	leader, err := g.WaitHealthy(bctx)
	if err == nil {
		// The writer is through to the current leader and has been for
		// Settle.
		from := time.Now()
		_, err = m.acks.waitSentAfter(bctx, from)
		if err == nil && cfg.Settle > 0 {
			_, err = m.acks.waitSentAfter(bctx, from.Add(cfg.Settle))
		}
	}
	cancel()
	if err != nil {
		return fmt.Errorf("before %s %d: %w", cfg.Fault, k, err)
	}
	name := g.Replicas[leader].Name
	t0 := time.Now()
	switch cfg.Fault {
	case Kill:
		g.Kill(leader)
	case Freeze:
		if err := g.Freeze(leader); err != nil {
			return fmt.Errorf("%s %d: %w", cfg.Fault, k, err)
		}
		defer func() {
			// An error or a cancelled ctx must not leave the replica
			// stopped: it would outlive the run.
			if g.Frozen(leader) {
				if terr := g.Thaw(leader); err == nil {
					err = terr
				}
			}
		}()
	}
	type elected struct {
		at     time.Time
		leader int
		err    error
	}
	ech := make(chan elected, 1)
	go func() {
		bctx, cancel := m.bounded(ctx)
		defer cancel()
		l, err := g.WaitLeader(bctx)
		ech <- elected{time.Now(), l, err}
	}()
	bctx, cancel = m.bounded(ctx)
	acked, err := m.acks.waitSentAfter(bctx, t0)
	cancel()
	e := <-ech
	if err == nil {
		err = e.err
	}
	if err == nil && e.leader == leader {
		err = fmt.Errorf("%w: %s leads again", ErrNotReady, name)
	}
	if err != nil {
		return fmt.Errorf("%s %d of leader %s: %w", cfg.Fault, k, name, err)
	}
	outage, election := acked.Sub(t0), e.at.Sub(t0)

	heal := time.Now()
	switch cfg.Fault {
	case Kill:
		err = g.Start(leader)
	case Freeze:
		err = g.Thaw(leader)
	}
	if err != nil {
		return err
	}
	bctx, cancel = m.bounded(ctx)
	_, err = g.WaitHealthy(bctx)
	cancel()
	if err != nil {
		return fmt.Errorf("rejoin of %s after %s %d: %w", name, cfg.Fault, k, err)
	}
	rejoin := time.Since(heal)
	next := g.Replicas[e.leader].Name
	m.res.Outage = append(m.res.Outage, outage)
	m.res.Election = append(m.res.Election, election)
	m.res.Rejoin = append(m.res.Rejoin, rejoin)
	m.res.Leaders = append(m.res.Leaders, LeaderChange{From: name, To: next})
	cfg.Logf("%s %d/%d: leader %s %s; new leader %s after %v; next update acknowledged after %v; rejoined in %v",
		cfg.Fault, k, cfg.Faults, name, cfg.Fault.signal(), next, election.Round(time.Millisecond),
		outage.Round(time.Millisecond), rejoin.Round(time.Millisecond))
	return nil
}
