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
