package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/state"
)

const (
	maskWorkloads  = "desiredState.workloads"
	maskConfigsDot = maskConfigs + "."
)

// ErrNoAgent is returned by PlanApply for a workload that names no agent
// when --agent is not given either.
var ErrNoAgent = errors.New("no agent name specified")

// Manifest is one parsed input of `apply`.
type Manifest struct {
	// Source names the input in messages: a file name or "stdin".
	Source string
	// Tree is the manifest as written; it tells an absent agent field
	// from an empty one.
	Tree state.Tree
	// State is the decoded, validated manifest.
	State state.State
	// Warning is set for the deprecated v0.1 format.
	Warning string
}

// ParseManifest parses and checks one manifest: its apiVersion first (a
// wrong version is the likeliest mistake and explains any later error),
// then its structure and naming rules. Errors start with the source.
// swdd~cli-apply-supports-ankaios-manifest~1
// swdd~cli-apply-manifest-check-for-api-version-compatibility~1
// swdd~cli-apply-manifest-accepts-v01-api-version~1
func ParseManifest(source string, data []byte) (Manifest, error) {
	m := Manifest{Source: source}
	t, err := state.ParseTree(data)
	if err != nil {
		return m, fmt.Errorf("manifest '%s': %w", source, err)
	}
	m.Tree = t
	if len(t) == 0 {
		return m, nil
	}
	if v, ok := t["apiVersion"].(string); ok || t["apiVersion"] == nil {
		if m.Warning, err = state.CheckAPIVersion(v); err != nil {
			return m, fmt.Errorf("manifest '%s': %w", source, err)
		}
	}
	if m.State, err = state.DecodeState(t, ""); err != nil {
		return m, fmt.Errorf("manifest '%s': %w", source, err)
	}
	if err := m.State.Validate(); err != nil {
		return m, fmt.Errorf("manifest '%s': %w", source, err)
	}
	return m, nil
}

// ApplyPlan is the update `apply` sends.
type ApplyPlan struct {
	// NewState is the CompleteState tree to send: the merged manifests
	// under desiredState, or nothing at all in delete mode.
	NewState state.Tree
	// Masks select every workload and config the manifests name, sorted.
	Masks []string
}

// PlanApply merges manifests into one update. Every workload and config
// key of every manifest becomes a mask desiredState.workloads.<name> or
// desiredState.configs.<key>; a name defined twice is an error. agent, when
// not nil, sets the agent of every workload (--agent); otherwise each
// workload must name one, possibly empty. In delete mode the new state is
// empty, so the masks remove what the manifests name.
// swdd~cli-apply-accepts-list-of-ankaios-manifests~1
// swdd~cli-apply-generates-state-object-from-ankaios-manifests~1
// swdd~cli-apply-generates-filter-masks-from-ankaios-manifests~1
// swdd~cli-apply-ankaios-manifest-agent-name-overwrite~1
// swdd~cli-apply-ankaios-manifest-error-on-agent-name-absence~2
func PlanApply(ms []Manifest, agent *string, deleteMode bool) (ApplyPlan, error) {
	workloads := map[string]any{}
	configs := map[string]any{}
	wlFrom := map[string]string{}
	cfgFrom := map[string]string{}
	var masks []string
	for _, m := range ms {
		for _, name := range state.SortedKeys(m.State.Workloads) {
			if first, dup := wlFrom[name]; dup {
				return ApplyPlan{}, fmt.Errorf("workload '%s' is defined in both '%s' and '%s'", name, first, m.Source)
			}
			wlFrom[name] = m.Source
			masks = append(masks, maskWorkloads+"."+name)
			w := m.State.Workloads[name].Clone()
			switch {
			case agent != nil:
				w.Agent = *agent
			case !deleteMode && node(m.Tree, "workloads", name)["agent"] == nil:
				return ApplyPlan{}, fmt.Errorf("manifest '%s': workload '%s': %w: use --agent to specify one", m.Source, name, ErrNoAgent)
			}
			workloads[name] = w.ToTree()
		}
		for _, key := range state.SortedKeys(m.State.Configs) {
			if first, dup := cfgFrom[key]; dup {
				return ApplyPlan{}, fmt.Errorf("config '%s' is defined in both '%s' and '%s'", key, first, m.Source)
			}
			cfgFrom[key] = m.Source
			masks = append(masks, maskConfigsDot+key)
			configs[key] = state.CloneValue(m.State.Configs[key])
		}
	}
	sort.Strings(masks)
	plan := ApplyPlan{NewState: state.Tree{}, Masks: masks}
	if !deleteMode && len(masks) > 0 {
		plan.NewState["desiredState"] = map[string]any{
			"apiVersion": state.APIVersion,
			"workloads":  workloads,
			"configs":    configs,
		}
	}
	return plan, nil
}

// Apply applies (or with deleteMode removes) the workloads and configs of
// the manifest files ("-" reads stdin), then waits for the workloads.
// swdd~cli-apply-send-update-state~1
// swdd~cli-apply-accepts-ankaios-manifest-content-from-stdin~1
func (s *Session) Apply(ctx context.Context, files []string, agent *string, deleteMode bool) error {
	if len(files) == 0 {
		return errors.New("no manifest given: name one or more files, or '-' for stdin")
	}
	ms := make([]Manifest, 0, len(files))
	for _, f := range files {
		name, data, err := readInput(f, s.In)
		if err != nil {
			return err
		}
		m, err := ParseManifest(name, data)
		if err != nil {
			return err
		}
		if m.Warning != "" {
			s.warnf("manifest '%s': %s", name, m.Warning)
		}
		ms = append(ms, m)
	}
	plan, err := PlanApply(ms, agent, deleteMode)
	if err != nil {
		return err
	}
	if len(plan.Masks) == 0 {
		s.infof("Nothing to update.")
		return nil
	}
	cs, err := rpc.CompleteStateFromTree(plan.NewState)
	if err != nil {
		return fmt.Errorf("cannot build the update: %w", err)
	}
	var args []string
	if agent != nil {
		args = append(args, "--agent", shellQuote(*agent))
	}
	if deleteMode {
		args = append(args, "-d")
	}
	for _, f := range files {
		args = append(args, shellQuote(f))
	}
	s.planHint = planRevisionHint("apply", args...)
	return s.updateAndWait(ctx, cs, plan.Masks)
}
