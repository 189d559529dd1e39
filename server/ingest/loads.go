package ingest

// Load is one agent's CPU and memory report.
type Load struct {
	Agent      string
	CPUUsage   uint32
	FreeMemory uint64
}

// Loads conflates load reports: the newest report of each agent wins, and
// at most one batch is in flight.
type Loads struct {
	pending  map[string]Load
	order    []string
	max      int
	inFlight []Load
}

// NewLoads returns an empty conflation of load reports; maxBatch bounds
// the agents of one batch (DefaultMaxBatch when < 1).
func NewLoads(maxBatch int) *Loads {
	if maxBatch < 1 {
		maxBatch = DefaultMaxBatch
	}
	return &Loads{pending: map[string]Load{}, max: maxBatch}
}

// Offer keeps the newest report of an agent.
func (l *Loads) Offer(ld Load) {
	if _, ok := l.pending[ld.Agent]; !ok {
		l.order = append(l.order, ld.Agent)
	}
	l.pending[ld.Agent] = ld
}

// Next hands out the waiting reports, oldest agent first, unless a batch
// is in flight or none waits.
func (l *Loads) Next() ([]Load, bool) {
	if l.inFlight != nil || len(l.order) == 0 {
		return nil, false
	}
	n := min(len(l.order), l.max)
	out := make([]Load, 0, n)
	for _, a := range l.order[:n] {
		out = append(out, l.pending[a])
		delete(l.pending, a)
	}
	l.order = l.order[n:]
	l.inFlight = out
	return out, true
}

// Settle ends the batch in flight; reports of a batch that was not stored
// go back unless a newer one arrived.
func (l *Loads) Settle(ok bool) {
	b := l.inFlight
	l.inFlight = nil
	if ok {
		return
	}
	var back []string
	for _, ld := range b {
		if _, newer := l.pending[ld.Agent]; newer {
			continue
		}
		l.pending[ld.Agent] = ld
		back = append(back, ld.Agent)
	}
	l.order = append(back, l.order...)
}

// Drop forgets the waiting report of an agent that went away.
func (l *Loads) Drop(agent string) {
	if _, ok := l.pending[agent]; !ok {
		return
	}
	delete(l.pending, agent)
	for i, a := range l.order {
		if a == agent {
			l.order = append(l.order[:i], l.order[i+1:]...)
			return
		}
	}
}

// InFlight reports whether a batch is out.
func (l *Loads) InFlight() bool { return l.inFlight != nil }
