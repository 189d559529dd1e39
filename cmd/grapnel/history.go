package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/grapnel-io/grapnel/cli"
	"github.com/grapnel-io/grapnel/rpc/client"
)

// withHistory connects to the leader's History service and runs f.
func (a *app) withHistory(ctx context.Context, f func(context.Context, *cli.History) error) error {
	o, err := a.clientOptions()
	if err != nil {
		return err
	}
	hc, _, closeFn, err := client.DialHistory(ctx, o)
	if err != nil {
		return err
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, clusterOpTimeout)
	defer cancel()
	return f(ctx, &cli.History{Client: hc, Out: a.stdout, Quiet: a.global.Quiet})
}

// newHistory is `history [--since TXN] [--workload NAME]` and `history
// show TXN` (Grapnel only; docs/history.md). A txn numbers the history's
// transactions; it is not the desired state's revision, which plans and
// get state name.
func newHistory(a *app) *cobra.Command {
	var (
		output, workload     string
		sinceTime, untilTime string
		since                uint64
	)
	h := &cobra.Command{
		Use:   "history",
		Short: "List the transactions: accepted updates, server decisions and rejected requests (Grapnel only)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var from, until time.Time
			now := time.Now()
			var err error
			if sinceTime != "" {
				if from, err = cli.ParseTimeBound("since-time", sinceTime, now); err != nil {
					return err
				}
			}
			if untilTime != "" {
				if until, err = cli.ParseTimeBound("until-time", untilTime, now); err != nil {
					return err
				}
			}
			return a.withHistory(cmd.Context(), func(ctx context.Context, h *cli.History) error {
				h.SinceTime, h.UntilTime = from, until
				return h.List(ctx, since, workload, output)
			})
		},
	}
	h.Flags().Uint64Var(&since, "since", 0, "only transactions after this transaction number (TXN)")
	h.Flags().StringVar(&workload, "workload", "", "only transactions that changed this workload")
	h.Flags().StringVar(&sinceTime, "since-time", "", "only transactions at or after this time: RFC 3339 (2026-11-28T07:09:21Z) or a duration before now (10m)")
	h.Flags().StringVar(&untilTime, "until-time", "", "only transactions at or before this time: RFC 3339 or a duration before now")
	h.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json or yaml")
	show := &cobra.Command{
		Use:   "show TXN",
		Short: "Print one transaction in full, with the changed fields before and after",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withHistory(cmd.Context(), func(ctx context.Context, h *cli.History) error {
				return h.Show(ctx, args[0], output)
			})
		},
	}
	show.Flags().StringVarP(&output, "output", "o", "table", "output format: table (a diff), json or yaml")
	h.AddCommand(show)
	return h
}

// newTimeline is `get timeline NAME`.
func newTimeline(a *app) *cobra.Command {
	var output string
	tl := &cobra.Command{
		Use:               "timeline NAME",
		Short:             "Show a workload's desired-state changes and execution-state transitions, across failovers (Grapnel only)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeNames(desiredWorkloads),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withHistory(cmd.Context(), func(ctx context.Context, h *cli.History) error {
				return h.Timeline(ctx, args[0], output)
			})
		},
	}
	tl.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json or yaml")
	return tl
}
