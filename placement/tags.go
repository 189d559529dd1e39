package placement

import (
	"fmt"
	"strconv"

	"github.com/grapnel-io/grapnel/state"
)

// Tag keys. They live in the tags Ankaios v1 already carries (AgentHello
// tags, workload tags), so the wire protocol and an unmodified Ankaios
// client are unaffected (docs/api-compatibility.md).
const (
	// TagRiskGroup on an agent names its risk group: agents that share a
	// cause of failure (a board, a power rail). An agent without it is a
	// risk group of its own.
	TagRiskGroup = "grapnel.io/risk-group"
	// TagCapacity on an agent is how many workloads it may host, pinned
	// and placed together; without it there is no limit.
	TagCapacity = "grapnel.io/capacity"
	// TagInstances on a workload without an agent asks for that many
	// instances, each on another agent.
	TagInstances = "grapnel.io/instances"
	// TagSpread on a placed workload says how to spread its instances:
	// SpreadRiskGroup (the default) or SpreadNone.
	TagSpread = "grapnel.io/spread"
)

// Spread values.
const (
	SpreadRiskGroup = "risk-group"
	SpreadNone      = "none"
)

// MaxInstances bounds TagInstances: a vehicle has a handful of compute
// units, and a typo of 1000 should be refused, not tried.
const MaxInstances = 64

// Request is a placed workload as the allocator sees it.
type Request struct {
	Workload  string
	Instances int
	// Spread asks that no two instances share a risk group.
	Spread bool
}

// IsPlaced reports whether a workload asks to be placed: it names no
// agent and carries TagInstances.
func IsPlaced(w *state.Workload) bool {
	if w == nil || w.Agent != "" {
		return false
	}
	_, ok := w.Tags[TagInstances]
	return ok
}

// RequestOf reads a workload's placement request. ok is false for a
// workload that does not ask to be placed; err names the bad field.
func RequestOf(name string, w *state.Workload) (r Request, ok bool, err error) {
	n, has := w.Tags[TagInstances]
	sp, hasSpread := w.Tags[TagSpread]
	field := func(tag string) string { return "desiredState.workloads." + name + ".tags[" + tag + "]" }
	if !has {
		if hasSpread {
			return Request{}, false, fmt.Errorf("%s: a spread needs %s as well", field(TagSpread), TagInstances)
		}
		return Request{}, false, nil
	}
	if w.Agent != "" {
		return Request{}, false, fmt.Errorf("%s: the workload names agent %q; a workload is either pinned (agent) or placed (%s), not both",
			field(TagInstances), w.Agent, TagInstances)
	}
	k, perr := strconv.Atoi(n)
	if perr != nil || k < 1 || k > MaxInstances {
		return Request{}, false, fmt.Errorf("%s: %q is not a whole number from 1 to %d", field(TagInstances), n, MaxInstances)
	}
	r = Request{Workload: name, Instances: k, Spread: true}
	switch sp {
	case "", SpreadRiskGroup:
	case SpreadNone:
		r.Spread = false
	default:
		return Request{}, false, fmt.Errorf("%s: %q is not %q or %q", field(TagSpread), sp, SpreadRiskGroup, SpreadNone)
	}
	return r, true, nil
}

// Unlimited is the capacity of an agent without TagCapacity.
const Unlimited = -1

// AgentTags reads an agent's risk group and capacity from its tags. An
// agent without a risk group is a group of its own (its name); one
// without a capacity has Unlimited. err names the bad tag.
func AgentTags(name string, tags map[string]string) (riskGroup string, capacity int, err error) {
	riskGroup, capacity = tags[TagRiskGroup], Unlimited
	if riskGroup == "" {
		riskGroup = "agent:" + name
	}
	if c, ok := tags[TagCapacity]; ok {
		k, perr := strconv.Atoi(c)
		if perr != nil || k < 0 {
			return riskGroup, 0, fmt.Errorf("agent %s: tag %s: %q is not a whole number of workloads (0 or more)", name, TagCapacity, c)
		}
		capacity = k
	}
	return riskGroup, capacity, nil
}
