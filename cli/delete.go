package cli

import (
	"context"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

// DeleteMasks builds the masks that remove the named workloads (or config
// keys) when sent with an empty state. A name is checked first: a dot in it
// would turn the mask into a path inside another object and delete a field
// instead.
func DeleteMasks(prefix, kind string, names []string) ([]string, error) {
	masks := make([]string, 0, len(names))
	for _, n := range names {
		if err := state.CheckName(prefix+"."+n, kind, n); err != nil {
			return nil, err
		}
		masks = append(masks, prefix+"."+n)
	}
	return masks, nil
}

// DeleteWorkloads removes workloads from the desired state and waits until
// their instances are gone.
// swdd~cli-provides-delete-workload~1
func (s *Session) DeleteWorkloads(ctx context.Context, names []string) error {
	masks, err := DeleteMasks(maskWorkloads, "workload name", names)
	if err != nil {
		return err
	}
	s.planHint = planRevisionHint("delete workloads", names...)
	return s.updateAndWait(ctx, &ankbase.CompleteState{}, masks)
}

// DeleteConfigs removes config items from the desired state (or with
// DryRun prints the plan of it; with ExpectSeq or ExpectRevision it goes
// through the Plan service). Nothing runs for a config, so there is
// nothing to wait for.
// swdd~cli-provides-delete-configs~1
func (s *Session) DeleteConfigs(ctx context.Context, names []string) error {
	masks, err := DeleteMasks(maskConfigs, "config key", names)
	if err != nil {
		return err
	}
	if s.DryRun {
		s.planHint = planRevisionHint("delete configs", names...)
		return s.dryRun(ctx, &ankbase.CompleteState{}, masks)
	}
	_, err = s.sendUpdate(ctx, &ankbase.CompleteState{}, masks)
	return err
}
