package logs

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

// DefaultMaxBatch is Ankaios' limit for one LogEntriesResponse: 2 MiB.
const DefaultMaxBatch = 2 << 20

// flushAfter is how long a line may wait for more to share its batch.
const flushAfter = 50 * time.Millisecond

// lineLimit ends a source whose line grows past it, as Ankaios does.
const lineLimit = 50 << 20

// events buffered per campaign between its readers and its sender.
const eventQueue = 256

// errStopped: the campaign was cancelled; nothing is sent any more.
var errStopped = errors.New("log campaign stopped")

// errNoSend: Config.Send is nil, so there is nowhere to send logs.
var errNoSend = errors.New("no Send configured")

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
	Logger   *slog.Logger
	// Clock times the batches; nil is the real clock.
	Clock clock.Clock
}

// Campaigns holds the agent's running log campaigns by request id.
type Campaigns struct {
	cfg       Config
	log       *slog.Logger
	lineLimit int

	// mu guards byID.
	mu   sync.Mutex
	byID map[string]*campaign
	// wg counts the campaigns' goroutines.
	wg sync.WaitGroup
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
	return &Campaigns{cfg: cfg, log: cfg.Logger, lineLimit: lineLimit, byID: map[string]*campaign{}}
}

// Start begins the campaign of a LogsRequest: one source per requested
// instance. A campaign of the same id that is still running is replaced.
// Start does not wait for the runtimes.
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
		events: make(chan event, eventQueue),
		flushC: make(chan struct{}, 1),
	}
	c.mu.Lock()
	old := c.byID[cp.id]
	c.byID[cp.id] = cp
	c.wg.Add(1)
	c.mu.Unlock()
	if old != nil {
		old.stop()
	}
	go cp.run(req.GetLogsRequest().GetWorkloadNames(), opts, optErr)
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
