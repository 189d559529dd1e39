package servercmd

import (
	"log/slog"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
)

// leaveTimeout bounds a graceful leave at shutdown.
const leaveTimeout = 10 * time.Second

// stepDown runs before a replica stops. With --leave-on-terminate it
// leaves the cluster for good (the leader removes it from the Raft
// configuration); otherwise, as Consul servers do by default, it stays a
// member so that a restart causes no remove/add churn, but a leader still
// hands leadership over first so the cluster does not wait for an
// election timeout.
func stepDown(node *cluster.Node, leave bool, log *slog.Logger) {
	if leave {
		if err := node.Leave(leaveTimeout); err != nil {
			log.Warn("graceful leave incomplete", "error", err)
		}
		return
	}
	if node.IsLeader() {
		if err := node.TransferLeadership(""); err != nil {
			log.Warn("leadership transfer before shutdown failed", "error", err)
		}
	}
}

// snapshotBeforeStop has a replica that stops for good take a snapshot
// when many entries came since its newest one, so that its next start (the
// next ignition) restores that instead of applying them all again
// (cluster.StopSnapshotMin). It runs after the leadership went elsewhere
// and the services stopped, so it delays only this replica's exit.
func snapshotBeforeStop(node *cluster.Node, log *slog.Logger) {
	start := time.Now()
	idx, err := node.SnapshotBeforeStop()
	switch {
	case err != nil:
		log.Warn("snapshot before stopping failed: the next start applies the entries since the last one again", "error", err)
	case idx != 0:
		log.Info("snapshot taken before stopping", "index", idx, "took", time.Since(start).Round(time.Microsecond))
	}
}
