package server

import (
	"time"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/server/events"
	"github.com/grapnel-io/grapnel/server/ingest"
	"github.com/grapnel-io/grapnel/server/logcampaign"
	"github.com/grapnel-io/grapnel/state"
)

// leader is the memory only the leader keeps, rebuilt from the FSM on every
// term. Event subscriptions and log campaigns belong to live streams and
// start empty. Everything here is owned by the leader loop goroutine.
type leader struct {
	s      *Server
	term   *term
	events *events.Handler
	logs   *logcampaign.Store
	clock  clock.Clock

	// pipe holds the proposals in flight and the answers queued behind
	// them.
	pipe *pipeline
	// projected is the committed state plus every entry proposed and not
	// yet settled, with the flags that say when it stopped predicting the
	// FSM. Updates are planned against it.
	projected *projected
	// pendingSubs counts event subscriptions queued behind proposals, so
	// that updates planned now still prepare their events.
	pendingSubs int

	states *ingest.States
	// status is each agent's last load report. It lives in the leader's
	// memory only: it is refreshed every few seconds, so writing it to
	// Raft would cost every replica's flash for nothing durable; a new
	// leader fills it from the agents' next reports.
	status map[string]state.AgentStatus
	// agentStorage is, per agent with a stream to this leader, the fault
	// of its run folder as its hello and load reports say it now ("" or
	// missing: none). Memory only, as status: a new leader hears it in
	// the agent's next hello (storage.go).
	agentStorage map[string]string
	// holdBroadcasts collects the workload-state broadcasts of the entries
	// that settle together into bcast, sent as one message per stream.
	holdBroadcasts bool
	bcast          []pendingBroadcast
	// greeted holds, per agent, the stream that received its ServerHello
	// and the FSM index that hello showed; later entries are dispatched
	// only there, and only if the hello did not already include them.
	greeted map[string]greeting
	// incarnation is the incarnation each agent stream announced.
	incarnation map[*conn]uint64
	// waitingLogs holds, per agent without a greeted stream, the logs
	// requests of live campaigns it was not asked yet, by request id
	// (logs.go): a client that resumed its campaign on a new leader
	// before the agent reconnected gets the lines once it does.
	waitingLogs map[string]map[string]*grpcapi.FromServer
	// grace holds the agents the FSM lists that have not reconnected since
	// leadership began; expired receives their timers.
	grace   map[string]*graceTimer
	expired chan *graceTimer
	// rejects collects refused requests for the history until an entry
	// takes them along (rejections.go).
	rejects rejections
	// placeWhy lists why the allocator's inputs changed since it last ran
	// (placement.go); empty when they did not.
	placeWhy []string
	// placeParts are the entries of the last layout not proposed yet, one
	// per step, and placeReason why it was computed (placement.go).
	placeParts  []placementPart
	placeReason string
	// helloWait holds the agent streams whose ServerHello waits for the
	// allocator to run on their arrival, helloAfter those whose hello
	// waits for that run's entries to be proposed (awaitLayout).
	helloWait, helloAfter []*conn
	// left holds, per agent gone past its grace, the placed instances the
	// layout took off it, which it may still run: when it comes back, the
	// allocator prefers it for them (placement.Input.Adoptable). Its
	// hello settles them (greet).
	left map[string]map[string]state.InstanceName
	// problems is the problems view's detection state (problems.go).
	problems problemWatch
	// replicas is the voters' health as the leader last read it, for
	// the problems view (replicahealth.go).
	replicas replicaWatch
}

// monitorLeadership is the one goroutine that reacts to leadership
// changes: it starts the leader loop on gaining leadership and stops it on
// losing it. A repeated "true" is treated as lost-and-regained.
func (s *Server) monitorLeadership() {
	defer s.monitorWG.Done()
	restored := make(chan struct{}, 1)
	s.fsm.SetRestoreObserver(func() {
		select {
		case restored <- struct{}{}:
		default:
		}
	})
	halted := make(chan struct{}, 1)
	s.fsm.SetHaltObserver(func(*fsm.HaltError) {
		select {
		case halted <- struct{}{}:
		default:
		}
	})
	var (
		stopCh chan struct{}
		done   chan struct{}
	)
	stop := func() {
		if stopCh == nil {
			return
		}
		close(stopCh)
		<-done
		stopCh = nil
	}
	start := func() {
		stop()
		stopCh, done = make(chan struct{}), make(chan struct{})
		go func(stopCh, done chan struct{}) {
			defer close(done)
			s.leaderLoop(stopCh, restored)
		}(stopCh, done)
	}
	// A halted FSM cannot lead: it stops the leader loop and hands
	// leadership on (see stepDownHalted).
	if s.node.IsLeader() && !s.stepDownHalted() {
		start()
	}
	for {
		select {
		case isLeader := <-s.node.LeaderCh():
			if isLeader && !s.stepDownHalted() {
				start()
			} else {
				stop()
			}
		case <-halted:
			s.log.Error("this replica stopped applying the replicated log", "error", s.fsm.Halted())
			if s.node.IsLeader() {
				stop()
				s.stepDownHalted()
			}
		case r := <-s.pings:
			close(r)
		case <-s.shutdownCh:
			stop()
			return
		}
	}
}

// leaderLoop runs while this replica leads: Barrier, establish, serve the
// inbox and the pipeline, revoke. It is the only goroutine that touches
// the leader memory.
func (s *Server) leaderLoop(stopCh chan struct{}, restored <-chan struct{}) {
	for {
		if err := s.node.Barrier(s.cfg.ApplyTimeout); err == nil {
			break
		} else {
			s.log.Warn("barrier failed, retrying", "error", err)
		}
		retry := clock.NewTimer(s.clock(), 100*time.Millisecond)
		select {
		case <-stopCh:
			retry.Stop()
			return
		case <-retry.C:
		}
	}
	// Drop a restore notice from before the Barrier: establish reads the
	// store as it is now.
	select {
	case <-restored:
	default:
	}
	l := s.establishLeadership(stopCh)
	defer l.revoke()
	faults, unsubscribe := s.node.StorageFaultChanges()
	defer unsubscribe()
	members, unsubscribeMembers := s.node.Changes()
	defer unsubscribeMembers()
	l.refreshReplicas()
	l.detectProblems()
	for {
		// While the pipeline is full, or drains after a failure, new work
		// waits: the streams block on the inbox, the grace timers on
		// expired.
		var (
			inbox   <-chan inMsg
			expired <-chan *graceTimer
			flush   <-chan struct{}
		)
		if !l.projected.stale() && !l.pipe.full() {
			inbox, expired, flush = l.term.inbox, l.expired, l.rejects.flush
		}
		// Every event is timed from when the loop takes it to the end
		// of the step after it (loophold.go).
		var (
			event string
			start time.Time
		)
		select {
		case m := <-inbox:
			event, start = m.event(), loopClock.Now()
			m.handle(l)
		case batch := <-l.pipe.done:
			event, start = eventCommit, loopClock.Now()
			l.holdBroadcasts = true
			for _, e := range batch {
				l.pipe.settle(e, s.observeCommit)
			}
			l.holdBroadcasts = false
			l.flushBroadcasts()
		case g := <-expired:
			event, start = eventGraceExpired, loopClock.Now()
			l.graceExpired(g)
		case <-flush:
			event, start = eventRejections, loopClock.Now()
			l.flushRejections()
		case <-l.problems.wake:
			event, start = eventProblems, loopClock.Now()
			l.problemWoke()
		case <-restored:
			event, start = eventRestored, loopClock.Now()
			l.restoreSeen()
		case <-faults:
			// The step detects the problems again (factsSignature).
			event, start = eventStorage, loopClock.Now()
		case <-members:
			// The leader, the configuration, gossip, a voter's health or
			// the cluster version may have changed: the step detects
			// again if the voters' facts or the applied index did.
			event, start = eventMembers, loopClock.Now()
			l.refreshReplicas()
		case r := <-l.term.ping:
			// A liveness question changes nothing: no step.
			close(r)
			continue
		case <-stopCh:
			return
		}
		l.step()
		s.held(event, start)
	}
}

// establishLeadership rebuilds the leader memory from the FSM, starts the
// agents' reconnect grace, seeds the startup manifest into a fresh cluster
// and opens the gate for streams.
func (s *Server) establishLeadership(stopCh chan struct{}) *leader {
	clk := s.clock()
	l := &leader{
		s:      s,
		term:   &term{inbox: make(chan inMsg, 256), stop: stopCh, ping: make(chan chan struct{}), releases: map[string]string{}, clusterVersions: map[string]uint32{}},
		events: events.NewHandler(),
		logs:   logcampaign.NewStore(),
		clock:  clk,
		pipe: newPipeline(s.node.ApplyAsync, s.cfg.ApplyTimeout, s.cfg.GroupCommitDelay, s.cfg.GroupCommitMaxBatch, clock.Real(),
			func(n int) { s.cfg.Metrics.ObserveBatch(fsm.BatchType.String(), n) }, stopCh),
		projected:    &projected{},
		greeted:      map[string]greeting{},
		left:         map[string]map[string]state.InstanceName{},
		incarnation:  map[*conn]uint64{},
		waitingLogs:  map[string]map[string]*grpcapi.FromServer{},
		grace:        map[string]*graceTimer{},
		expired:      make(chan *graceTimer, 16),
		status:       map[string]state.AgentStatus{},
		agentStorage: map[string]string{},
		rejects:      rejections{flush: make(chan struct{}, 1)},
		problems:     newProblemWatch(),
	}
	l.rebuild()
	l.states = ingest.NewStates(ingest.DefaultMaxBatch, l.projected.store.ReportMarks)
	l.startGrace(state.SortedKeys(l.projected.store.Agents))
	if !s.node.FollowedLeader() && !s.cfg.TrustStoredStatesAtStart {
		l.unconfirmStoredStates()
	}
	l.seedStartupState()
	l.resealSecrets()
	l.syncHistoryLimits()
	s.leaderMu.Lock()
	s.term = l.term
	s.leaderMu.Unlock()
	s.terms.Notify()
	s.cfg.Metrics.LeaderChanged()
	s.leadershipChanged(true)
	s.log.Info("leading", "id", s.node.ID(), "agents in grace", len(l.grace))
	return l
}

// revoke ends the term: the gate closes, the requests still in the
// pipeline are answered with the loss of leadership, the leader-only
// goroutines and timers stop, and every stream is dropped so that agents
// and CLIs reconnect to the new leader.
func (l *leader) revoke() {
	s := l.s
	s.leaderMu.Lock()
	s.term = nil
	s.leaderMu.Unlock()
	s.terms.Notify()
	l.pipe.abandon(errs.ErrNotLeader)
	l.abandonRejections(errs.ErrNotLeader)
	l.stopGrace()
	l.stopProblemTimer()
	l.pipe.stopAndWait()
	s.conns.closeAll()
	s.cfg.Metrics.LeaderChanged()
	s.leadershipChanged(false)
	s.log.Info("no longer leading", "id", s.node.ID())
}

// step runs after every event of the loop: it rebuilds the speculative
// state once a failure has drained, proposes the next batches of
// reports, and detects problems if what they depend on changed.
func (l *leader) step() {
	if l.projected.stale() {
		if !l.pipe.empty() {
			return
		}
		l.rebuild()
	}
	l.proposeBatches()
	l.allocate()
	l.detectProblems()
}

// observeCommit records the time from proposing an entry to its commit,
// with the entry's Raft index as the exemplar (0 when it failed).
func (s *Server) observeCommit(t fsm.MessageType, d time.Duration, index uint64) {
	s.cfg.Metrics.ObserveCommitAt(t.String(), d, index)
}

// stepDownHalted hands leadership to another voter if the FSM halted
// (an entry this version cannot apply: see fsm.HaltError), and reports
// whether it halted. Such a replica still holds the log, so it can win an
// election; it must not plan on a store that stopped.
func (s *Server) stepDownHalted() bool {
	h := s.fsm.Halted()
	if h == nil {
		return false
	}
	if s.node.IsLeader() {
		if err := s.node.TransferLeadership(""); err != nil {
			s.log.Error("a halted replica could not hand on leadership", "error", err)
		}
	}
	return true
}
