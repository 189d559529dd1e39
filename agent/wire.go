package agent

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/grapnel-io/grapnel/agent/controlif"
	"github.com/grapnel-io/grapnel/agent/logs"
	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/runtime/containerd"
	"github.com/grapnel-io/grapnel/agent/runtime/podman"
	"github.com/grapnel-io/grapnel/agent/runtime/process"
	"github.com/grapnel-io/grapnel/agent/storage"
	"github.com/grapnel-io/grapnel/agent/workload"
	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/grapnel-io/grapnel/rpc/client"
)

// Run runs the agent until ctx ends: it starts the runtimes, the workload
// Manager, the control interfaces and the log campaigns, joins the
// replicas' gossip when asked, and serves the agent stream, reconnecting
// after every loss. On ctx it says Goodbye and stops everything it
// started, but the workloads keep running: the next start adopts them. A
// configuration error, or the server's refusal of the protocol version,
// ends it with an error.
func Run(ctx context.Context, cfg Config) error {
	a, err := start(cfg)
	if err != nil {
		return err
	}
	return a.run(ctx)
}

// instance is one started agent.
type instance struct {
	log       *slog.Logger
	conn      *conn
	mgr       *workload.Manager
	ctl       *controlif.Interfaces
	campaigns *logs.Campaigns
	member    *gossipMember // nil without GossipJoin
	storage   *storage.Guard
}

// start checks the configuration, advances the incarnation and starts
// everything but the stream.
func start(cfg Config) (_ *instance, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	guard := storage.New(storage.Config{Dir: cfg.RunFolder, Logger: log, Clock: cfg.Clock,
		ProbeMin: cfg.StorageProbeMin, ProbeMax: cfg.StorageProbeMax})
	defer func() {
		if err != nil {
			guard.Close()
		}
	}()
	// A run folder whose storage failed does not stop the agent: its
	// workloads run on, and what it could not write at start is written
	// once the run folder works (agent/storage).
	if err := secureRunFolder(cfg, log); err != nil {
		if !guard.IsFailure(err) {
			return nil, err
		}
		log.Warn("the run folder could not be made ready; the agent runs on and makes it ready once it works", "error", guard.Check(err))
		guard.Redo("run folder", func() error { return secureRunFolder(cfg, log) })
	}
	incPath := incarnationPath(cfg.RunFolder, cfg.Name)
	incarnation, err := nextIncarnation(incPath, cfg.Clock.Now(), log)
	if err != nil {
		if !guard.IsFailure(err) {
			return nil, err
		}
		log.Warn("the incarnation counter could not be kept; the agent says hello with the next number all the same and writes it once the run folder works",
			"incarnation", incarnation, "error", guard.Check(err))
		guard.Redo("incarnation", func() error { return writeIncarnation(durable.OS, incPath, incarnation) })
	}
	runtimes, err := openRuntimes(cfg)
	if err != nil {
		return nil, err
	}
	resolver, err := client.NewResolver(client.Options{
		Addrs: cfg.Servers, Insecure: cfg.Insecure, TLS: cfg.TLS, Certs: cfg.Certs,
		HeartbeatTimeout: cfg.HeartbeatTimeout, HeartbeatInterval: cfg.HeartbeatInterval,
		Lookout: true, Clock: cfg.Clock, Timers: cfg.Clock,
	})
	if err != nil {
		return nil, err
	}
	c := &conn{
		name: cfg.Name, tags: cfg.Tags, incarnation: incarnation, loadEvery: cfg.LoadInterval,
		log: log, resolver: resolver, out: newOutbox(), clock: cfg.Clock, notify: cfg.Notify, storage: guard,
	}
	a := &instance{log: log, conn: c, storage: guard}
	a.ctl = controlif.New(controlif.Config{Agent: cfg.Name, RunFolder: cfg.RunFolder, Forward: c.forward, Logger: log, Clock: cfg.Clock,
		MaxLogCampaigns: cfg.MaxLogCampaignsPerWorkload})
	a.mgr = workload.NewManager(workload.Config{
		Agent: cfg.Name, RunFolder: cfg.RunFolder, Runtimes: runtimes,
		Report: c.report, Control: a.ctl, Logger: log, Clock: cfg.Clock,
		ResyncInterval: cfg.ResyncInterval, Policy: cfg.policy(), Storage: guard,
	})
	a.campaigns = logs.New(logs.Config{Lookup: a.mgr.Lookup, Send: c.send, Logger: log, Clock: cfg.Clock,
		Agent: cfg.Name, MaxCampaigns: cfg.MaxLogCampaigns, MaxSources: cfg.MaxLogSources})
	c.work, c.ctl, c.logs = a.mgr, a.ctl, a.campaigns
	log.Info("agent starting", "name", cfg.Name, "incarnation", incarnation,
		"runtimes", slices.Sorted(maps.Keys(runtimes)), "run_folder", cfg.RunFolder)

	if len(cfg.GossipJoin) > 0 {
		f := &follower{c: c}
		a.member, err = startGossip(gossipConfig{
			Agent: cfg.Name, Bind: cfg.GossipAddress, Join: cfg.GossipJoin, Key: cfg.GossipKey, MoreKeys: cfg.GossipSecondaryKeys,
			Hangup: cfg.GossipHangup, LoadKeys: cfg.GossipLoadKeys,
			Timing: defaultGossipTiming, Logger: log, OnChange: f.onChange, Clock: cfg.Clock,
		})
		if err != nil {
			a.stop()
			return nil, err
		}
		log.Info("gossip member started", "address", a.member.Address(), "join", cfg.GossipJoin)
	}
	return a, nil
}

// run serves the stream until ctx ends, then stops what start started.
//
// The agent tells systemd it is ready here, before any server answers:
// its runtimes are open, its run folder and incarnation are in place and
// the workloads on the host run on whether or not a replica is
// reachable (a vehicle powers its units on in no fixed order). STATUS
// says whether a stream to the leader is open.
func (a *instance) run(ctx context.Context) error {
	notify := a.conn.notify
	a.conn.showStatus()
	notify.Ready()
	stopWatchdog := notify.Watchdog(a.mgr.Alive)
	stopStatus := a.conn.followStorage()
	err := a.conn.serve(ctx)
	stopStatus()
	stopWatchdog()
	notify.Stopping()
	a.stop()
	if err != nil {
		return err
	}
	a.log.Info("agent stopped; its workloads keep running")
	return nil
}

// stop ends every goroutine the agent started; the workloads keep
// running.
func (a *instance) stop() {
	if a.member != nil {
		a.member.Stop()
	}
	a.mgr.Close()
	a.ctl.Shutdown()
	a.campaigns.StopAll()
	a.conn.resolver.Close()
	a.storage.Close()
}

// openRuntimes creates the runtimes the configuration asks for.
func openRuntimes(cfg Config) (map[string]runtime.Runtime, error) {
	names, explicit := cfg.Runtimes, len(cfg.Runtimes) > 0
	if !explicit {
		names = DefaultRuntimes
	}
	out := map[string]runtime.Runtime{}
	// podman and podman-kube share one podman runtime, and with it one
	// `podman ps --all` answer for the state polls of both.
	var (
		pod        *podman.Runtime
		podChecked bool
	)
	for _, name := range names {
		var (
			r   runtime.Runtime
			err error
		)
		switch name {
		case RuntimeProcess:
			r, err = process.New(process.Config{RunFolder: cfg.RunFolder, Logger: cfg.Logger, Clock: cfg.Clock,
				UIDs: cfg.WorkloadUIDs, Policy: cfg.policy().Level, Users: cfg.WorkloadUsers})
		case RuntimeContainerd:
			cc := cfg.Containerd
			cc.Logger, cc.Clock = cfg.Logger, cfg.Clock
			if !containerd.Available(cc) {
				if explicit {
					return nil, fmt.Errorf("%w: runtimes: containerd is listed but containerd is not available (are containerd, ctr and nerdctl installed (scripts/containerd-setup.sh), and does 'ctr --address %s version' work?)", ErrConfig, addressOr(cc.Address))
				}
				cfg.Logger.Warn("containerd is not available; its workloads will fail to start", "runtime", name)
				continue
			}
			r, err = containerd.New(cc)
		case RuntimePodman, RuntimePodmanKube:
			if !podChecked {
				podChecked = true
				if podman.Available(cfg.PodmanBinary) {
					pod, err = podman.New(podman.Config{Binary: cfg.PodmanBinary, Logger: cfg.Logger, Clock: cfg.Clock})
				}
			}
			if pod == nil && err == nil {
				if explicit {
					return nil, fmt.Errorf("%w: runtimes: %s is listed but podman is not available (is it installed, and does 'podman info' work?)", ErrConfig, name)
				}
				cfg.Logger.Warn("podman is not available; its workloads will fail to start", "runtime", name)
				continue
			}
			if err == nil {
				r = pod
				if name == RuntimePodmanKube {
					r = podman.NewKube(pod)
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("runtime %s: %w", name, err)
		}
		out[name] = r
	}
	return out, nil
}

// addressOr is containerd's socket as the runtime will use it.
func addressOr(a string) string {
	if a == "" {
		return containerd.DefaultAddress
	}
	return a
}

// follower applies the gossip view: every replica address goes to the
// Resolver, and a newly agreed leader is hinted. Only a change of the
// agreed leader is hinted: a view that still names the old leader (its
// death not yet gossiped) must not pull the agent back to it.
type follower struct {
	c    *conn
	last string // the leader last hinted
}

func (f *follower) onChange(v gossipView) {
	f.c.resolver.AddAddrs(v.Addrs...)
	if v.LeaderID == "" || v.LeaderID == f.last {
		return
	}
	f.last = v.LeaderID
	f.c.hint(v.LeaderID, v.LeaderAddr)
}
