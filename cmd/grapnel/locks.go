package main

import (
	"github.com/spf13/cobra"

	"github.com/grapnel-io/grapnel/cli"
)

// newLock is `grapnel lock NAME... --ttl D [--reason TEXT]`.
func newLock(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lock NAME... --ttl DURATION",
		Short: "Lock workloads (NAME or workload/NAME) and config items (config/KEY) against others' updates for a time (Grapnel only)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.with(cmd.Context(), func(s *cli.Session) error { return s.Lock(cmd.Context(), args, a.lockTTL, a.lockReason) })
		},
	}
	cmd.Flags().DurationVar(&a.lockTTL, "ttl", 0, "how long the lock holds, by the leader's clock, e.g. 10m (at most 168h)")
	cmd.Flags().StringVar(&a.lockReason, "reason", "", "why, shown to whoever is refused")
	_ = cmd.MarkFlagRequired("ttl")
	return cmd
}

// newUnlock is `grapnel unlock NAME... [--force]`.
func newUnlock(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "unlock NAME...",
		Short: "Release your locks on workloads and config items (Grapnel only)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.with(cmd.Context(), func(s *cli.Session) error { return s.Unlock(cmd.Context(), args, a.unlockForce) })
		},
	}
	cmd.Flags().BoolVar(&a.unlockForce, "force", false, "release locks another owner holds too")
	return cmd
}

// newGetLocks is `grapnel get locks [-o table|yaml|json]`.
func newGetLocks(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "locks",
		Short: "Show the locks in force (Grapnel only)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := cli.ParsePlanOutput(a.planOutput)
			if err != nil {
				return err
			}
			return a.with(cmd.Context(), func(s *cli.Session) error { return s.GetLocks(cmd.Context(), f) })
		},
	}
	cmd.Flags().StringVarP(&a.planOutput, "output", "o", cli.PlanTable, "output format: table, yaml or json")
	return cmd
}
