package campaign

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/grapnel-io/grapnel/chaos/flashfs"
	"github.com/grapnel-io/grapnel/chaos/upgrade"
)

// Errors of a campaign.
var (
	ErrConfig     = errors.New("campaign: invalid config")
	ErrNotSettled = errors.New("campaign: cluster did not settle")
)

// Defaults of a campaign.
const (
	DefaultGrace   = 3 * time.Second
	DefaultClients = 8
	DefaultKeys    = 8
	// DefaultRate is a client's operations per second: 8 clients give
	// a few hundred a second, enough to see every gap in availability.
	DefaultRate = 25
	// ShortComparisonKills and LongComparisonKills are the leader kills
	// measured under hashicorp/raft's default timing.
	ShortComparisonKills = 3
	LongComparisonKills  = 20
)

// RaftDefaults are hashicorp/raft's default timing flags, for the
// comparison at the end of a run.
var RaftDefaults = []string{"--raft-heartbeat-timeout", "1s", "--raft-election-timeout", "1s",
	"--raft-leader-lease-timeout", "500ms", "--raft-commit-timeout", "50ms"}

// Config is one campaign.
type Config struct {
	// Dir is the run directory: data dirs, logs, history and report.
	Dir string
	// Bins maps grapnel-server and grapnel-agent to their binaries.
	Bins map[string]string
	// Self is the grapnel-chaos binary, re-executed in the client
	// namespace to run the clients.
	Self string
	// Seed draws the schedule and the clients' operations.
	Seed int64
	// Short runs every fault kind once; otherwise faults repeat until
	// Duration has passed.
	Short    bool
	Duration time.Duration
	// MinRounds makes a long campaign go on past Duration until every
	// fault kind has run this many times (the figures need 20 of each).
	MinRounds int
	// Steps, when set, is a scripted schedule run once instead.
	Steps []Step
	// Clients is the number of concurrent chaos clients.
	Clients int
	// Grace is the replicas' --agent-reconnect-grace.
	Grace time.Duration
	// ComparisonKills is the leader kills under Raft's default timing.
	ComparisonKills int
	// Insecure runs every channel without TLS and gossip without a key;
	// by default the campaign makes a CA, a certificate per replica and
	// agent, one for its own clients, and a gossip key (chaos/pki), and
	// adds the intruder fault.
	Insecure bool
	// Previous is the previous release's build for the upgrade fault;
	// nil leaves the upgrade kind out of the plan, with UpgradeSkipped
	// as the reason in the report.
	Previous       *Previous
	UpgradeSkipped string
	// Flash puts every host's replica data dirs and agent run folder on
	// a flash file system mount (chaos/flashfs, FlashModel) in this
	// process, and adds the flash fault kinds (FlashKinds). When the
	// mounts fail (no FUSE, not root), the campaign runs without them,
	// says why and leaves the kinds out, unless RequireFlash is set:
	// then it does not run (ErrNoFlash). Without Flash, NoFlash says why
	// for the report ("--flash=false").
	Flash        bool
	FlashModel   flashfs.Model
	RequireFlash bool
	NoFlash      string
	// RaftLogStore is the replicas' --raft-log-store: "" (the server's
	// default, the WAL), "wal" or "bolt". With bolt the upgrade and
	// corrupt-log kinds are left out: the previous release would move
	// raft.db into a WAL that this build on bolt then refuses, and
	// corrupt-log flips a bit in a WAL segment.
	RaftLogStore string
	// Prefix names the namespaces (netns.Config.Prefix).
	Prefix string
	// Logf reports progress.
	Logf func(format string, args ...any)
}

// Previous is the previous release (.ci/previous-release) as the upgrade
// fault runs it: its grapnel-server, and the flags that binary has, so
// that the flags of newer releases are left off its command line. The
// agents stay on this build.
type Previous struct {
	Commit string
	Server string
	Flags  upgrade.Flags
}

// kinds are the fault kinds of c's plan: every kind, less the upgrade
// when there is no previous release to upgrade from, and less the flash
// kinds without the flash file system.
func (c Config) kinds() []Kind {
	kinds := Kinds
	if c.Previous == nil {
		kinds = Without(kinds, Upgrade)
	}
	if !c.Flash {
		kinds = Without(kinds, FlashKinds...)
	}
	if c.RaftLogStore == LogStoreBolt {
		kinds = Without(kinds, boltSkipped...)
	}
	return kinds
}

// LogStoreBolt is RaftLogStore's value for raft-boltdb/v2.
const LogStoreBolt = "bolt"

// boltSkipped are the kinds a campaign on raft-boltdb leaves out, and why.
var (
	boltSkipped = []Kind{Upgrade, CorruptLog}
	boltWhy     = map[Kind]string{
		Upgrade:    "--raft-log-store bolt: the previous release moves raft.db into a WAL, which this build on bolt refuses",
		CorruptLog: "--raft-log-store bolt: the fault flips a bit in a WAL segment (the entry check on raft.db is tested in cluster/)",
	}
)

// skipped lists the kinds the plan leaves out, with why, for the report.
func (c Config) skipped() []string {
	if len(c.Steps) > 0 {
		return nil
	}
	var out []string
	if c.RaftLogStore == LogStoreBolt {
		for _, k := range boltSkipped {
			out = append(out, string(k)+": "+boltWhy[k])
		}
	}
	if c.Previous == nil && c.RaftLogStore != LogStoreBolt {
		why := c.UpgradeSkipped
		if why == "" {
			why = "no previous release was given"
		}
		out = append(out, string(Upgrade)+": "+why)
	}
	if !c.Flash {
		why := c.NoFlash
		if why == "" {
			why = "the campaign ran without the flash file system"
		}
		for _, k := range FlashKinds {
			out = append(out, string(k)+": "+why)
		}
	}
	return out
}

// checkFlashSteps refuses a scripted step of a flash kind when the
// campaign runs without the flash file system.
func (c Config) checkFlashSteps() error {
	if c.Flash {
		return nil
	}
	for i, s := range c.Steps {
		if slices.Contains(FlashKinds, s.Kind) {
			why := c.NoFlash
			if why == "" {
				why = "Flash is off"
			}
			return fmt.Errorf("%w: Steps[%d]: %s needs the flash file system: %s", ErrConfig, i, s.Kind, why)
		}
	}
	return nil
}

// withDefaults fills zero fields and names the first unusable one.
func (c Config) withDefaults() (Config, error) {
	if c.Clients == 0 {
		c.Clients = DefaultClients
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.ComparisonKills == 0 {
		c.ComparisonKills = LongComparisonKills
		if c.Short {
			c.ComparisonKills = ShortComparisonKills
		}
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	switch {
	case c.Dir == "":
		return c, fmt.Errorf("%w: Dir: empty", ErrConfig)
	case c.Bins["grapnel-server"] == "" || c.Bins["grapnel-agent"] == "":
		return c, fmt.Errorf("%w: Bins: need grapnel-server and grapnel-agent", ErrConfig)
	case c.Self == "":
		return c, fmt.Errorf("%w: Self: the grapnel-chaos binary is needed for the clients", ErrConfig)
	case c.MinRounds < 0:
		return c, fmt.Errorf("%w: MinRounds %d: must not be negative", ErrConfig, c.MinRounds)
	case !c.Short && len(c.Steps) == 0 && c.Duration <= 0:
		return c, fmt.Errorf("%w: Duration %v: a long campaign needs a positive duration", ErrConfig, c.Duration)
	case c.Clients < 0:
		return c, fmt.Errorf("%w: Clients %d: must be positive", ErrConfig, c.Clients)
	case c.Grace < 0:
		return c, fmt.Errorf("%w: Grace %v: must be positive", ErrConfig, c.Grace)
	case c.Previous != nil && (c.Previous.Server == "" || c.Previous.Commit == ""):
		return c, fmt.Errorf("%w: Previous: need the previous release's commit and grapnel-server", ErrConfig)
	case c.RaftLogStore != "" && c.RaftLogStore != "wal" && c.RaftLogStore != LogStoreBolt:
		return c, fmt.Errorf("%w: RaftLogStore %q: wal or bolt", ErrConfig, c.RaftLogStore)
	}
	if c.RaftLogStore == LogStoreBolt {
		for i, s := range c.Steps {
			if slices.Contains(boltSkipped, s.Kind) {
				return c, fmt.Errorf("%w: Steps[%d]: %s cannot run with %s", ErrConfig, i, s.Kind, boltWhy[s.Kind])
			}
		}
	}
	if c.Previous == nil {
		for i, s := range c.Steps {
			if s.Kind == Upgrade {
				why := c.UpgradeSkipped
				if why == "" {
					why = "no previous release was given"
				}
				return c, fmt.Errorf("%w: Steps[%d]: an upgrade needs the previous release: %s", ErrConfig, i, why)
			}
		}
	}
	return c, nil
}
