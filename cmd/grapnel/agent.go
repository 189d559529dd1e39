package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/grapnel-io/grapnel/cli"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/state"
)

// newAgent is `grapnel agent`: operator verbs aimed at one agent.
func newAgent(a *app) *cobra.Command {
	ag := &cobra.Command{Use: "agent", Short: "Operate on an agent (Grapnel only); without one of these verbs, grapnel agent [flags] runs the agent"}
	ag.AddCommand(&cobra.Command{
		Use:               "resync NAME",
		Short:             "Make the agent compare what its runtimes run with what it was told to run, and repair the drift now; prints the repairs the history records within --response-timeout",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeName(connectedAgents),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withCluster(cmd.Context(), func(ctx context.Context, c *cli.Cluster) error {
				if a.global.NoWait {
					return c.ResyncAgent(ctx, args[0], nil, 0)
				}
				o, err := a.clientOptions()
				if err != nil {
					return err
				}
				hc, _, closeFn, err := client.DialHistory(ctx, o)
				if err != nil {
					return err
				}
				defer closeFn()
				return c.ResyncAgent(ctx, args[0], hc, a.global.ResponseTimeout)
			})
		},
	})
	for _, v := range []struct {
		use, short string
		mode       state.AgentMode
	}{
		{"maintenance NAME", "Put the agent in maintenance: nothing is moved onto or off it, and its disconnection raises no problem", state.ModeMaintenance},
		{"disable NAME", "Disable the agent: its placed workloads move to other agents (drain); refused if one would keep fewer instances, unless --force", state.ModeDisabled},
		{"activate NAME", "Make the agent Active again: it may host placed workloads", state.ModeActive},
	} {
		var force bool
		c := &cobra.Command{
			Use:               v.use,
			Short:             v.short,
			Args:              cobra.ExactArgs(1),
			ValidArgsFunction: a.completeName(connectedAgents),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.withCluster(cmd.Context(), func(ctx context.Context, c *cli.Cluster) error {
					return c.SetAgentMode(ctx, args[0], v.mode, force)
				})
			},
		}
		if v.mode == state.ModeDisabled {
			c.Flags().BoolVar(&force, "force", false, "disable it even if a placed workload would keep fewer instances, no other agent having room for them")
		}
		ag.AddCommand(c)
	}
	return ag
}
