package server

import (
	"fmt"

	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/server/secrets"
	"github.com/grapnel-io/grapnel/state"
)

// The leader's side of secret config items (docs/secrets.md): it seals
// them before planning, so that everything after (the plan, the Raft
// entry, the FSM, snapshots, history, the renderings and their instance
// ids) holds tokens only; it masks them in what it shows; and it opens
// the tokens in the runtime config it sends to the agent that runs the
// workload.

// requesterSecretKeys names the leader as the requester of the update
// that seals secret items again under the active key.
const requesterSecretKeys = "secret-keyring"

// sealNext seals the secret items of a planned desired state of owner
// against the speculative store's.
func (l *leader) sealNext(next state.State, owner string) (state.State, error) {
	return sealNext(l.s.cfg.Secrets, l.projected.store, next, owner)
}

// sealNext seals next against the store st with keys, in the scope of the
// update (secrets.SealConfigsIn): the revision it makes and the requester
// it comes from, so that a dry-run of owner's update on st seals what
// owner's update then does, and gets the same instance names.
func sealNext(keys *secrets.Keyring, st *state.Store, next state.State, owner string) (state.State, error) {
	scope := fmt.Sprintf("seq %d owner %q", st.DesiredSeq+1, owner)
	cfgs, err := secrets.SealConfigsIn(keys, next.Configs, st.Desired.Configs, scope)
	if err != nil {
		return state.State{}, err
	}
	next.Configs = cfgs
	return next, nil
}

// revealed is the workload an agent gets: its rendered runtime config and
// file contents with the tokens opened. It is w itself when nothing is
// sealed in it. A token that does not open stays (the agent sees
// ciphertext) and is logged, by instance, without the text.
func (s *Server) revealed(n state.InstanceName, w *state.Workload) *state.Workload {
	var out *state.Workload
	open := func(field, text string) string {
		plain, err := s.cfg.Secrets.Reveal(text)
		if err != nil {
			s.log.Error("a secret in a rendered workload does not open; the agent gets it sealed", "instance", n.String(), "field", field, "error", err)
		}
		return plain
	}
	if rc := open("runtimeConfig", w.RuntimeConfig); rc != w.RuntimeConfig {
		out = w.Clone()
		out.RuntimeConfig = rc
	}
	for i := range w.Files {
		if c := open("files", w.Files[i].Content); c != w.Files[i].Content {
			if out == nil {
				out = w.Clone()
			}
			out.Files[i].Content = c
		}
	}
	if out == nil {
		return w
	}
	return out
}

// resealSecrets seals again, once at the start of a term, the secret
// items not sealed under the active key: items stored before the servers
// had a key file, and items sealed under a key being rotated out. It
// proposes only when there are some, so an idle cluster writes nothing.
// The workloads that use them render to new tokens and are restarted
// with the same values.
func (l *leader) resealSecrets() {
	k := l.s.cfg.Secrets
	cur := l.projected.store.Desired
	if k == nil {
		for _, key := range state.SortedKeys(cur.Configs) {
			if secrets.IsSecret(key) {
				l.s.log.Warn("secret config items are stored, but this replica has no --secret-key-file: their workloads get them sealed", "item", key)
				return
			}
		}
		return
	}
	stale := secrets.Stale(k, cur.Configs)
	if len(stale) == 0 {
		return
	}
	cfgs, err := secrets.Reseal(k, cur.Configs, stale)
	if err != nil {
		l.s.log.Error("secret config items cannot be sealed again under the active key; keep the old key in --secret-key-file", "active", k.Active(), "error", err)
		return
	}
	next := cur
	next.Configs = cfgs
	adm := l.s.operatorAdmission()
	adm.SkipPolicy = true // the same settings, sealed anew
	p, err := plan.Make(l.s.renderer, l.s.limits, adm, l.projected.store, next, nil, l.connected)
	if err != nil {
		l.s.log.Error("sealing secret config items again was refused", "error", err)
		return
	}
	if !p.Changed {
		return
	}
	p.History = l.historyMeta(requesterSecretKeys, nil, false)
	l.proposeUpdate(p, func() {
		l.s.log.Info("secret config items sealed again under the active key", "items", stale, "active", k.Active())
	}, func(err error) {
		l.s.log.Error("sealing secret config items again failed", "error", err)
	})
}
