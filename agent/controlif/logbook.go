package controlif

import (
	"sort"
	"sync"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

// DefaultMaxLogCampaigns is how many log campaigns one workload's control
// interface may keep open at once unless Config.MaxLogCampaigns says
// otherwise.
const DefaultMaxLogCampaigns = 8

// logBook is what a session knows of the log campaigns its workload
// opened: each from its forwarded LogsRequest until it ends (every
// accepted instance stopped, the workload cancelled it, the server
// answered an error), so that the session can cap them and cancel the
// rest when it ends. It also remembers the campaigns the agent cancelled
// itself: their late answers, and the answer to the agent's cancel, are
// not the workload's.
type logBook struct {
	max int

	mu   sync.Mutex
	open map[string]*logCampaign // by the workload's own request id
	// cancelling holds the ids the agent cancelled, until the server
	// answers that cancel.
	cancelling map[string]bool
}

// logCampaign is an open campaign.
type logCampaign struct {
	accepted bool
	// pending are the accepted instances that have not stopped yet.
	pending map[state.InstanceName]bool
	// early are stops that came before the acceptance.
	early map[state.InstanceName]bool
}

func newLogBook(max int) *logBook {
	return &logBook{max: max, open: map[string]*logCampaign{}, cancelling: map[string]bool{}}
}

// admit records a LogsRequest about to be forwarded; false, with the
// campaigns open, when the workload has max open already. The same id
// again replaces its campaign, as on the server and the agents.
func (b *logBook) admit(id string) (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open[id] == nil && len(b.open) >= b.max {
		return len(b.open), false
	}
	b.open[id] = &logCampaign{}
	return len(b.open), true
}

// forget drops a campaign: its request could not be forwarded, or the
// workload cancelled it.
func (b *logBook) forget(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.open, id)
}

// knows reports whether id is a campaign of this session, open or being
// cancelled by the agent.
func (b *logBook) knows(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open[id] != nil || b.cancelling[id]
}

// size is the number of open campaigns.
func (b *logBook) size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.open)
}

// answer follows a campaign through an answer from the server (id without
// the workload prefix) and reports whether the answer is for the
// workload: answers to a campaign the agent cancelled are not.
func (b *logBook) answer(id string, r *ankbase.Response) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cancelling[id] {
		switch r.GetResponseContent().(type) {
		case *ankbase.Response_LogsCancelAccepted, *ankbase.Response_Error:
			// The answer to the agent's cancel: what follows for this
			// id belongs to a request the workload sent since.
			delete(b.cancelling, id)
		}
		return false
	}
	cp := b.open[id]
	if cp == nil {
		return true
	}
	switch x := r.GetResponseContent().(type) {
	case *ankbase.Response_LogsRequestAccepted:
		cp.accepted = true
		cp.pending = map[state.InstanceName]bool{}
		for _, n := range x.LogsRequestAccepted.GetWorkloadNames() {
			if inst := rpc.InstanceNameFromProto(n); !cp.early[inst] {
				cp.pending[inst] = true
			}
		}
		cp.early = nil
	case *ankbase.Response_LogsStopResponse:
		inst := rpc.InstanceNameFromProto(x.LogsStopResponse.GetWorkloadName())
		if !cp.accepted {
			if cp.early == nil {
				cp.early = map[state.InstanceName]bool{}
			}
			cp.early[inst] = true
			return true
		}
		delete(cp.pending, inst)
	case *ankbase.Response_Error, *ankbase.Response_LogsCancelAccepted:
		delete(b.open, id)
		return true
	default:
		return true
	}
	if cp.accepted && len(cp.pending) == 0 {
		delete(b.open, id)
	}
	return true
}

// cancelAll ends every open campaign: they are marked as being cancelled
// by the agent and their ids returned, in order, for the cancels to be
// forwarded.
func (b *logBook) cancelAll() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := make([]string, 0, len(b.open))
	for id := range b.open {
		ids = append(ids, id)
		b.cancelling[id] = true
	}
	sort.Strings(ids)
	b.open = map[string]*logCampaign{}
	return ids
}

// cancel marks one campaign as being cancelled by the agent, open or
// not (entries may come for a campaign of an earlier connection).
func (b *logBook) cancel(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.open, id)
	b.cancelling[id] = true
}

// uncancel forgets the mark of a cancel that could not be forwarded.
func (b *logBook) uncancel(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.cancelling, id)
}

// ended is a campaign that ended without the workload being told: the
// instances it still waited for, or !accepted.
type ended struct {
	id       string
	accepted bool
	pending  []state.InstanceName
}

// serverGone forgets everything: the server ended the campaigns with the
// agent's stream. It returns what the workload still waits for.
func (b *logBook) serverGone() []ended {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]ended, 0, len(b.open))
	for id, cp := range b.open {
		e := ended{id: id, accepted: cp.accepted}
		for inst := range cp.pending {
			e.pending = append(e.pending, inst)
		}
		sort.Slice(e.pending, func(i, j int) bool { return e.pending[i].String() < e.pending[j].String() })
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	b.open = map[string]*logCampaign{}
	b.cancelling = map[string]bool{}
	return out
}
