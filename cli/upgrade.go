package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

var upgradeColumns = []string{"ID", "ROLE", "RELEASE", "SUPPORTS", "GOSSIP"}

// UpgradeStatus prints the cluster version, each member's release and the
// cluster version it supports, who is behind, and whether a replica can
// still go back to the previous release (docs/upgrade.md).
func (c *Cluster) UpgradeStatus(ctx context.Context, output string) error {
	st, err := c.Client.UpgradeStatus(ctx, &grapnelpb.UpgradeStatusRequest{})
	if err != nil {
		return err
	}
	switch output {
	case "table", "":
		t := Table{Headers: upgradeColumns}
		for _, m := range st.GetMembers() {
			role := m.GetRole()
			if m.GetLeader() {
				role = "leader"
			}
			t.Rows = append(t.Rows, []string{m.GetId(), role, orDash(m.GetVersion()), strconv.FormatUint(uint64(m.GetClusterVersion()), 10), m.GetGossipStatus()})
		}
		var b strings.Builder
		b.WriteString(t.Render(0, FitNone, -1) + "\n")
		fmt.Fprintf(&b, "cluster version: %d (this replica's release supports %d; every voter supports %d)\n",
			st.GetClusterVersion(), st.GetSupported(), st.GetTarget())
		if len(st.GetBehind()) > 0 {
			fmt.Fprintf(&b, "behind: %s\n", strings.Join(st.GetBehind(), ", "))
		}
		switch {
		case st.GetRollbackPossible() && st.GetTarget() > st.GetClusterVersion() && st.GetFinalizeAfterMs() > 0:
			fmt.Fprintf(&b, "rollback: possible; the upgrade to cluster version %d finalizes by itself once every voter has supported it for %v, or on `grapnel cluster upgrade finalize`\n",
				st.GetTarget(), time.Duration(st.GetFinalizeAfterMs())*time.Millisecond)
		case st.GetRollbackPossible() && st.GetTarget() > st.GetClusterVersion():
			fmt.Fprintf(&b, "rollback: possible; finalize the upgrade to cluster version %d with `grapnel cluster upgrade finalize`\n", st.GetTarget())
		case st.GetRollbackPossible():
			b.WriteString("rollback: possible; upgrade every voter before the upgrade can be finalized\n")
		default:
			fmt.Fprintf(&b, "rollback: not possible; releases that support less than cluster version %d refuse this cluster's data\n", st.GetClusterVersion())
		}
		for _, f := range st.GetFeatures() {
			if f.GetVersion() > st.GetClusterVersion() {
				fmt.Fprintf(&b, "waits for cluster version %d: %s (%s)\n", f.GetVersion(), f.GetName(), f.GetWaiting())
			}
		}
		if c.Quiet {
			_, err := io.WriteString(c.Out, t.Render(0, FitNone, -1)+"\n")
			return err
		}
		_, err := io.WriteString(c.Out, b.String())
		return err
	case "json", "yaml":
		return WriteTree(c.Out, output, upgradeTree(st), nil)
	}
	return fmt.Errorf("%w: -o %q: use table, json or yaml", ErrBadArgument, output)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func upgradeTree(st *grapnelpb.UpgradeStatusResponse) state.Tree {
	members := []any{}
	for _, m := range st.GetMembers() {
		members = append(members, map[string]any{
			"id": m.GetId(), "role": m.GetRole(), "leader": m.GetLeader(), "voter": m.GetVoter(),
			"release": m.GetVersion(), "clusterVersion": m.GetClusterVersion(), "gossipStatus": m.GetGossipStatus(),
		})
	}
	behind := []any{}
	for _, b := range st.GetBehind() {
		behind = append(behind, b)
	}
	features := []any{}
	for _, f := range st.GetFeatures() {
		features = append(features, map[string]any{"version": f.GetVersion(), "name": f.GetName(), "waiting": f.GetWaiting()})
	}
	return state.Tree{
		"replicaId": st.GetReplicaId(), "clusterVersion": st.GetClusterVersion(), "supported": st.GetSupported(),
		"target": st.GetTarget(), "behind": behind, "rollbackPossible": st.GetRollbackPossible(),
		"finalizeAfterMs": st.GetFinalizeAfterMs(), "members": members, "features": features,
	}
}

// UpgradeFinalize raises the cluster version to the newest every voter
// supports; after it no replica can go back to a release that supports
// less.
func (c *Cluster) UpgradeFinalize(ctx context.Context) error {
	r, err := c.Client.UpgradeFinalize(ctx, &grapnelpb.UpgradeFinalizeRequest{})
	if err != nil {
		return err
	}
	if c.Quiet {
		return nil
	}
	if r.GetFrom() == r.GetTo() {
		_, err = fmt.Fprintf(c.Out, "the cluster is at cluster version %d already: nothing to finalize\n", r.GetTo())
		return err
	}
	_, err = fmt.Fprintf(c.Out, "finalized: cluster version %d -> %d; replicas can no longer go back to a release that supports less than %d\n", r.GetFrom(), r.GetTo(), r.GetTo())
	return err
}
