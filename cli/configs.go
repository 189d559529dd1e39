package cli

import (
	"context"
	"fmt"

	"github.com/grapnel-io/grapnel/state"
)

const maskConfigs = "desiredState.configs"

// ConfigTable lists the config keys of the desired state, sorted.
// swdd~cli-shall-present-configs-as-table~1
func ConfigTable(cs state.Tree) Table {
	t := Table{Headers: []string{"CONFIG"}}
	for _, k := range state.SortedKeys(node(cs, "desiredState", "configs")) {
		t.Rows = append(t.Rows, []string{k})
	}
	return t
}

// GetConfigs prints the configs table.
// swdd~cli-provides-list-of-configs~1
func (s *Session) GetConfigs(ctx context.Context) error {
	cs, err := s.CompleteState(ctx, []string{maskConfigs})
	if err != nil {
		return err
	}
	fmt.Fprintln(s.Out, ConfigTable(cs).Render(s.Width, FitNone, 0))
	return nil
}
