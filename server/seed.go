package server

import (
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/state"
)

// seedStartupState loads the startup manifest into a cluster whose desired
// state was never set. A cluster that has state keeps it: the manifest is
// the known-good start, not an override.
//
// swdd~server-loads-startup-state-file~3
// swdd~server-starts-without-startup-config~1
func (l *leader) seedStartupState() {
	st := l.s.cfg.StartupState
	if st == nil {
		return
	}
	var (
		p     *updatePlan
		err   error
		fresh bool
	)
	l.s.fsm.Read(func(s *state.Store, _ uint64) {
		if s.Revision != 0 {
			return
		}
		fresh = true
		p, err = plan(l.s.renderer, s, *st, nil, func(a string) bool { _, ok := s.Agents[a]; return ok })
	})
	if !fresh {
		l.s.log.Info("cluster has a desired state; startup manifest not applied")
		return
	}
	if err != nil {
		l.s.log.Error("startup manifest rejected", "error", err)
		return
	}
	if err := l.propose(fsm.UpdateDesiredStateType, fsm.UpdateDesiredStateRequest{Update: p.update}); err != nil {
		l.s.log.Error("startup manifest not applied", "error", err)
		return
	}
	l.s.log.Info("startup manifest applied", "workloads", len(st.Workloads))
}
