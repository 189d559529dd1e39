package campaign

import (
	"context"
	"sync"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/chaos/check"
	"github.com/grapnel-io/grapnel/chaos/report"
)

// Observation intervals.
const (
	StatusEvery = 50 * time.Millisecond
	StatesEvery = 500 * time.Millisecond
)

// sampleWait bounds one round of Status calls: a frozen replica's Status
// hangs until statusTimeout, and a round that waited for it would stamp
// the new leader's answer that much later (the campaign's frozen-leader
// figures read 530 ms where the writers saw the new leader at 200 ms).
// A replica that did not answer within it is left out of that sample.
const sampleWait = 2 * StatusEvery

// observer records, from the root namespace over the bridge, what every
// replica says about leader and term, the timeline samples, and the
// workload states.
type observer struct {
	c *cluster

	mu      sync.Mutex
	obs     []check.LeaderObs
	samples []report.Sample
	states  []check.StateSample
}

// run observes until ctx ends.
func (o *observer) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { o.loop(ctx, StatusEvery, o.status) })
	wg.Go(func() { o.loop(ctx, StatesEvery, o.workloadStates) })
	wg.Wait()
}

func (o *observer) loop(ctx context.Context, every time.Duration, f func(context.Context)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
		}
	}
}

// status asks every replica at once and records one sample, stamped
// with the time the answer naming the leader arrived (each observation
// with its own).
func (o *observer) status(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, sampleWait)
	defer cancel()
	sts, ats := o.c.statusesAt(sctx)
	s := report.Sample{At: time.Now()}
	var obs []check.LeaderObs
	for i, st := range sts {
		if st == nil {
			continue
		}
		obs = append(obs, check.LeaderObs{At: ats[i], Replica: st.GetReplicaId(), Term: st.GetTerm(), Leader: st.GetLeaderId()})
		s.Term = max(s.Term, st.GetTerm())
	}
	if l := leaderOf(sts); l >= 0 {
		s.At, s.Leader, s.Term, s.Attached = ats[l], sts[l].GetReplicaId(), sts[l].GetTerm(), sts[l].GetAttachedAgents()
	}
	o.mu.Lock()
	o.obs = append(o.obs, obs...)
	o.samples = append(o.samples, s)
	o.mu.Unlock()
}

// workloadStates reads the states through the leader; a failed read
// (no leader right now) records nothing.
func (o *observer) workloadStates(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ws, err := bench.WorkloadStates(qctx, o.c.addrs())
	if err != nil {
		return
	}
	o.mu.Lock()
	o.states = append(o.states, check.StateSample{At: time.Now(), States: ws})
	o.mu.Unlock()
}

// snapshot copies what was recorded so far.
func (o *observer) snapshot() ([]check.LeaderObs, []report.Sample, []check.StateSample) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]check.LeaderObs(nil), o.obs...), append([]report.Sample(nil), o.samples...), append([]check.StateSample(nil), o.states...)
}
