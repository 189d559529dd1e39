package server

import (
	"log/slog"
	"unicode/utf8"
)

// maxAgentStorageFault bounds the run folder fault the leader keeps of an
// agent: what a Grapnel agent sends is at most as long (agent/storage
// MaxFaultLen), and the replicas' own faults are cut the same
// (gossipmeta.MaxStorageFailedLen).
const maxAgentStorageFault = 160

// noteAgentStorage keeps what an agent's hello or load report says of its
// run folder (AgentHello.grapnelStorageFailed, AgentLoadStatus's): the
// fault, or "" once it works again. It lives in the leader's memory only,
// as the load does, and the problems view reads it (AgentStorageFailed);
// a change makes the leader detect again (factsSignature). field names
// where it came from, for the warning about a text that is too long: that
// one is kept cut, since the fault it tells of matters more than its form
// (protobuf has refused a text that is not UTF-8 already).
func (l *leader) noteAgentStorage(agent, field, fault string) {
	if len(fault) > maxAgentStorageFault {
		l.s.refusals.Log(l.s.log, slog.LevelWarn, "storage|"+agent,
			"an agent announces a run folder fault longer than 160 bytes; kept cut",
			"agent", agent, "field", field, "bytes", len(fault))
		fault = cutFault(fault, maxAgentStorageFault)
	}
	if l.agentStorage[agent] == fault {
		return
	}
	if fault == "" {
		delete(l.agentStorage, agent)
		l.s.log.Info("agent's run folder works again", "agent", agent)
		return
	}
	l.agentStorage[agent] = fault
	l.s.log.Warn("agent announces that its run folder failed", "agent", agent, "fault", fault)
}

// cutFault cuts s to at most n bytes on a rune boundary, marking the cut.
func cutFault(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	s = s[:n-len(mark)]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + mark
}
