package main

import (
	"github.com/spf13/cobra"

	"github.com/grapnel-io/grapnel/cli"
	"github.com/grapnel-io/grapnel/rpc/client"
)

// newGetGraph is `get graph`: the dependency graph as DOT, SVG or JSON.
func newGetGraph(a *app) *cobra.Command {
	var format string
	var o cli.GraphOptions
	cmd := &cobra.Command{
		Use:   "graph [WORKLOAD...]",
		Short: "Print the dependency graph of the workloads as DOT, SVG or JSON",
		Long: "Print the dependency graph of the workloads: one node per workload, coloured by its execution\n" +
			"state and grouped by agent; dependencies labelled with their add condition; dashed edges for\n" +
			"the delete graph (deleting a workload waits for its dependents); cycles and dependencies on\n" +
			"workloads that do not exist marked. Workloads given narrow the graph to them and everything\n" +
			"they depend on or that depends on them. grapnel draws the SVG itself; --graphviz has\n" +
			"Graphviz's dot draw it instead.",
		Example:           "  grapnel get graph | dot -Tpng > graph.png\n  grapnel get graph -o svg > graph.svg\n  grapnel get graph -o json web",
		ValidArgsFunction: a.completeNames(desiredWorkloads),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := cli.ParseGraphFormat(format)
			if err != nil {
				return err
			}
			o.Format, o.Workloads = f, args
			if o.Txn > 0 {
				co, err := a.clientOptions()
				if err != nil {
					return err
				}
				hc, _, closeFn, err := client.DialHistory(cmd.Context(), co)
				if err != nil {
					return err
				}
				defer closeFn()
				o.History = hc
			}
			return a.with(cmd.Context(), func(s *cli.Session) error { return s.GetGraph(cmd.Context(), o) })
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", string(cli.GraphDOT), "output format: dot, svg or json")
	cmd.Flags().Uint64Var(&o.Txn, "txn", 0, "draw the desired state right after this history transaction (TXN), the workloads it changed marked (bold in DOT, \"changed\" in JSON)")
	cmd.Flags().BoolVar(&o.Graphviz, "graphviz", false, "draw the SVG with Graphviz's dot program (must be on PATH)")
	return cmd
}
