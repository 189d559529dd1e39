package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/hashicorp/raft"
)

// PeersFile is the file an operator writes into the data directory to
// recover a cluster that lost its quorum for good: a JSON list in
// hashicorp/raft's v3 format, [{"id": ..., "address": ..., "non_voter":
// false}], naming the replicas that survive.
const PeersFile = "peers.json"

// recoverFromPeersFile applies PeersFile once, before Raft starts: it
// rewrites the local Raft configuration to the listed replicas (Raft's
// RecoverCluster) and renames the file so a later start does not apply it
// again. It reports whether it recovered.
func recoverFromPeersFile(cfg Config, rc *raft.Config, logs raft.LogStore, stable raft.StableStore,
	snaps raft.SnapshotStore, trans raft.Transport) (bool, error) {
	path := filepath.Join(cfg.DataDir, PeersFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	conf, err := raft.ReadConfigJSON(path)
	if err != nil {
		return false, fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
	}
	self := false
	for _, s := range conf.Servers {
		if string(s.ID) == cfg.ID {
			self = true
		}
	}
	if !self {
		return false, fmt.Errorf("%w: %s does not list this replica (%q)", ErrConfig, path, cfg.ID)
	}
	if err := raft.RecoverCluster(rc, cfg.FSM, logs, stable, snaps, trans, conf); err != nil {
		return false, fmt.Errorf("cluster: recover from %s: %w", path, err)
	}
	if err := markApplied(durable.OS, path); err != nil {
		return true, fmt.Errorf("cluster: recovered, but could not rename %s: %w", path, err)
	}
	return true, nil
}

// markApplied renames the peers file to .applied before Raft starts, and
// syncs the rename: a power cut after the cluster moved on must not leave
// it there to be applied again at the next start.
func markApplied(files durable.Files, path string) error {
	return files.Rename(path, path+".applied")
}
