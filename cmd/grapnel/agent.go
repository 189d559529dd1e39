package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/grapnel-io/grapnel/cli"
)

// newAgent is `grapnel agent`: operator verbs aimed at one agent.
func newAgent(a *app) *cobra.Command {
	ag := &cobra.Command{Use: "agent", Short: "Operate on an agent (Grapnel only)"}
	ag.AddCommand(&cobra.Command{
		Use:   "resync NAME",
		Short: "Make the agent compare what its runtimes run with what it was told to run, and repair the drift now",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withCluster(cmd.Context(), func(ctx context.Context, c *cli.Cluster) error { return c.ResyncAgent(ctx, args[0]) })
		},
	})
	return ag
}
