package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/state"
)

// RunSpec is the workload `run workload` creates.
type RunSpec struct {
	Name          string
	Runtime       string
	RuntimeConfig string
	Agent         string
	Tags          map[string]string
}

// ParseTags reads repeated --tags key=value arguments. The value may hold
// further '=' signs; the key may not be empty.
func ParseTags(args []string) (map[string]string, error) {
	tags := make(map[string]string, len(args))
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("tag '%s' is not of the form key=value", a)
		}
		tags[k] = v
	}
	return tags, nil
}

// Plan returns the state tree and mask that add or replace the workload.
func (r RunSpec) Plan() (state.Tree, []string, error) {
	if err := state.CheckName(maskWorkloads+"."+r.Name, "workload name", r.Name); err != nil {
		return nil, nil, err
	}
	w := &state.Workload{
		Agent:         r.Agent,
		Runtime:       r.Runtime,
		RuntimeConfig: r.RuntimeConfig,
		Tags:          r.Tags,
		RestartPolicy: state.RestartNever,
	}
	t := state.Tree{"desiredState": map[string]any{
		"apiVersion": state.APIVersion,
		"workloads":  map[string]any{r.Name: w.ToTree()},
	}}
	return t, []string{maskWorkloads + "." + r.Name}, nil
}

// RunWorkload adds (or replaces) one workload and waits for it.
// swdd~cli-provides-run-workload~1
func (s *Session) RunWorkload(ctx context.Context, r RunSpec) error {
	t, masks, err := r.Plan()
	if err != nil {
		return err
	}
	cs, err := rpc.CompleteStateFromTree(t)
	if err != nil {
		return fmt.Errorf("cannot build the update: %w", err)
	}
	return s.updateAndWait(ctx, cs, masks)
}
