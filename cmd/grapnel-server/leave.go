package main

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"strings"
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

// readGossipKey reads a base64 AES key for gossip encryption; no file, no
// encryption.
func readGossipKey(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--gossip-key-file: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("--gossip-key-file %s: not base64: %w", path, err)
	}
	switch len(key) {
	case 16, 24, 32:
		return key, nil
	}
	return nil, fmt.Errorf("--gossip-key-file %s: the key has %d bytes; AES needs 16, 24 or 32", path, len(key))
}
