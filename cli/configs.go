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

// configsTree is the config keys as -o json and yaml print them: a list
// under "configs", each with its name (the values are what get state
// desiredState.configs prints).
func configsTree(cs state.Tree) state.Tree {
	list := []any{}
	for _, k := range state.SortedKeys(node(cs, "desiredState", "configs")) {
		list = append(list, map[string]any{"name": k})
	}
	return state.Tree{"configs": list}
}

// GetConfigs prints the configs table, or with output json or yaml the
// list configsTree makes (Grapnel only).
// swdd~cli-provides-list-of-configs~1
func (s *Session) GetConfigs(ctx context.Context, output string) error {
	if err := CheckListOutput(output); err != nil {
		return err
	}
	cs, err := s.CompleteState(ctx, []string{maskConfigs})
	if err != nil {
		return err
	}
	if output == "json" || output == "yaml" {
		return WriteTree(s.Out, output, configsTree(cs), nil)
	}
	fmt.Fprintln(s.Out, ConfigTable(cs).Render(s.Width, FitNone, 0))
	return nil
}
