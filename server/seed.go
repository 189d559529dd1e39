package server

import "github.com/grapnel-io/grapnel/server/plan"

// seedStartupState loads the startup manifest into a cluster whose desired
// state was never set. A cluster that has state keeps it: the manifest is
// the known-good start, not an override. The seed goes through the
// pipeline like any update, so agents that connect before it commits get
// their workloads once it does.
//
// swdd~server-loads-startup-state-file~3
// swdd~server-starts-without-startup-config~1
func (l *leader) seedStartupState() {
	st := l.s.cfg.StartupState
	if st == nil {
		return
	}
	if l.projected.store.Revision != 0 || l.projected.store.DesiredSeq != 0 {
		l.s.log.Info("cluster has a desired state; startup manifest not applied")
		return
	}
	next, err := l.sealNext(*st, "")
	if err != nil {
		l.s.log.Error("startup manifest rejected", "error", err)
		return
	}
	p, err := plan.Make(l.s.renderer, l.s.limits, l.s.operatorAdmission(), l.projected.store, next, nil, l.connected)
	if err != nil {
		l.s.log.Error("startup manifest rejected", "error", err)
		return
	}
	n := len(st.Workloads)
	p.History = l.historyMeta(requesterStartup, nil, false)
	l.proposeUpdate(p, func() { l.s.log.Info("startup manifest applied", "workloads", n) }, func(err error) {
		l.s.log.Error("startup manifest not applied", "error", err)
	})
}
