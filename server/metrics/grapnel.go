package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grapnel-io/grapnel/internal/connlimit"
)

// Set is the metric families a replica exposes.
type Set struct {
	Registry *Registry
	// LeaderChanges counts every gain and loss of leadership seen by this
	// replica's leadership monitor.
	LeaderChanges *Counter
	// CommitSeconds is the time from proposing an entry to its commit and
	// local apply, by command type.
	CommitSeconds *Histogram
	// BatchSize is the number of workload states or load reports carried
	// in one Raft entry, and (type Batch) the number of commands the
	// leader's group commit handed to Raft at once.
	BatchSize *Histogram
	// PermissionDenied counts calls and stream messages refused for want
	// of a right (rpc/authz), by the caller's role and the method.
	PermissionDenied *Counter

	// ForwardedRefused counts the requests an agent forwarded for a
	// workload that the server refused (issue 17): the workload is not
	// in the desired state, not on that agent, or its rules refuse it.
	ForwardedRefused *Counter
	// LogResponsesDropped counts log responses not sent by the agent
	// hosting an instance of a live campaign, by sender kind.
	LogResponsesDropped *Counter
	// LogCampaignsRefused counts the logs requests refused at the
	// requester's cap of live campaigns, by requester kind.
	LogCampaignsRefused *Counter
	// WorkloadPolicyRefused counts the updates refused by the workload
	// admission policy (issue 27), by check: level (the servers'
	// --workload-policy) or widening (a commander's or a workload's write
	// that widens a workload's privileges).
	WorkloadPolicyRefused *Counter
	// StreamsRefused counts the Ankaios streams refused over a cap or
	// ended for want of a hello in time (issue 27), by reason and role.
	StreamsRefused *Counter
	// RenderBudgetRefused counts requests refused because rendering their
	// templates ran past the render budget of one request
	// (max_render_steps_per_request, or max_update_bytes while
	// rendering), by request kind: update (an update or Plan/Apply) or
	// dry_run.
	RenderBudgetRefused *Counter
	// DryRunsRefused counts dry-runs refused because the leader was
	// planning as many as it plans at once and as many waited.
	DryRunsRefused *Counter
	// WorkloadStatesDropped counts reported workload states dropped
	// because they name an instance the cluster has no state for while
	// it holds --max-workload-states.
	WorkloadStatesDropped *Counter
	// EventSubscriptionsRefused counts event subscriptions refused at a
	// cap, by requester kind (client, workload) and cap (per_requester,
	// total).
	EventSubscriptionsRefused *Counter
	// LoopSeconds is how long each event held the leader loop, which
	// serves one at a time, by event (a request kind, commit, ...).
	LoopSeconds *Histogram

	isLeader, term, commitIndex, appliedIndex, applyLag, lastContact *Gauge
	leader                                                           *Gauge
	problems                                                         *Gauge
	agentsConnected, workloads                                       *Gauge
	replicaRelease, agentRelease                                     *Gauge
	storageFailed                                                    *Gauge
	// storageErrors reads the storage error count of the server that
	// collects it now: a test restarts a replica on the same Set, and a
	// counter func registers once.
	storageErrors     atomic.Pointer[func() uint64]
	storageErrorsOnce sync.Once
}

// NewSet registers Grapnel's families on a fresh registry.
func NewSet() *Set {
	r := New()
	return &Set{
		Registry:      r,
		LeaderChanges: r.NewCounter("grapnel_leader_changes_total", "Times this replica gained or lost leadership."),
		CommitSeconds: r.NewHistogram("grapnel_raft_commit_seconds", "Time from proposing a Raft entry to its commit and local apply.", LatencyBuckets, "type"),
		BatchSize: r.NewHistogram("grapnel_ingest_batch_size", "Items carried in one batched Raft entry.",
			[]float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}, "type"),
		PermissionDenied: r.NewCounter("grapnel_permission_denied_total",
			"Calls and stream messages refused because the caller's role lacks the right (docs/security.md).", "role", "method"),
		ForwardedRefused: r.NewCounter("grapnel_forwarded_requests_refused_total",
			"Requests an agent forwarded for its workloads that the server refused, by agent.", "agent"),
		LogResponsesDropped: r.NewCounter("grapnel_log_responses_dropped_total",
			"Log responses dropped because their sender does not host an instance of a live campaign, by sender kind (agent, client).", "from"),
		LogCampaignsRefused: r.NewCounter("grapnel_log_campaigns_refused_total",
			"Logs requests refused because their requester has as many live log campaigns as --max-log-campaigns-per-requester allows, by requester kind (workload, client).", "requester"),
		WorkloadPolicyRefused: r.NewCounter("grapnel_workload_policy_refused_total",
			"Updates refused by the workload admission policy, by check: level (the servers' --workload-policy) or widening (a commander's or a workload's write widening a workload's privileges).", "check"),
		StreamsRefused: r.NewCounter("grapnel_streams_refused_total",
			"Ankaios streams refused: over the cap of their identity (identity_cap) or of the replica (total_cap), or ended without a hello in time (no_hello); by reason and the caller's role (docs/security.md).", "reason", "role"),
		RenderBudgetRefused: r.NewCounter("grapnel_render_budget_refused_total",
			"Requests refused because rendering their templates ran past the budget of one request (max_render_steps_per_request, max_update_bytes), by request kind (update, dry_run).", "request"),
		DryRunsRefused: r.NewCounter("grapnel_dry_runs_refused_total",
			"Dry-runs refused because the leader was planning max_concurrent_dry_runs and as many more waited."),
		WorkloadStatesDropped: r.NewCounter("grapnel_workload_states_dropped_total",
			"Workload states agents reported that were dropped because they name an instance the cluster has no state for while it holds --max-workload-states (docs/security.md)."),
		EventSubscriptionsRefused: r.NewCounter("grapnel_event_subscriptions_refused_total",
			"Event subscriptions refused because their requester held --max-event-subscriptions-per-requester (cap per_requester) or the leader --max-event-subscriptions (cap total), by requester kind (client, workload).", "requester", "cap"),
		LoopSeconds: r.NewHistogram("grapnel_leader_loop_seconds",
			"Time one event held the leader loop, which serves one at a time: its handler and the step after it, by event (a request or message kind, commit, grace_expired, ...; docs/security.md).",
			LoopBuckets, "event"),
		isLeader: r.NewGauge("grapnel_raft_is_leader", "1 while this replica is the Raft leader."),
		leader: r.NewGauge("grapnel_leader",
			"1 for the replica this replica knows as the Raft leader, by its id; no series while it knows none. Names the leader on a dashboard, which grapnel_raft_is_leader (a 1 on the leader's own scrape) cannot.", "replica"),
		term:            r.NewGauge("grapnel_raft_term", "Current Raft term."),
		commitIndex:     r.NewGauge("grapnel_raft_commit_index", "Highest Raft index known committed."),
		appliedIndex:    r.NewGauge("grapnel_raft_applied_index", "Highest Raft index applied to the FSM."),
		applyLag:        r.NewGauge("grapnel_raft_apply_lag", "Entries committed but not yet applied to the FSM (commit_index - applied_index)."),
		lastContact:     r.NewGauge("grapnel_raft_last_contact_seconds", "On a follower, time since the last contact with the leader; 0 on the leader."),
		problems:        r.NewGauge("grapnel_problems", "Open problems of the problems view in this replica's state, by kind (docs/problems.md).", "kind"),
		agentsConnected: r.NewGauge("grapnel_agents_connected", "Agents connected to the leader, as this replica's state records them."),
		workloads:       r.NewGauge("grapnel_workloads", "Workload instances in this replica's state, by execution state.", "state"),
		replicaRelease: r.NewGauge("grapnel_replica_release",
			"1 for each replica with the release its gossip metadata announces, as this replica sees them (docs/operations.md).", "replica", "release"),
		storageFailed: r.NewGauge("grapnel_storage_failed",
			"1 for each replica whose storage failed a write (it stores no entries and casts no votes until it restarted), 0 for the others: this replica from its own writes, the others as their gossip metadata announces it (docs/operations.md, \"Failed storage\").", "replica"),
		agentRelease: r.NewGauge("grapnel_agent_release",
			"1 for each agent with the release its hello announced (ankaios, unknown or invalid when it gave none that can be shown); only the leader, which hears the hellos, has series.", "agent", "release"),
	}
}

// CollectBuild exposes grapnel_build_info: this replica's release and
// commit, as --version prints them.
func (s *Set) CollectBuild(version, commit string) {
	if s == nil {
		return
	}
	s.Registry.NewGaugeFunc("grapnel_build_info", "Always 1: the release and the commit of this replica's binary, as --version prints them.",
		map[string]string{"version": version, "commit": commit}, func() float64 { return 1 })
}

// CollectReleases refreshes grapnel_replica_release and
// grapnel_agent_release before every scrape from replicas (gossip) and
// agents (the leader's memory; nil on a follower), name → release. The
// series are rebuilt each time, so a replica or agent that left, or
// changed its release, leaves no stale series.
func (s *Set) CollectReleases(replicas, agents func() map[string]string) {
	if s == nil {
		return
	}
	s.Registry.OnCollect(func() {
		s.replicaRelease.Reset()
		for id, rel := range replicas() {
			s.replicaRelease.Set(1, id, rel)
		}
		s.agentRelease.Reset()
		for name, rel := range agents() {
			s.agentRelease.Set(1, name, rel)
		}
	})
}

// ObserveCommit records one proposal's commit latency.
func (s *Set) ObserveCommit(typ string, d time.Duration) {
	if s == nil {
		return
	}
	s.CommitSeconds.Observe(d.Seconds(), typ)
}

// ObserveCommitAt records one proposal's commit latency with the Raft
// index of its entry as the exemplar (none for 0), so that an OpenMetrics
// scraper can lead from a slow bucket to the entry (`grapnel history`,
// the Raft log).
func (s *Set) ObserveCommitAt(typ string, d time.Duration, index uint64) {
	if s == nil {
		return
	}
	if index == 0 {
		s.CommitSeconds.Observe(d.Seconds(), typ)
		return
	}
	s.CommitSeconds.ObserveWithExemplar(d.Seconds(), map[string]string{"raft_index": strconv.FormatUint(index, 10)}, typ)
}

// DroppedWorkloadStates counts n reported states dropped at the cap.
func (s *Set) DroppedWorkloadStates(n int) {
	if s == nil {
		return
	}
	s.WorkloadStatesDropped.Add(float64(n))
}

// RefusedEventSubscription counts an event subscription refused at a
// cap.
func (s *Set) RefusedEventSubscription(requester, which string) {
	if s == nil {
		return
	}
	s.EventSubscriptionsRefused.Inc(requester, which)
}

// ObserveLoop records how long one event held the leader loop.
func (s *Set) ObserveLoop(event string, d time.Duration) {
	if s == nil {
		return
	}
	s.LoopSeconds.Observe(d.Seconds(), event)
}

// LeaderChanged counts a gain or loss of leadership.
func (s *Set) LeaderChanged() {
	if s == nil {
		return
	}
	s.LeaderChanges.Inc()
}

// Denied counts one refusal of method to a caller of role.
func (s *Set) Denied(role, method string) {
	if s == nil {
		return
	}
	s.PermissionDenied.Inc(role, method)
}

// ObserveBatch records the size of one batched entry.
func (s *Set) ObserveBatch(typ string, n int) {
	if s == nil {
		return
	}
	s.BatchSize.Observe(float64(n), typ)
}

// RefusedForwarded counts a forwarded request the server refused.
func (s *Set) RefusedForwarded(agent string) {
	if s == nil {
		return
	}
	s.ForwardedRefused.Inc(agent)
}

// RefusedByWorkloadPolicy counts an update the workload policy refused.
func (s *Set) RefusedByWorkloadPolicy(check string) {
	if s == nil {
		return
	}
	s.WorkloadPolicyRefused.Inc(check)
}

// RefusedRenderBudget counts a request of kind (update, dry_run) refused
// for running past the render budget.
func (s *Set) RefusedRenderBudget(kind string) {
	if s == nil {
		return
	}
	s.RenderBudgetRefused.Inc(kind)
}

// RefusedDryRun counts a dry-run refused for want of room.
func (s *Set) RefusedDryRun() {
	if s == nil {
		return
	}
	s.DryRunsRefused.Inc()
}

// DroppedLogResponse counts a log response from a sender that does not
// provide the campaign.
func (s *Set) DroppedLogResponse(from string) {
	if s == nil {
		return
	}
	s.LogResponsesDropped.Inc(from)
}

// RefusedLogCampaign counts a logs request refused at the requester's
// cap.
func (s *Set) RefusedLogCampaign(requester string) {
	if s == nil {
		return
	}
	s.LogCampaignsRefused.Inc(requester)
}

// RefusedStream counts one refused stream.
func (s *Set) RefusedStream(reason, role string) {
	if s == nil {
		return
	}
	s.StreamsRefused.Inc(reason, role)
}

// CollectListeners exposes each listener's connection caps at work, read
// at each scrape: the connections open now and those closed at accept
// for being over a cap, by reason (internal/connlimit).
func (s *Set) CollectListeners(ls ...*connlimit.Listener) {
	if s == nil {
		return
	}
	for _, l := range ls {
		if l == nil {
			continue
		}
		name := l.Name()
		s.Registry.NewGaugeFunc("grapnel_connections_open", "Connections a listener holds open now (grpc, raft, metrics, dashboard).",
			map[string]string{"listener": name}, func() float64 { return float64(l.Open()) })
		for _, why := range []connlimit.Reason{connlimit.OverSource, connlimit.OverTotal} {
			s.Registry.NewCounterFunc("grapnel_connections_refused_total",
				"Connections closed as they were accepted because their source or the listener held its cap (docs/security.md), by listener and cap.",
				map[string]string{"listener": name, "reason": string(why)}, func() float64 { return float64(l.Refused(why)) })
		}
	}
}

// CollectStorage exposes grapnel_storage_failed, refreshed before every
// scrape from failed (replica id → whether its storage failed, every
// member present), and grapnel_storage_errors_total from errors (the
// writes and probes this replica's storage failed).
func (s *Set) CollectStorage(failed func() map[string]bool, errors func() uint64) {
	if s == nil {
		return
	}
	s.Registry.OnCollect(func() {
		s.storageFailed.Reset()
		for id, f := range failed() {
			v := 0.0
			if f {
				v = 1
			}
			s.storageFailed.Set(v, id)
		}
	})
	s.storageErrors.Store(&errors)
	s.storageErrorsOnce.Do(func() {
		s.Registry.NewCounterFunc("grapnel_storage_errors_total",
			"Writes of this replica's Raft log, stable store or snapshots, and probes of its data directory, that its storage failed.", nil,
			func() float64 { return float64((*s.storageErrors.Load())()) })
	})
}

// CollectProblems refreshes the grapnel_problems gauge from counts (open
// problems by kind, every kind present so that a resolved kind reads 0)
// before every scrape: the count is read when asked, so it costs nothing
// between scrapes.
func (s *Set) CollectProblems(counts func() map[string]int) {
	if s == nil {
		return
	}
	s.Registry.OnCollect(func() {
		for k, n := range counts() {
			s.problems.Set(float64(n), k)
		}
	})
}

// CollectCluster refreshes grapnel_agents_connected and grapnel_workloads
// from counts (read from the replicated state) before every scrape.
func (s *Set) CollectCluster(counts func() (agents int, byState map[string]int)) {
	if s == nil {
		return
	}
	s.Registry.OnCollect(func() {
		agents, byState := counts()
		s.agentsConnected.Set(float64(agents))
		s.workloads.Reset()
		for st, n := range byState {
			s.workloads.Set(float64(n), st)
		}
	})
}

// CollectRefusals exposes what the Raft channel refused, read at each
// scrape: failed TLS handshakes by side (accepted, dialled) and
// AppendEntries refused because an entry failed the entry check.
func (s *Set) CollectRefusals(handshakes func() (accepted, dialled uint64), entries func() uint64) {
	if s == nil {
		return
	}
	const help = "TLS handshakes refused on the Raft port, by side: connections accepted, and dialled by Raft or an admission probe (docs/security.md)."
	s.Registry.NewCounterFunc("grapnel_raft_handshakes_refused_total", help, map[string]string{"side": "accepted"},
		func() float64 { a, _ := handshakes(); return float64(a) })
	s.Registry.NewCounterFunc("grapnel_raft_handshakes_refused_total", help, map[string]string{"side": "dialled"},
		func() float64 { _, d := handshakes(); return float64(d) })
	s.Registry.NewCounterFunc("grapnel_raft_entries_refused_total",
		"AppendEntries requests refused because an entry's type is unknown or retired here (nothing stored).", nil,
		func() float64 { return float64(entries()) })
}

// CollectRaft refreshes the Raft gauges from hashicorp/raft's Stats map
// before every scrape.
func (s *Set) CollectRaft(stats func() map[string]string) {
	s.Registry.OnCollect(func() {
		st := stats()
		commit := parseFloat(st["commit_index"])
		applied := parseFloat(st["applied_index"])
		leader := 0.0
		if st["state"] == "Leader" {
			leader = 1
		}
		s.isLeader.Set(leader)
		s.term.Set(parseFloat(st["term"]))
		s.commitIndex.Set(commit)
		s.appliedIndex.Set(applied)
		lag := commit - applied
		if lag < 0 {
			lag = 0
		}
		s.applyLag.Set(lag)
		s.lastContact.Set(lastContactSeconds(st["last_contact"]))
	})
}

// CollectLeader refreshes grapnel_leader before every scrape from
// leaderID, the id of the leader this replica knows ("" for none).
func (s *Set) CollectLeader(leaderID func() string) {
	s.Registry.OnCollect(func() {
		s.leader.Reset()
		if id := leaderID(); id != "" {
			s.leader.Set(1, id)
		}
	})
}

// lastContactSeconds reads raft's last_contact stat: "never", "0" on the
// leader, or a Go duration.
func lastContactSeconds(v string) float64 {
	if d, err := time.ParseDuration(v); err == nil {
		return d.Seconds()
	}
	return 0
}

func parseFloat(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v
}
