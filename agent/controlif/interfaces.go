package controlif

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/grapnel-io/grapnel/access"
	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/ratelog"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/controlapi"
	"github.com/grapnel-io/grapnel/state"
)

// ErrFIFO is wrapped when the control interface directory or its FIFOs
// cannot be created or opened.
var ErrFIFO = errors.New("control interface FIFO")

// ErrInstance is wrapped when an instance name cannot name a directory.
var ErrInstance = errors.New("invalid instance name for a control interface")

// ErrShutdown is returned by Open after Shutdown.
var ErrShutdown = errors.New("control interfaces are shut down")

// ErrNotConnected is what a request meets when Config.Forward is nil.
var ErrNotConnected = errors.New("not connected to the server")

// Subfolder and FIFO names, as Ankaios lays them out.
const (
	folderName = "control_interface"
	inputName  = "input"  // agent → workload
	outputName = "output" // workload → agent
)

// Config is what the control interfaces need from the agent.
type Config struct {
	Agent     string
	RunFolder string
	// Forward sends a workload's request to the server; the request id is
	// already "<workload name>@<workload's own id>". It returns an error
	// when not connected. It is called from the instances' goroutines,
	// possibly at the same time.
	Forward func(*ankbase.Request) error
	Logger  *slog.Logger
	// Clock times the writes to the workloads; nil is the real clock.
	Clock clock.Clock
	// MaxLogCampaigns caps the log campaigns one workload keeps open
	// (0 = DefaultMaxLogCampaigns); a LogsRequest past it is answered
	// with an error and not forwarded.
	MaxLogCampaigns int
}

// Interfaces serves the control interfaces of the agent's instances.
type Interfaces struct {
	cfg    Config
	log    *slog.Logger
	timing timing

	// mu guards sessions, seq and down.
	mu       sync.Mutex
	sessions map[state.InstanceName]*session
	seq      uint64
	down     bool

	// gate orders the sessions' LogsRequests (readers, until forwarded)
	// before ServerGone (the writer).
	gate     sync.RWMutex
	refusals *ratelog.Limiter
	refused  atomic.Uint64 // LogsRequests refused at MaxLogCampaigns
}

// New returns the agent's control interfaces; nothing is served until
// Open.
func New(cfg Config) *Interfaces {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.MaxLogCampaigns <= 0 {
		cfg.MaxLogCampaigns = DefaultMaxLogCampaigns
	}
	return &Interfaces{cfg: cfg, log: cfg.Logger, timing: ankaiosTiming, sessions: map[state.InstanceName]*session{},
		refusals: ratelog.New(cfg.Clock, ratelog.DefaultWindow)}
}

// Dir is the host directory of an instance's FIFOs:
// <run folder>/<agent>_io/<instance>/control_interface.
//
// swdd~agent-control-interface-pipes-path-naming~2
func (c *Interfaces) Dir(inst state.InstanceName) string {
	return filepath.Join(c.cfg.RunFolder, c.cfg.Agent+"_io", inst.String(), folderName)
}

// Open creates the FIFO pair of an instance, or re-uses the one left by an
// earlier agent, and starts serving it; it returns the directory holding
// `input` and `output`. The FIFOs belong to owner (the workload's user;
// nil = the agent's) with mode 0600, in a directory of the agent that only
// the owner's group may enter, so no other workload can open them. Opening an instance that is served already keeps
// its connection when the rules are the same, and starts a new one (the
// workload must say Hello again) when they changed.
//
// swdd~agent-create-control-interface-pipes-per-workload~2
// swdd~agent-control-interface-created-for-eligible-workloads~1
func (c *Interfaces) Open(inst state.InstanceName, rules state.ControlInterfaceAccess, owner *runtime.Owner) (string, error) {
	if err := checkInstance(inst); err != nil {
		return "", err
	}
	var ended *session
	// The cancels go out once the lock is released: forwarding may wait
	// on the stream, and Deliver needs the lock.
	defer func() {
		if ended != nil {
			ended.endLogs("the control interface's rules changed")
		}
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return "", ErrShutdown
	}
	dir := c.Dir(inst)
	if old, ok := c.sessions[inst]; ok {
		if sameAccess(old.access, rules) {
			return dir, nil
		}
		old.stop()
		delete(c.sessions, inst)
		ended = old
	}
	if err := runtime.PrepareRunDir(filepath.Dir(dir), owner); err != nil {
		return "", fmt.Errorf("%w: %w", ErrFIFO, err)
	}
	if err := runtime.PrepareGroupDir(dir, owner); err != nil {
		return "", fmt.Errorf("%w: %w", ErrFIFO, err)
	}
	for _, name := range []string{inputName, outputName} {
		if err := ensureFIFO(filepath.Join(dir, name), owner); err != nil {
			return "", err
		}
	}
	in, err := openReader(filepath.Join(dir, outputName))
	if err != nil {
		return "", err
	}
	c.seq++
	quit := make(chan struct{})
	s := &session{
		inst:     inst,
		access:   rules.Clone(),
		auth:     access.New(rules),
		prefix:   inst.WorkloadName + "@",
		seq:      c.seq,
		forward:  c.cfg.Forward,
		log:      c.log,
		logs:     newLogBook(c.cfg.MaxLogCampaigns),
		gate:     &c.gate,
		refusals: c.refusals,
		refused:  &c.refused,
		in:       in,
		out:      &fifoWriter{path: filepath.Join(dir, inputName), clock: c.cfg.Clock, t: c.timing, quit: quit},
		queue:    make(chan *controlapi.FromAnkaios, queueLen),
		quit:     quit,
	}
	c.sessions[inst] = s
	s.start()
	return dir, nil
}

// checkInstance refuses names that could leave the run folder.
func checkInstance(inst state.InstanceName) error {
	for _, f := range []struct{ field, v string }{
		{"workloadName", inst.WorkloadName}, {"id", inst.ID}, {"agentName", inst.AgentName},
	} {
		field, v := f.field, f.v
		switch {
		case v == "":
			return fmt.Errorf("%w: instanceName.%s: required", ErrInstance, field)
		case strings.ContainsAny(v, `/\`) || v == "." || v == "..":
			return fmt.Errorf("%w: instanceName.%s: '%s' is not a file name", ErrInstance, field, v)
		}
	}
	return nil
}

// sameAccess compares rules, taking nil and empty lists as equal.
func sameAccess(a, b state.ControlInterfaceAccess) bool {
	norm := func(x state.ControlInterfaceAccess) state.ControlInterfaceAccess {
		rules := func(rs []state.AccessRule) []state.AccessRule {
			if len(rs) == 0 {
				return nil
			}
			out := make([]state.AccessRule, len(rs))
			for i, r := range rs {
				out[i] = r
				if len(r.FilterMasks) == 0 {
					out[i].FilterMasks = nil
				}
				if len(r.WorkloadNames) == 0 {
					out[i].WorkloadNames = nil
				}
			}
			return out
		}
		return state.ControlInterfaceAccess{AllowRules: rules(x.AllowRules), DenyRules: rules(x.DenyRules)}
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// Close stops serving an instance, cancels its log campaigns and removes
// its control_interface directory with the FIFOs.
func (c *Interfaces) Close(inst state.InstanceName) {
	c.mu.Lock()
	s, ok := c.sessions[inst]
	delete(c.sessions, inst)
	c.mu.Unlock()
	if ok {
		s.stop()
		s.endLogs("the instance stopped")
	}
	if checkInstance(inst) != nil {
		return
	}
	if err := os.RemoveAll(c.Dir(inst)); err != nil {
		c.log.Warn("control interface: cannot remove the FIFOs", "instance", inst.String(), "err", err)
	}
}

// Deliver routes an answer from the server to the workload named by the
// id's prefix "<workload name>@", with the prefix removed. It reports
// whether such a workload is served here; when several instances of that
// workload are (during an update), the one opened last gets it.
//
// swdd~agent-uses-id-prefix-forward-control-interface-response-correct-workload~1
// swdd~agent-remove-id-prefix-forwarding-control-interface-response~1
// swdd~agent-forward-responses-to-control-interface-pipe~1
func (c *Interfaces) Deliver(r *ankbase.Response) bool {
	name, id, ok := rpc.SplitRequestID(r.GetRequestId())
	if !ok {
		return false
	}
	c.mu.Lock()
	var target *session
	for inst, s := range c.sessions {
		if inst.WorkloadName != name {
			continue
		}
		// The session that opened a log campaign follows it to its end.
		if s.logs.knows(id) {
			target = s
			break
		}
		if target == nil || s.seq > target.seq {
			target = s
		}
	}
	c.mu.Unlock()
	if target == nil {
		return false
	}
	target.deliver(&ankbase.Response{RequestId: id, ResponseContent: r.GetResponseContent()})
	return true
}

// ServerGone tells every session that the agent's stream to the server
// ended: the server ended the log campaigns of the agent's workloads with
// it (and told their providers), so the sessions forget them and each
// workload gets the end of what it still waited for. The agent calls it
// before it opens the next stream.
func (c *Interfaces) ServerGone() {
	// The sessions first, then the gate: Open holds mu while it waits
	// for a session's reader, which may wait for the gate. A session
	// opened meanwhile forwarded nothing on the lost stream.
	c.mu.Lock()
	all := make([]*session, 0, len(c.sessions))
	for _, s := range c.sessions {
		all = append(all, s)
	}
	c.mu.Unlock()
	c.gate.Lock()
	defer c.gate.Unlock()
	for _, s := range all {
		s.serverGone()
	}
}

// LogStats counts the log campaigns the workloads keep open through
// their control interfaces, and those refused at the cap since the start.
type LogStats struct {
	Open    int
	Refused uint64
}

// LogStats reports the workloads' log campaigns.
func (c *Interfaces) LogStats() LogStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := LogStats{Refused: c.refused.Load()}
	for _, s := range c.sessions {
		st.Open += s.logs.size()
	}
	return st
}

// Shutdown stops serving every instance and waits for it; the FIFOs stay
// for the next agent, and the workloads keep their ends.
func (c *Interfaces) Shutdown() {
	c.mu.Lock()
	c.down = true
	all := make([]*session, 0, len(c.sessions))
	for _, s := range c.sessions {
		all = append(all, s)
	}
	c.sessions = map[state.InstanceName]*session{}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.stop()
			s.endLogs("the agent stops")
		}()
	}
	wg.Wait()
}
