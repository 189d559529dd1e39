package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/grapnel-io/grapnel/cli"
	"github.com/grapnel-io/grapnel/rpc/client"
)

// newGetProblems is `get problems [-o table|yaml|json]` (Grapnel only;
// docs/problems.md): the leader's list of the constraints the cluster
// cannot satisfy now.
func newGetProblems(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "problems",
		Aliases: []string{"problem"},
		Short:   "List what the cluster cannot satisfy now: missing dependencies, agents gone, workloads failing repeatedly, ... (Grapnel only)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := a.clientOptions()
			if err != nil {
				return err
			}
			r, err := client.NewResolver(o)
			if err != nil {
				return err
			}
			defer r.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), clusterOpTimeout)
			defer cancel()
			p := &cli.Problems{Client: r.Problems(), Out: a.stdout}
			return p.List(ctx, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json or yaml")
	return cmd
}
