// Package servercmd is the command grapnel-server: one replica of the
// Grapnel control plane. The multi-call binary grapnel runs it as
// `grapnel server` or when started under the name grapnel-server
// (cmd/grapnel); cmd/grapnel-server builds it alone.
package servercmd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/buildinfo"
	"github.com/grapnel-io/grapnel/internal/connlimit"
	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/grapnel-io/grapnel/internal/gossipmeta"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/internal/sdnotify"
	"github.com/grapnel-io/grapnel/internal/tlsreload"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/proxy"
	"github.com/grapnel-io/grapnel/server"
	"github.com/grapnel-io/grapnel/server/metrics"
	"github.com/grapnel-io/grapnel/server/secrets"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

// Main runs the replica with args (the command line without the program
// name) and returns the exit code: 2 for a configuration error, 1 when
// the replica failed. After a storage fault heals it executes the
// binary again in place and does not return.
func Main(args []string) int {
	// Everything the replica writes is its own: the data directory holds
	// the whole state, secrets included, and hashicorp/raft and raft-wal
	// create their files 0644 and directories 0755 by their own choice.
	syscall.Umask(0o077)
	cfg, err := loadConfig(args, os.LookupEnv)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "grapnel-server: %v\nRun 'grapnel-server --help' for the options.\n", err)
		return 2
	}
	err = run(cfg)
	if errors.Is(err, errRestartInPlace) {
		err = restartInPlace(syscall.Exec)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "grapnel-server: %v\n", err)
		return 1
	}
	return 0
}

// run starts the replica, serves until a signal, a serving error or a
// storage event ends it, and shuts it down. It goes in phases, each a
// method of replica that fills in what the next needs: configure (what
// the settings imply, the certificates), listen (the gRPC and dashboard
// sockets, whose addresses the replica advertises), openCluster (the FSM
// and the Raft node on the data directory), startServices (the server,
// metrics, dashboard and gRPC services) and serve.
func run(cfg config) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: parseLevel(cfg.LogLevel)}))
	if cfg.EnableDebug {
		enableHeapProfile()
	}
	defer setGC(cfg.GCPercent, cfg.GCIdlePercent, cfg.IdleProcs, os.LookupEnv, log)()
	r := &replica{cfg: cfg, log: log}
	defer r.close()
	for _, phase := range []func() error{r.configure, r.listen, r.openCluster, r.startServices} {
		if err := phase(); err != nil {
			return err
		}
	}
	return r.serve()
}

// replica is what run's phases build, in their order.
type replica struct {
	cfg config
	log *slog.Logger

	// configure
	level      workloadpolicy.Level
	startup    *state.State
	caps       connCaps
	untyped    identity.Role
	opts       []grpc.ServerOption
	proxyCreds credentials.TransportCredentials
	// certs is this replica's certificate, key and CA, re-read when the
	// files change or on SIGHUP, for every channel: the gRPC server, the
	// follower proxy's client and the Raft port. Nil with --insecure.
	certs                       *tlsreload.Store
	uiTLS                       *tls.Config
	gossipKeys, agentGossipKeys gossipmeta.Keys
	keyring                     *secrets.Keyring

	// listen
	lis, uiLis *connlimit.Listener
	uiAddress  string

	// openCluster
	f    *fsm.FSM
	node *cluster.Node

	// startServices
	metricSet *metrics.Set
	notify    *sdnotify.Notifier
	srv       *server.Server
	g         *grpc.Server

	closers []func() // run at the end, last first
}

// deferClose has fn run when run returns, before the closers added
// earlier.
func (r *replica) deferClose(fn func()) { r.closers = append(r.closers, fn) }

func (r *replica) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// configure derives from the settings what the replica runs with and
// loads the certificates, the gossip keys and the secret keyring.
func (r *replica) configure() error {
	cfg, log := r.cfg, r.log
	var err error
	if r.level, err = cfg.workloadPolicy(); err != nil {
		return err
	}
	if r.startup, err = loadStartupManifest(cfg.StartupManifest, cfg.limits(), r.level, log); err != nil {
		return err
	}
	// The caps on the connections each listener holds, the gRPC port's
	// sized to the descriptors the process may open (netbounds.go).
	nofile, err := openFileLimit()
	if err != nil {
		return err
	}
	if r.caps, err = cfg.connCaps(nofile); err != nil {
		return err
	}
	logCaps(log, r.caps)
	if r.untyped, err = cfg.untypedRole(); err != nil {
		return err
	}
	// Message size, stream, handshake and keepalive limits, the same ones
	// the clients use (rpc/limits.go), and the interceptors that give the
	// handlers' errors their gRPC status (rpc/interceptor.go).
	r.opts = append(rpc.ServerOptions(), grpc.ConnectionTimeout(cfg.GRPCHandshakeTimeout))
	r.opts = append(r.opts, rpc.StatusInterceptors()...)
	// The proxy dials the leader as a client, with this replica's own
	// certificate, so the leader can trust the names it forwards.
	r.proxyCreds = insecure.NewCredentials()
	if cfg.Insecure {
		// swdd~server-establishes-insecure-communication-based-on-provided-insecure-cli-argument~1
		log.Warn("serving WITHOUT TLS (--insecure): no identity is checked and every caller may do everything, cluster administration included; anyone who reaches the port controls the cluster")
		log.Warn("the Raft port " + cfg.RaftAddress + " is PLAIN TCP (--insecure): anyone who reaches it can write the replicated state; gossip alone admits replicas")
	} else {
		// swdd~server-provides-file-paths-to-communication-middleware~1
		if r.certs, err = rpc.NewTLSStore(cfg.tlsFiles()); err != nil {
			return err
		}
		r.certs.OnError(func(err error) {
			log.Error("certificate reload failed; keeping the previous certificates", "error", err)
		})
		r.opts = append(r.opts, grpc.Creds(credentials.NewTLS(rpc.ServerTLSConfigFrom(r.certs))))
		r.proxyCreds = credentials.NewTLS(rpc.ClientTLSConfigFrom(r.certs, rpc.ServerName))
		watch, err := tlsreload.Watch(r.certs)
		if err != nil {
			return err
		}
		r.deferClose(watch.Stop)
		r.uiTLS = rpc.ServerTLSConfigFrom(r.certs)
	}
	if r.gossipKeys, r.agentGossipKeys, err = cfg.readGossipKeys(); err != nil {
		return err
	}
	if cfg.SecretKeyFile != "" {
		if r.keyring, err = secrets.LoadKeyring(cfg.SecretKeyFile); err != nil {
			return err
		}
		log.Info("secret keyring loaded", "keys", r.keyring.IDs(), "active", r.keyring.Active())
	}
	return nil
}

// listen binds the gRPC port and the dashboard's, if any.
func (r *replica) listen() error {
	raw, err := net.Listen("tcp", r.cfg.Address)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", r.cfg.Address, err)
	}
	r.lis = rpc.ServerListener(raw, connlimit.Config{Name: "grpc", Limits: r.caps.grpc, Logger: r.log})
	if r.uiLis, err = listenUI(r.cfg.UIAddress, r.caps.ui, r.log); err != nil {
		r.lis.Close()
		return err
	}
	if r.uiLis != nil {
		r.uiAddress = r.uiLis.Addr().String()
	}
	return nil
}

// openCluster opens the FSM and the Raft node on the data directory: the
// log store, the snapshots, the Raft port and gossip.
func (r *replica) openCluster() error {
	cfg := r.cfg
	r.f = fsm.New()
	node, err := cluster.NewNode(cluster.Config{
		ID: cfg.Name, DataDir: cfg.DataDir, RaftAddress: cfg.RaftAddress, FSM: r.f,
		GRPCAddress: r.lis.Addr().String(), UIAddress: r.uiAddress, Version: version, Timing: cfg.timing(),
		BootstrapExpect: cfg.BootstrapExpect, GossipAddress: cfg.GossipAddress,
		GossipKey: r.gossipKeys.Primary(), GossipSecondaryKeys: secondaryKeys(r.gossipKeys),
		AgentGossipAddress: cfg.AgentGossipAddress, AgentGossipKeys: r.agentGossipKeys, RaftTLS: r.certs,
		Join: cfg.Join, Logger: r.log, LogLevel: libraryLogLevel(cfg.LogLevel), LogStore: cfg.RaftLogStore, SegmentSize: cfg.RaftSegmentMiB << 20, SnapshotThreshold: uint64(cfg.RaftSnapshotThreshold), UpgradeFinalizeAfter: cfg.UpgradeFinalizeAfter,
		CheckEntry: fsm.CheckType, DeferSoloElection: true, RaftConnLimits: r.caps.raft, DisableFastFailover: !cfg.RaftFastFailover,
	})
	if err != nil {
		r.lis.Close()
		if r.uiLis != nil {
			r.uiLis.Close()
		}
		if errors.Is(err, cluster.ErrLogStoreSwitch) {
			return fmt.Errorf("--raft-log-store %s: %w", cfg.RaftLogStore, err)
		}
		return err
	}
	r.node = node
	return nil
}

// noneIsNegative is a duration setting as server.Config reads it: the
// settings' zero means none, the server's zero means its default.
func noneIsNegative(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// startServices starts the server on the node, lets a lone replica elect
// itself, and starts the metrics, the dashboard and the gRPC services.
func (r *replica) startServices() error {
	cfg, log, node := r.cfg, r.log, r.node
	r.metricSet = metrics.NewSet()
	r.metricSet.CollectBuild(version, buildinfo.CommitID())
	r.metricSet.CollectListeners(r.lis, node.RaftListener(), r.uiLis)
	// systemd (Type=notify): the replica reports leader/follower as it
	// changes, READY=1 once it serves, WATCHDOG=1 while its main loop
	// answers (docs/operations.md, "systemd").
	r.notify = sdnotify.New(log)
	r.notify.Status(replicaStatus(false, nil))
	pool := proxy.NewPool(grpc.WithTransportCredentials(r.proxyCreds), proxy.DialFrom(cfg.RaftAddress))
	r.deferClose(func() { pool.Close() })
	lim := cfg.limits()
	srv, err := server.New(server.Config{
		Node: node, FSM: r.f, Logger: log, StartupState: r.startup, Metrics: r.metricSet,
		AgentReconnectGrace: noneIsNegative(cfg.AgentReconnectGrace), AgentConnectGrace: noneIsNegative(cfg.AgentConnectGrace),
		HoldTimeout: cfg.RPCHoldTimeout, Proxy: pool,
		GroupCommitDelay: noneIsNegative(cfg.GroupCommitDelay), GroupCommitMaxBatch: cfg.GroupCommitMaxBatch, Limits: &lim, MaxRestoreBytes: int64(cfg.MaxRestoreBytes),
		MaxLogCampaignsPerRequester: cfg.MaxLogCampaignsPerRequester,
		MaxWorkloadStates:           cfg.MaxWorkloadStates,

		MaxEventSubscriptionsPerRequester: cfg.MaxEventSubscriptionsPerRequester,
		MaxEventSubscriptions:             cfg.MaxEventSubscriptions,
		MaxLocks:                          cfg.MaxLocks,
		HistoryLimits: state.HistoryLimits{MaxEntries: uint32(cfg.HistoryMaxEntries), MaxAgeMs: uint64(cfg.HistoryMaxAge.Milliseconds()),
			MaxBytes: uint64(cfg.HistoryMaxBytes)},
		Secrets: r.keyring, UntypedCertRole: r.untyped, Certs: r.certs, WorkloadPolicy: r.level, HelloTimeout: cfg.HelloTimeout,
		StreamLimits:         server.StreamLimits{PerAgent: cfg.MaxStreamsPerAgent, PerClient: cfg.MaxStreamsPerClient, Total: cfg.MaxStreams},
		MaxConcurrentDryRuns: cfg.MaxConcurrentDryRuns,
		OnLeadership: func(leading bool) {
			r.notify.Status(replicaStatus(leading, node.StorageFault()))
		},
	})
	if err != nil {
		node.Shutdown()
		r.lis.Close()
		return err
	}
	r.srv = srv
	srv.Start()
	// Only now, with the server watching leadership, may a lone replica
	// elect itself.
	node.ElectAloneNow()
	ms := metricsServing{addr: cfg.MetricsAddress, debug: cfg.EnableDebug, caps: r.caps.metrics, untyped: r.untyped}
	if cfg.MetricsTLS {
		// The replica's own certificates, reloaded as the gRPC port's;
		// the roles were checked with the config.
		ms.tls = rpc.ServerTLSConfigFrom(r.certs)
		ms.roles, _ = cfg.metricsRoles()
	}
	stopMetrics, err := serveMetrics(ms, r.metricSet, node, log)
	if err != nil {
		srv.Shutdown()
		node.Shutdown()
		r.lis.Close()
		return err
	}
	r.deferClose(stopMetrics)
	stopUI := serveUI(r.uiLis, r.uiTLS, r.untyped, node, r.f, srv.AgentReleases, r.lis.Addr().String(), grpc.WithTransportCredentials(r.proxyCreds), log)
	r.deferClose(stopUI)
	// Every call is checked against the authorization table (rpc/authz),
	// inside the status interceptors so that a refusal gets its code.
	r.g = grpc.NewServer(append(r.opts, srv.Interceptors()...)...)
	srv.Register(r.g)
	srv.RegisterCluster(r.g)
	srv.RegisterPlan(r.g)
	srv.RegisterLocks(r.g)
	return nil
}

// serve serves until a signal, a serving error or a storage event, then
// shuts the replica down; errRestartInPlace asks main to start it again.
func (r *replica) serve() error {
	cfg, log, node, notify := r.cfg, r.log, r.node, r.notify
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hupDone := reloadOnHangup(ctx, cfg, r.certs, node, log)
	defer func() { stop(); <-hupDone }()
	errCh := make(chan error, 1)
	go func() { errCh <- r.g.Serve(r.lis) }()
	// Serving: the listener is bound and its accept loop runs, the Raft
	// node is open and the leadership monitor watches it, so the replica
	// either leads, follows, or knows it waits for its peers (a lone
	// member of a cluster still forming answers with "no leader").
	notify.Ready()
	stopWatchdog := notify.Watchdog(r.srv.Alive)
	log.Info("grapnel-server started", "id", cfg.Name, "address", r.lis.Addr().String(), "raft", cfg.RaftAddress,
		"gossip", cfg.GossipAddress, "data", cfg.DataDir)
	var err error
	restart := false
	failed, healed, corrupted := node.StorageFailed(), node.StorageHealed(), node.Corrupted()
wait:
	for {
		select {
		case <-ctx.Done():
			log.Info("shutting down")
			break wait
		case err = <-errCh:
			break wait
		case <-failed:
			// The node has logged the fault; systemd shows it until the
			// restart below.
			failed = nil
			notify.Status(replicaStatus(false, node.StorageFault()))
		case <-healed:
			log.Warn("storage works again: restarting in place (same process id) to reopen the data directory; "+
				"the agents and clients reconnect as after a restart", "data_dir", cfg.DataDir)
			notify.Status(restartingStatus)
			restart = true
			break wait
		case <-corrupted:
			log.Error("corrupt data found while running: restarting in place (same process id) to cut it out and "+
				"catch up from the leader", "error", node.Corruption(), "data_dir", cfg.DataDir)
			notify.Status(repairingStatus)
			restart = true
			break wait
		}
	}
	stopWatchdog()
	if restart {
		// Not a leave: the same replica is back in a moment.
		stepDown(node, false, log)
	} else {
		notify.Stopping()
		stepDown(node, cfg.LeaveOnTerminate, log)
	}
	r.srv.Shutdown()
	r.g.Stop()
	if !restart {
		snapshotBeforeStop(node, log)
	}
	if serr := node.Shutdown(); err == nil {
		err = serr
	}
	if restart {
		if err != nil {
			// The stores of a failed storage may not close cleanly;
			// the new run reopens them from the disk all the same.
			log.Warn("shutdown before the restart in place", "error", err)
		}
		// What the kernel kept of writes whose fsync failed must not be
		// read back as if it were on the disk (durable.Uncache).
		if uerr := durable.Uncache(cfg.DataDir); uerr != nil {
			log.Warn("could not drop the data directory's cached pages before the restart", "error", uerr)
		}
		return errRestartInPlace
	}
	return err
}

// The STATUS= texts systemd shows for a replica.
const (
	leaderStatus     = "leader"
	followerStatus   = "follower"
	restartingStatus = "storage works again: restarting in place to reopen the data directory"
	repairingStatus  = "corrupt data found: restarting in place to cut it out and catch up from the leader"
)

// replicaStatus is the STATUS= text of a replica that leads or not, or
// whose storage failed, which overrides both.
func replicaStatus(leading bool, fault *cluster.StorageFault) string {
	switch {
	case fault != nil:
		return "storage failed: " + fault.Short() + "; stepped down, stores nothing; " +
			"probing the data directory, restarts itself once it works"
	case leading:
		return leaderStatus
	default:
		return followerStatus
	}
}

// loadStartupManifest parses and validates the startup manifest; an
// invalid one stops the server (swdd~server-fails-on-invalid-startup-state~1).
// Without one the replica starts as an Ankaios server started without -c
// does: a fresh cluster begins with an empty desired state, and the log
// says so. A manifest that is named but missing is a mistake in the
// configuration, not an empty state: it stops the server naming the key.
//
// swdd~stored-workload-spec-parses-yaml~1
// swdd~stored-workload-spec-checks-unique-name~1
func loadStartupManifest(path string, lim state.Limits, level workloadpolicy.Level, log *slog.Logger) (*state.State, error) {
	if path == "" {
		log.Info("no startup manifest (startup_manifest, -m): a fresh cluster starts with an empty desired state")
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("startup_manifest (-m) %s: %w (leave the key out to start with an empty desired state)", path, err)
	}
	s, warn, err := state.ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("invalid startup manifest %s: %w", path, err)
	}
	if warn != "" {
		log.Warn(warn, "manifest", path)
	}
	if err := server.ValidateStartupState(s, lim, level); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}

// libraryLogLevel is the least level of Raft's, raft-wal's and
// memberlist's lines: warn, but debug at --log-level debug (at info Raft
// says more than an operator reads).
func libraryLogLevel(s string) string {
	if parseLevel(s) == slog.LevelDebug {
		return "debug"
	}
	return "warn"
}

func parseLevel(s string) slog.Level {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug
	case "warn", "warning":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// secondaryKeys are the keys after the primary: those a rotation adds.
func secondaryKeys(k gossipmeta.Keys) [][]byte {
	if len(k) < 2 {
		return nil
	}
	return k[1:]
}

// reloadOnHangup re-reads, on each SIGHUP until ctx ends, the
// certificates (also reloaded on file change) and, with a node, the gossip
// key files
// (docs/security.md, "Gossip keys"). A reload that fails keeps what was in
// use and logs why. The returned channel closes when it has stopped.
func reloadOnHangup(ctx context.Context, cfg config, certs *tlsreload.Store, node *cluster.Node, log *slog.Logger) <-chan struct{} {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
			}
			log.Info("SIGHUP: reloading certificates and gossip keys")
			if certs != nil {
				if err := certs.Reload(); err != nil {
					log.Error("certificate reload failed; keeping the previous certificates", "error", err)
				} else {
					log.Info("certificates reloaded", "generation", certs.Current().Generation)
				}
			}
			if node == nil {
				continue
			}
			replicas, agents, err := cfg.readGossipKeys()
			if err != nil {
				log.Error("gossip key reload failed; keeping the previous keys", "error", err)
				continue
			}
			if len(replicas) > 0 {
				if err := node.SetGossipKeys(replicas); err != nil {
					log.Error("gossip key reload failed; keeping the previous keys", "file", cfg.GossipKeyFile, "error", err)
				}
			}
			if len(agents) > 0 {
				if err := node.SetAgentGossipKeys(agents); err != nil {
					log.Error("agents' gossip key reload failed; keeping the previous keys", "file", cfg.AgentGossipKeyFile, "error", err)
				}
			}
			r, a := node.GossipKeyCounts()
			log.Info("gossip keys in use", "replicas_pool", r, "agents_pool", a)
		}
	}()
	return done
}
