package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/grapnel-io/grapnel/cli"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// clusterOpTimeout bounds the operator verbs that change the cluster;
// a leadership transfer or a snapshot restore takes longer than a read.
const clusterOpTimeout = 60 * time.Second

// withCluster connects to the cluster's leader and runs f.
func (a *app) withCluster(ctx context.Context, f func(context.Context, *cli.Cluster) error) error {
	o, err := a.clientOptions()
	if err != nil {
		return err
	}
	cc, _, closeFn, err := client.DialCluster(ctx, o)
	if err != nil {
		return err
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, clusterOpTimeout)
	defer cancel()
	return f(ctx, &cli.Cluster{Client: cc, Out: a.stdout, Err: a.stderr, Quiet: a.global.Quiet})
}

func newCluster(a *app) *cobra.Command {
	cl := &cobra.Command{Use: "cluster", Short: "Inspect and operate the replica set (Grapnel only)"}
	var output, to string
	members := &cobra.Command{
		Use:   "members",
		Short: "List the replicas: id, role, voter, health, last contact, addresses, and the leader",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withCluster(cmd.Context(), func(ctx context.Context, c *cli.Cluster) error { return c.Members(ctx, output) })
		},
	}
	members.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json or yaml")
	remove := &cobra.Command{
		Use:   "remove ID",
		Short: "Take a replica out of the Raft configuration (for a replica that is gone for good)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withCluster(cmd.Context(), func(ctx context.Context, c *cli.Cluster) error { return c.Remove(ctx, args[0]) })
		},
	}
	add := &cobra.Command{
		Use:   "add ID RAFT_ADDRESS",
		Short: "Approve a replica: add it to the Raft configuration as non-voter (promoted once healthy); it must hold the replica certificate of ID",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withCluster(cmd.Context(), func(ctx context.Context, c *cli.Cluster) error { return c.Add(ctx, args[0], args[1]) })
		},
	}
	transfer := &cobra.Command{
		Use:   "transfer-leadership",
		Short: "Hand leadership to another voter (--to ID, or the most up-to-date one)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withCluster(cmd.Context(), func(ctx context.Context, c *cli.Cluster) error { return c.TransferLeadership(ctx, to) })
		},
	}
	transfer.Flags().StringVar(&to, "to", "", "replica id to transfer leadership to")
	snapshot := &cobra.Command{Use: "snapshot", Short: "Save or restore the replicated state"}
	snapshot.AddCommand(&cobra.Command{
		Use:   "save FILE",
		Short: "Write a snapshot of the replicated state to FILE",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withCluster(cmd.Context(), func(ctx context.Context, c *cli.Cluster) error { return c.SnapshotSave(ctx, args[0]) })
		},
	}, &cobra.Command{
		Use:   "restore FILE",
		Short: "Replace the replicated state on every replica with the snapshot in FILE",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withCluster(cmd.Context(), func(ctx context.Context, c *cli.Cluster) error { return c.SnapshotRestore(ctx, args[0]) })
		},
	})
	upgrade := &cobra.Command{Use: "upgrade", Short: "See and finalize a rolling upgrade: the cluster version and each replica's release (docs/upgrade.md)"}
	var upgradeOutput string
	status := &cobra.Command{
		Use:   "status",
		Short: "Show each replica's release, the cluster version, who is behind, and whether a rollback is still possible",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withCluster(cmd.Context(), func(ctx context.Context, c *cli.Cluster) error { return c.UpgradeStatus(ctx, upgradeOutput) })
		},
	}
	status.Flags().StringVarP(&upgradeOutput, "output", "o", "table", "output format: table, json or yaml")
	upgrade.AddCommand(status, &cobra.Command{
		Use:   "finalize",
		Short: "Raise the cluster version to the newest every voter supports; after it no replica can go back to the previous release",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withCluster(cmd.Context(), func(ctx context.Context, c *cli.Cluster) error { return c.UpgradeFinalize(ctx) })
		},
	})
	repair := &cobra.Command{
		Use:   "repair REPLICA",
		Short: "Release the vote hold of a replica that lost Raft entries, when no leader can be elected without it (entries only the lost logs held are gone)",
		Long: "A replica that cut a corrupt entry out of its Raft log, or started on new flash under its old name, holds its vote until it\n" +
			"has caught up from a leader (docs/operations.md, \"Corrupted or lost data\"). When a majority lost the same entries no leader\n" +
			"can be elected; this releases REPLICA's hold, so that it votes again, accepting that entries only the lost logs held are gone.\n" +
			"It is sent to REPLICA itself, found through any replica given with -s.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return a.repairReplica(cmd.Context(), args[0]) },
	}
	cl.AddCommand(members, add, remove, transfer, snapshot, upgrade, repair)
	return cl
}

// repairReplica finds id's address through any replica that answers
// (there may be no leader) and asks id itself to release its vote hold.
func (a *app) repairReplica(ctx context.Context, id string) error {
	o, err := a.clientOptions()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, clusterOpTimeout)
	defer cancel()
	cc, _, closeFn, err := client.DialReplica(ctx, o)
	if err != nil {
		return err
	}
	st, err := cc.Status(ctx, &grapnelpb.StatusRequest{})
	closeFn()
	if err != nil {
		return err
	}
	addr := ""
	for _, m := range st.GetMembers() {
		if m.GetId() == id {
			addr = m.GetGrpcAddress()
		}
	}
	if addr == "" {
		return fmt.Errorf("replica %q: %w (replica %s knows no member by that id, or not its address)", id, errs.ErrUnknownReplica, st.GetReplicaId())
	}
	o.Addrs = []string{addr}
	cc, _, closeFn, err = client.DialReplica(ctx, o)
	if err != nil {
		return fmt.Errorf("replica %s at %s: %w", id, addr, err)
	}
	defer closeFn()
	r, err := cc.RepairReplica(ctx, &grapnelpb.RepairReplicaRequest{Id: id})
	if err != nil {
		return err
	}
	if !a.global.Quiet {
		fmt.Fprintf(a.stdout, "released the vote hold of %s (%s): it votes again; entries only the lost logs held may be gone\n", id, r.GetReleased())
	}
	return nil
}
