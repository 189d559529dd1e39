package state

import "fmt"

// AgentMode is what the operator set for an agent (docs/placement.md). It
// is replicated and outlives the agent's connection: an agent in
// Maintenance stays there while it reboots.
type AgentMode uint8

// Agent modes. Active is the zero value: an agent nobody set a mode for.
const (
	// ModeActive agents host placed workloads.
	ModeActive AgentMode = 0
	// ModeMaintenance agents keep what they host and get nothing new;
	// nothing moves off them, even while they are disconnected.
	ModeMaintenance AgentMode = 1
	// ModeDisabled agents are drained: their placed workloads move to
	// other agents.
	ModeDisabled AgentMode = 2
)

func (m AgentMode) String() string {
	switch m {
	case ModeActive:
		return "Active"
	case ModeMaintenance:
		return "Maintenance"
	case ModeDisabled:
		return "Disabled"
	}
	return fmt.Sprintf("AgentMode(%d)", uint8(m))
}

// ParseAgentMode reads a mode as String spells it.
func ParseAgentMode(s string) (AgentMode, error) {
	for _, m := range []AgentMode{ModeActive, ModeMaintenance, ModeDisabled} {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("agent mode %q is not Active, Maintenance or Disabled", s)
}

// Valid reports whether m is one of the known modes.
func (m AgentMode) Valid() bool { return m <= ModeDisabled }
