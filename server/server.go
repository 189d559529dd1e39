package server

import (
	"cmp"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/changefeed"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/internal/ratelog"
	"github.com/grapnel-io/grapnel/internal/tlsreload"
	"github.com/grapnel-io/grapnel/placement"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/authz"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/proxy"
	"github.com/grapnel-io/grapnel/server/metrics"
	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/server/secrets"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/state/render"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

// Config wires a Server.
type Config struct {
	Node   *cluster.Node
	FSM    *fsm.FSM
	Logger *slog.Logger
	// StartupState seeds a cluster whose desired state was never set.
	StartupState *state.State
	// ApplyTimeout bounds one Raft proposal.
	ApplyTimeout time.Duration
	// GroupCommitDelay is how long a proposal made while an earlier
	// batch is being committed may wait for more to join it
	// (DefaultGroupCommitDelay when zero, none when negative).
	GroupCommitDelay time.Duration
	// GroupCommitMaxBatch is the most proposals in one Batch entry
	// (DefaultGroupCommitMaxBatch when zero; 1 leaves batching to Raft).
	GroupCommitMaxBatch int
	// AgentReconnectGrace is how long a new leader waits for the agents
	// the FSM lists to reconnect before they count as gone
	// (DefaultAgentReconnectGrace when zero, none when negative).
	AgentReconnectGrace time.Duration
	// AgentConnectGrace is how long a leader waits for an agent that has
	// workloads assigned and never connected before the problems view
	// reports it (DefaultAgentConnectGrace when zero, none when
	// negative; docs/problems.md).
	AgentConnectGrace time.Duration
	// ReplicaDownGrace is how long a voter the leader does not reach may
	// stay so before the problems view reports it (DefaultReplicaDownGrace
	// when zero, none when negative; docs/problems.md).
	ReplicaDownGrace time.Duration
	// TrustStoredStatesAtStart keeps the stored workload states of
	// Grapnel agents when a leader is elected without having followed
	// another since it started (every replica restarted, or the only
	// voter did): right for a restart of the replicas alone while every
	// agent and workload ran on, wrong after a power-on, when they are
	// from before it. False (the default) shows Pending(Initial) until
	// each agent reports (leader.unconfirmStoredStates).
	TrustStoredStatesAtStart bool
	// Clock drives the leader's timers; nil is the system clock.
	Clock clock.Clock
	// Metrics records commit latency, batch sizes and leader changes; nil
	// records nothing.
	Metrics *metrics.Set
	// HoldTimeout bounds how long a stream or a leader-only cluster call
	// waits for a leader when none is known (DefaultHoldTimeout when zero).
	HoldTimeout time.Duration
	// Proxy connects a follower to the leader for the streams of clients
	// that do not follow the leader themselves; nil turns proxying off.
	// The caller creates it with the replica's client credentials and
	// closes it after Shutdown.
	Proxy *proxy.Pool
	// Limits bound what an update may put into the desired state (see
	// state.Limits); nil is state.DefaultLimits.
	Limits *state.Limits
	// MaxRestoreBytes caps a snapshot upload to restore
	// (DefaultMaxRestoreBytes when zero).
	MaxRestoreBytes int64
	// MaxMessageBytes is the largest message sent on a stream
	// (rpc.MaxMessageBytes when zero; tests lower it).
	MaxMessageBytes int
	// MaxLogCampaignsPerRequester caps the live log campaigns of one
	// requester: a client connection, or a workload on an agent
	// (DefaultMaxLogCampaignsPerRequester when zero).
	MaxLogCampaignsPerRequester int
	// MaxWorkloadStates caps the workload states the agents' reports can
	// make the cluster hold: a reported state of an instance the cluster
	// has no state for is dropped while it holds this many
	// (DefaultMaxWorkloadStates when zero; states.go).
	MaxWorkloadStates int
	// MaxEventSubscriptionsPerRequester and MaxEventSubscriptions cap the
	// event subscriptions of one requester (a client connection, or a
	// workload on an agent) and of the leader in all
	// (DefaultMaxEventSubscriptionsPerRequester and
	// DefaultMaxEventSubscriptions when zero; subscriptions.go).
	MaxEventSubscriptionsPerRequester int
	MaxEventSubscriptions             int
	// MaxLocks caps the intent locks the cluster holds (DefaultMaxLocks
	// when zero; locksvc.go).
	MaxLocks int
	// HistoryLimits bound the replicated transaction history (zero
	// fields: state.DefaultHistoryMax*); the leader puts them into the
	// entries so that every replica prunes the same (docs/history.md).
	HistoryLimits state.HistoryLimits
	// Secrets seals secret config items and opens them for the agents
	// (docs/secrets.md); nil refuses to store a secret item.
	Secrets *secrets.Keyring
	// UntypedCertRole is the role of a client certificate without a
	// grapnel:// identity (an Ankaios-made one; internal/identity). The
	// zero value, identity.None, refuses such certificates;
	// grapnel-server defaults to identity.Agent.
	UntypedCertRole identity.Role
	// Certs is the replica's certificate material (nil without TLS). The
	// guard verifies the client certificates a follower forwards against
	// its CA pool; without it no forwarded identity is believed.
	Certs *tlsreload.Store
	// WorkloadPolicy is the level of the workload admission policy every
	// workload an update adds or changes must pass (workloadpolicy; the
	// zero value is baseline). Each agent enforces its own as well.
	WorkloadPolicy workloadpolicy.Level
	// HelloTimeout bounds the wait for a new Ankaios stream's hello
	// (DefaultHelloTimeout when zero).
	HelloTimeout time.Duration
	// StreamLimits cap the Ankaios streams this replica holds; a zero
	// field takes DefaultStreamLimits'.
	StreamLimits StreamLimits
	// MaxConcurrentDryRuns bounds the dry-runs this replica plans at once
	// while it leads (DefaultMaxConcurrentDryRuns when zero or less);
	// as many more wait, and the rest are refused (dryrunslots.go).
	MaxConcurrentDryRuns int
	// OnLeadership is told when this replica starts (true) and stops
	// (false) leading, on the leader loop: it must not block. The systemd
	// notifier (cmd/internal/servercmd) turns it into STATUS= lines.
	OnLeadership func(leading bool)
}

// Server is the leader-side Ankaios logic of one replica.
type Server struct {
	cfg      Config
	log      *slog.Logger
	node     *cluster.Node
	fsm      *fsm.FSM
	renderer *render.Renderer
	limits   state.Limits
	// policy is the workload policy of Config.WorkloadPolicy.
	policy workloadpolicy.Policy
	conns  *registry
	// historyLimits are Config.HistoryLimits with the defaults filled in.
	historyLimits state.HistoryLimits

	shutdownCh chan struct{}
	shutdown   sync.Once
	// pings carries Alive's questions to the leadership monitor while
	// this replica does not lead (liveness.go).
	pings     chan chan struct{}
	monitorWG sync.WaitGroup

	// leaderMu guards term: the current leadership term's inbox, nil while
	// this replica does not lead.
	leaderMu sync.RWMutex
	term     *term
	// terms signals every change of term: the requests held until this
	// replica opens its term (findLeader) go on at once.
	terms *changefeed.Feed

	// refusals rate-limits the log lines of refused streams and calls.
	refusals *ratelog.Limiter
	// guard checks every call against the authorization table
	// (rpc/authz); Interceptors installs it.
	guard *authz.Guard
	// streams counts the open Ankaios streams against their caps.
	streams *streamCounter

	// dryRuns bounds the dry-runs planned at once (dryrunslots.go).
	dryRuns dryRunSlots
	// dryRunHook, when set (tests), runs on a dry-run's goroutine before
	// it plans.
	dryRunHook func()
	// loopObs, when set (benchmarks), is told how long each event held
	// the leader loop (loophold.go).
	loopObs atomic.Pointer[loopObserver]
}

// term is one stretch of leadership. Streams accepted during it post to
// its inbox; when it ends, stop is closed and those streams are dropped.
type term struct {
	inbox chan inMsg
	stop  chan struct{}
	// ping carries Alive's questions to the leader loop (liveness.go).
	ping chan chan struct{}
	// unsatisfied is what the leader's last allocation could not satisfy
	// (placement.go), read by Server.Unsatisfied.
	unsatMu     sync.Mutex
	unsatisfied []placement.Unsatisfied
	// releases is each agent's release as its hello to this leader said
	// it (releases.go): leader memory only, never replicated, read by
	// Server.AgentReleases.
	relMu    sync.Mutex
	releases map[string]string
	// clusterVersions is the newest cluster version each agent's hello
	// said its release supports (AgentHello.grapnelClusterVersion),
	// beside releases.
	clusterVersions map[string]uint32
}

// New creates a server; Start begins watching leadership.
func New(cfg Config) (*Server, error) {
	if cfg.Node == nil || cfg.FSM == nil {
		return nil, errors.New("server: Node and FSM are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ApplyTimeout == 0 {
		cfg.ApplyTimeout = 10 * time.Second
	}
	if cfg.GroupCommitDelay == 0 {
		cfg.GroupCommitDelay = DefaultGroupCommitDelay
	}
	lim := state.DefaultLimits()
	if cfg.Limits != nil {
		lim = *cfg.Limits
	}
	if cfg.MaxMessageBytes == 0 {
		cfg.MaxMessageBytes = rpc.MaxMessageBytes
	}
	if cfg.MaxLogCampaignsPerRequester <= 0 {
		cfg.MaxLogCampaignsPerRequester = DefaultMaxLogCampaignsPerRequester
	}
	if cfg.MaxWorkloadStates <= 0 {
		cfg.MaxWorkloadStates = DefaultMaxWorkloadStates
	}
	if cfg.MaxEventSubscriptionsPerRequester <= 0 {
		cfg.MaxEventSubscriptionsPerRequester = DefaultMaxEventSubscriptionsPerRequester
	}
	if cfg.MaxEventSubscriptions <= 0 {
		cfg.MaxEventSubscriptions = DefaultMaxEventSubscriptions
	}
	if cfg.MaxLocks <= 0 {
		cfg.MaxLocks = DefaultMaxLocks
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.Real()
	}
	sl := cfg.StreamLimits
	def := DefaultStreamLimits
	sl.PerAgent, sl.PerClient, sl.Total = cmp.Or(sl.PerAgent, def.PerAgent), cmp.Or(sl.PerClient, def.PerClient), cmp.Or(sl.Total, def.Total)
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		node:     cfg.Node,
		fsm:      cfg.FSM,
		renderer: render.NewLimited(lim.MaxWorkloadBytes),
		limits:   lim,
		policy:   serverPolicy(cfg.WorkloadPolicy),
		conns:    newRegistry(),

		historyLimits: cfg.HistoryLimits.Effective(),
		shutdownCh:    make(chan struct{}),
		terms:         changefeed.New(),
		pings:         make(chan chan struct{}),
		refusals:      ratelog.New(clk, refusalLogWindow),
		streams:       newStreamCounter(sl),
		dryRuns:       newDryRunSlots(cfg.MaxConcurrentDryRuns),
	}
	s.guard = &authz.Guard{Untyped: cfg.UntypedCertRole, Refused: s.refused, Self: cfg.Node.ID(), Member: s.replicaMember, Revoked: s.revoked}
	if cfg.Certs != nil {
		s.guard.Roots = func() *x509.CertPool { return cfg.Certs.Current().Pool }
	}
	cfg.Metrics.CollectProblems(s.problemCounts)
	cfg.Metrics.CollectCluster(s.clusterCounts)
	cfg.Metrics.CollectReleases(s.ReplicaReleases, s.AgentReleases)
	cfg.Metrics.CollectStorage(s.replicaStorage, cfg.Node.StorageErrors)
	cfg.Node.SetAgentSupport(s.AgentClusterVersions)
	return s, nil
}

// Interceptors are the server options that check every call's identity
// and role against the authorization table (rpc/authz). Every gRPC
// server that serves this Server's services needs them, after
// rpc.StatusInterceptors; without them the server still checks agent
// names and each stream message, but not which methods a role may call.
func (s *Server) Interceptors() []grpc.ServerOption { return s.guard.ServerOptions() }

// Register adds the Ankaios services to a gRPC server.
//
// swdd~server-default-communication-grpc~1
func (s *Server) Register(g *grpc.Server) {
	grpcapi.RegisterAgentConnectionServer(g, agentService{s: s})
	grpcapi.RegisterCliConnectionServer(g, cliService{s: s})
	grpcapi.RegisterCommandConnectionServer(g, commandService{s: s})
}

// Start runs the leadership monitor. It returns once the monitor runs, so
// that a leadership the node gains afterwards (cluster.Node.ElectAloneNow)
// reaches the monitor on LeaderCh, not in its first look at IsLeader too.
func (s *Server) Start() {
	s.monitorWG.Add(1)
	running := make(chan struct{})
	go func() {
		close(running)
		s.monitorLeadership()
	}()
	<-running
}

// Shutdown stops the leader loop and closes every stream.
func (s *Server) Shutdown() {
	s.shutdown.Do(func() { close(s.shutdownCh) })
	s.monitorWG.Wait()
	s.conns.closeAll()
}

// IsLeading reports whether this replica serves as leader right now.
func (s *Server) IsLeading() bool { return s.currentTerm() != nil }

func (s *Server) currentTerm() *term {
	s.leaderMu.RLock()
	defer s.leaderMu.RUnlock()
	return s.term
}

// ValidateStartupState checks a startup manifest the way an update is
// checked (render, names, cycles, the workload policy at level) without
// proposing it, so that an invalid one stops the server before it
// serves.
//
// swdd~server-fails-on-invalid-startup-state~1
func ValidateStartupState(s state.State, lim state.Limits, level workloadpolicy.Level) error {
	adm := plan.Admission{Policy: serverPolicy(level)}
	_, err := plan.Make(render.NewLimited(lim.MaxWorkloadBytes), lim, adm, state.NewStore(), s, nil, nil)
	if err != nil {
		return fmt.Errorf("invalid startup manifest: %w", err)
	}
	return nil
}
