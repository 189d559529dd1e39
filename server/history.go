package server

import (
	"strings"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// The leader's part of the transaction history (docs/history.md): it
// decides the time (its injected clock), who asked, the masks and the
// limits, and puts them into the entries; the FSM appends the records
// on every replica from them.

// requesterStartup names the startup manifest as the requester of the
// update that seeds a cluster.
const requesterStartup = "startup-manifest"

// requester names who sent a request for the history: the connection
// name the server knows ("agent_A", "cli-conn-3f…", "commander-conn-…"),
// with the client certificate's role and name first when the stream had
// one ("operator/alice/cli-conn-3f…"). A request a proxying follower
// forwarded carries the client's identity, not the follower's.
func requester(c *conn) string {
	if c.kind != wire.KindAgent && !c.who.IsInsecure() && c.who.Name != "" {
		if !c.keyed {
			return c.who.Name + "/" + c.name // the previous release's form
		}
		return c.who.Key() + "/" + c.name
	}
	return c.name
}

// planCallName names the Plan service as the channel of an update made
// through it (grapnel.Plan/Apply: --plan-revision, --expect-revision), as a
// connection name does for a stream's update.
const planCallName = "plan-call"

// planRequester names who made a Plan service call, for the history, as
// requester does for a stream: the caller's lock owner (the client
// certificate's role and name, or without TLS the owner the client
// declares, which nothing authenticates) before planCallName.
func planRequester(owner string) string {
	if owner == "" {
		return planCallName
	}
	if len(owner) > maxLockOwnerBytes {
		owner = owner[:maxLockOwnerBytes] + "…"
	}
	// An entry's strings must be UTF-8 or it does not encode.
	return strings.ToValidUTF8(owner, "�") + "/" + planCallName
}

// historyMeta is the leader-decided part of an entry's history: now by
// the leader's clock, the requester and its update mask, and the
// rejected requests collected since the last entry (rejections.go).
// withLimits adds the leader's limits: only the entries written for the
// history itself carry them (syncHistoryLimits at the start of a term,
// the flushed rejections); the FSM keeps the last it saw, so the update
// and report entries need not repeat them (ten bytes each, on flash).
func (l *leader) historyMeta(requester string, mask []string, withLimits bool) *fsm.HistoryMeta {
	m := &fsm.HistoryMeta{TimeMs: l.clock.Now().UnixMilli(), Requester: requester, UpdateMask: mask, Rejections: l.takeRejections()}
	if withLimits {
		m.Limits = l.s.historyLimits
	}
	return m
}

// syncHistoryLimits proposes this leader's history limits when they
// differ from the ones the FSM holds (an operator changed the flags), so
// that the history is pruned by them before the next update carries
// them. Nothing is written when they agree, as they do with the defaults.
func (l *leader) syncHistoryLimits() {
	var stored state.HistoryLimits
	l.s.fsm.Read(func(st *state.Store, _ uint64) {
		if st.History != nil {
			stored = st.History.Limits
		}
	})
	if stored.Effective() == l.s.historyLimits {
		return
	}
	l.propose(&fsm.HistoryNotesRequest{History: *l.historyMeta("", nil, true)}, nil, nil)
}
