package workload

import (
	"context"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/state"
)

// hostInstance is an instance a runtime reports on this host.
type hostInstance struct {
	rtName string
	rt     runtime.Runtime
	runtime.Found
}

// ServerHello reconciles the agent with the server's full list of its
// instances, on every (re)connect:
//   - an instance a loop already runs is left untouched and its current
//     state reported once more;
//   - an instance found on the host under the same instance name is
//     adopted by a loop that, as the Ankaios agent at its start, resumes
//     it if it runs (watched again, not recreated), starts it again if it
//     succeeded and replaces it otherwise: failed, lost, or from before a
//     power cycle (see loop.resume);
//   - an instance of the same workload under another instance name is
//     replaced: the old one deleted, then the new one created;
//   - an instance not in added is deleted (Removed is reported for the
//     ones the server knew, not for unknown leftovers);
//   - an instance neither running nor found is created.
//
// ctx bounds the runtimes' List calls; once it ends nothing is changed.
//
// swdd~agent-initial-list-existing-workloads~1
// swdd~agent-existing-workloads-finds-list~1
func (m *Manager) ServerHello(ctx context.Context, added []Added) {
	m.ops.Lock()
	defer m.ops.Unlock()
	found := m.listHost(ctx)
	if ctx.Err() != nil {
		// The connection that sent this hello is gone; acting on a
		// partial list could recreate what is running. The next hello
		// reconciles.
		return
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	want := make(map[state.InstanceName]Added, len(added))
	for _, a := range added {
		want[a.Instance] = a
	}

	// swdd~agent-existing-workloads-delete-unneeded~2
	for inst, l := range m.loops {
		if _, ok := want[inst]; !ok {
			l.requestDeleteLocked(nil)
		}
	}

	owned := make(map[state.InstanceName]bool, len(m.all))
	for l := range m.all {
		owned[l.inst] = true
	}
	adopt := map[state.InstanceName]hostInstance{}
	for _, f := range found {
		if owned[f.Instance] {
			continue
		}
		a, wanted := want[f.Instance]
		_, taken := adopt[f.Instance]
		if wanted && !taken && a.Workload != nil && a.Workload.Runtime == f.rtName {
			adopt[f.Instance] = f
			continue
		}
		// swdd~agent-existing-workloads-replace-updated~4
		m.log.Info("deleting workload left on the host", "instance", f.Instance.String(), "runtime", f.rtName)
		l := m.newLoop(f.Instance, a.Workload)
		l.rt, l.id, l.silent = f.rt, f.ID, true
		l.requestDeleteLocked(nil)
		m.startLocked(l)
	}

	seen := map[state.InstanceName]bool{}
	for _, a := range added {
		if seen[a.Instance] {
			continue
		}
		seen[a.Instance] = true
		if l := m.loops[a.Instance]; l != nil && !l.deleting() {
			// A fresh connection must hear the state even if it did
			// not change.
			if s, ok := m.current[a.Instance]; ok {
				m.rep.push(state.WorkloadState{Instance: a.Instance, State: s})
			}
			continue
		}
		if f, ok := adopt[a.Instance]; ok {
			// swdd~agent-existing-workloads-resume-existing~2
			m.log.Info("found workload on the host", "instance", a.Instance.String(), "id", string(f.ID))
			l := m.newLoop(a.Instance, a.Workload)
			l.rt, l.id, l.adopted = f.rt, f.ID, true
			// Only waited for when the instance is started again or
			// replaced; a running one is left running.
			l.preds = m.supersedeLocked(a.Instance.WorkloadName, l)
			m.startLocked(l)
			continue
		}
		// swdd~agent-existing-workloads-starts-new-if-not-found~1
		m.addLocked(a)
	}
	m.greeted = true
}

// listHost asks every runtime what it runs for this agent. A runtime that
// cannot say is skipped, as Ankaios does: its instances will be created
// again and Create replaces what is left of them.
func (m *Manager) listHost(ctx context.Context) []hostInstance {
	var out []hostInstance
	for _, name := range m.runtimeNames() {
		rt := m.cfg.Runtimes[name]
		list, err := rt.List(ctx, m.cfg.Agent)
		if err != nil {
			m.log.Warn("listing existing workloads failed", "runtime", name, "error", err)
			continue
		}
		for _, f := range list {
			out = append(out, hostInstance{rtName: name, rt: rt, Found: f})
		}
	}
	return out
}
