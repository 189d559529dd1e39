package logs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/ratelog"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

// DefaultMaxBatch is Ankaios' limit for one LogEntriesResponse: 2 MiB.
const DefaultMaxBatch = 2 << 20

// flushAfter is how long a line may wait for more to share its batch.
const flushAfter = 50 * time.Millisecond

// lineLimit ends a source whose line grows past it, as Ankaios does.
const lineLimit = 50 << 20

// events buffered per campaign between its readers and its sender: a
// batch's worth of short lines, small enough that an idle campaign costs
// little (each event is 32 bytes).
const eventQueue = 64

// Defaults of the agent-wide caps (Config.MaxCampaigns, MaxSources).
const (
	DefaultMaxCampaigns = 64
	DefaultMaxSources   = 256
)

// errStopped: the campaign was cancelled; nothing is sent any more.
var errStopped = errors.New("log campaign stopped")

// errNoSend: Config.Send is nil, so there is nowhere to send logs.
var errNoSend = errors.New("no Send configured")

// ErrBusy is wrapped by the refusals at the caps; the requester reads the
// message as the source's only line.
var ErrBusy = errors.New("log campaign refused")

// Config is what the campaigns need from the agent.
type Config struct {
	// Lookup finds the runtime and runtime id of one of the agent's
	// instances.
	Lookup func(state.InstanceName) (runtime.Runtime, runtime.ID, bool)
	// Send passes a LogEntriesResponse or LogsStopResponse to the server.
	// Campaigns call it from their own goroutines, possibly at the same
	// time; it must not call back into Campaigns. An error ends the
	// campaign.
	Send     func(*grpcapi.ToServer) error
	MaxBatch int // 0 = DefaultMaxBatch
	// MaxCampaigns caps the campaigns running at once, MaxSources the
	// log readers they hold open (0 = the defaults). A request past
	// either cap is answered for each instance over it with one entry
	// saying so and its LogsStopResponse, as Ankaios reports a runtime's
	// complaint, so that its requester does not wait.
	MaxCampaigns int
	MaxSources   int
	// Agent names the agent in those entries.
	Agent  string
	Logger *slog.Logger
	// Clock times the batches; nil is the real clock.
	Clock clock.Clock
}

// Campaigns holds the agent's running log campaigns by request id.
type Campaigns struct {
	cfg       Config
	log       *slog.Logger
	lineLimit int
	refusals  *ratelog.Limiter

	// mu guards byID, sources and the refusal counts.
	mu   sync.Mutex
	byID map[string]*campaign
	// sources counts the readers open (or being opened) for all
	// campaigns: each holds a descriptor, a goroutine and a buffer.
	sources int
	stats   Stats
	// wg counts the campaigns' goroutines.
	wg sync.WaitGroup
}

// Stats are the counts of the caps: what runs now and what was refused
// since the start.
type Stats struct {
	Campaigns        int    // running
	Sources          int    // open readers
	RefusedCampaigns uint64 // requests refused at MaxCampaigns
	RefusedSources   uint64 // instances refused at MaxSources
}

// New returns an empty set of campaigns.
func New(cfg Config) *Campaigns {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.MaxCampaigns <= 0 {
		cfg.MaxCampaigns = DefaultMaxCampaigns
	}
	if cfg.MaxSources <= 0 {
		cfg.MaxSources = DefaultMaxSources
	}
	return &Campaigns{cfg: cfg, log: cfg.Logger, lineLimit: lineLimit, byID: map[string]*campaign{},
		refusals: ratelog.New(cfg.Clock, ratelog.DefaultWindow)}
}

// Stats reports the running campaigns and sources and the refusals.
func (c *Campaigns) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Campaigns, s.Sources = len(c.byID), c.sources
	return s
}

// Start begins the campaign of a LogsRequest: one source per requested
// instance. A campaign of the same id that is still running is replaced.
// Past MaxCampaigns the request is refused: each instance gets an entry
// saying so and its stop. Start does not wait for the runtimes.
//
// swdd~agent-handles-logs-requests-from-server~1
// swdd~agent-workload-log-facade-starts-log-collection~1
func (c *Campaigns) Start(req *grpcapi.LogsRequest) {
	opts, optErr := options(req.GetLogsRequest())
	ctx, cancel := context.WithCancel(context.Background())
	cp := &campaign{
		c:      c,
		id:     req.GetRequestId(),
		ctx:    ctx,
		cancel: cancel,
		flushC: make(chan struct{}, 1),
	}
	c.mu.Lock()
	old := c.byID[cp.id]
	refused := old == nil && len(c.byID) >= c.cfg.MaxCampaigns
	if refused {
		// Not recorded: a refused request holds no slot, and its
		// goroutine only sends the refusal.
		c.stats.RefusedCampaigns++
		optErr = fmt.Errorf("%w: the agent%s runs %d log campaigns, as many as it may (--max-log-campaigns %d); try again once one has ended",
			ErrBusy, c.named(), len(c.byID), c.cfg.MaxCampaigns)
	} else {
		c.byID[cp.id] = cp
	}
	c.wg.Add(1)
	c.mu.Unlock()
	if refused {
		c.refusals.Log(c.log, slog.LevelWarn, "campaigns", "logs: refusing a campaign over the agent's cap",
			"requestId", cp.id, "max", c.cfg.MaxCampaigns)
	}
	if old != nil {
		old.stop()
	}
	if optErr == nil {
		// Only a campaign that reads needs the queue.
		cp.events = make(chan event, eventQueue)
	}
	go cp.run(req.GetLogsRequest().GetWorkloadNames(), opts, optErr)
}

// named is " '<agent>'" when the agent's name is known.
func (c *Campaigns) named() string {
	if c.cfg.Agent == "" {
		return ""
	}
	return " '" + c.cfg.Agent + "'"
}

// reserveSource takes a source slot; false (counted) at MaxSources.
func (c *Campaigns) reserveSource() (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sources >= c.cfg.MaxSources {
		c.stats.RefusedSources++
		return c.sources, false
	}
	c.sources++
	return c.sources, true
}

// releaseSource gives a source slot back.
func (c *Campaigns) releaseSource() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sources--
}

// Cancel ends a campaign: its readers are closed and, once Cancel
// returns, nothing more is sent for it. An unknown id is ignored.
func (c *Campaigns) Cancel(requestID string) {
	c.mu.Lock()
	cp := c.byID[requestID]
	delete(c.byID, requestID)
	c.mu.Unlock()
	if cp != nil {
		cp.stop()
	}
}

// StopAll ends every campaign, as the Ankaios agent does when the server
// goes away.
func (c *Campaigns) StopAll() {
	c.mu.Lock()
	all := c.byID
	c.byID = map[string]*campaign{}
	c.mu.Unlock()
	for _, cp := range all {
		cp.stop()
	}
}

// forget drops a campaign that ended by itself.
//
// swdd~agent-workload-log-facade-automatically-unsubscribes-log-subscriptions~1
func (c *Campaigns) forget(cp *campaign) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID[cp.id] == cp {
		delete(c.byID, cp.id)
	}
}

// wait waits for every goroutine of ended campaigns.
func (c *Campaigns) wait() { c.wg.Wait() }
