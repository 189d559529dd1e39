package state

import (
	"errors"
	"fmt"
)

// ErrLimit marks a rejection because the input is larger than a limit.
// It wraps like every FieldError, so errors.Is(err, ErrInvalid) holds too.
var ErrLimit = errors.New("over a limit")

// ErrBudget marks a rejection because the work a request causes ran past
// its budget (Limits.MaxRenderStepsPerRequest); errors.Is(err, ErrLimit)
// and ErrInvalid hold too.
var ErrBudget = errors.New("over a request's budget")

// Limits bound what the desired state may hold, so that everything the
// leader accepts fits the messages, the Raft log and the memory of every
// replica: an update larger than a limit is refused before it is
// proposed, naming the field, the limit and the value. A zero field is
// no limit. The defaults keep every message under the 4 MiB gRPC limit.
type Limits struct {
	// MaxConfigDepth is how deeply lists and maps may nest in one config
	// item (a string alone is depth 1).
	MaxConfigDepth int
	// MaxStringBytes bounds every string of a workload or a config item:
	// runtimeConfig, file contents, tags, config values.
	MaxStringBytes int
	// MaxConfigItemBytes bounds one config item, encoded.
	MaxConfigItemBytes int
	// MaxWorkloads and MaxConfigItems bound how many the desired state
	// holds.
	MaxWorkloads   int
	MaxConfigItems int
	// MaxWorkloadBytes bounds one workload, as written and as rendered.
	MaxWorkloadBytes int
	// MaxUpdateBytes bounds what one update renders and the Raft entry
	// that carries it.
	MaxUpdateBytes int
	// MaxDesiredStateBytes bounds the whole desired state: every workload
	// as written and every config item. A complete state answer carries
	// it, so it stays below the message limit.
	MaxDesiredStateBytes int
	// MaxAgentBytes bounds the rendered workloads of one agent: its
	// ServerHello carries them all.
	MaxAgentBytes int
	// MaxRenderStepsPerRequest bounds the work of rendering all the
	// templates of one request, in render steps (state/render.Budget:
	// parsing each template, every element visited, every #each
	// iteration, so that nested loops multiply, and every name looked
	// up). It bounds how long one update holds the leader loop.
	MaxRenderStepsPerRequest int
}

// DefaultLimits are the limits a server uses unless configured.
func DefaultLimits() Limits {
	return Limits{
		MaxConfigDepth:       32,
		MaxStringBytes:       1 << 20,
		MaxConfigItemBytes:   1 << 20,
		MaxWorkloads:         1000,
		MaxConfigItems:       1000,
		MaxWorkloadBytes:     1 << 20,
		MaxUpdateBytes:       3 << 20,
		MaxDesiredStateBytes: 3 << 20,
		MaxAgentBytes:        3 << 20,
		// About a second of rendering at worst on a 2-core vehicle
		// computer; a manifest of 1,000 workloads, each with a templated
		// runtimeConfig of its own and a templated file, takes 600,000
		// (docs/operations.md).
		MaxRenderStepsPerRequest: DefaultMaxRenderStepsPerRequest,
	}
}

// DefaultMaxRenderStepsPerRequest is the default render budget of one
// request.
const DefaultMaxRenderStepsPerRequest = 1 << 20

// LimitError is the rejection of a value over a limit: "PATH: WHAT is
// VALUE, more than the limit of MAX (NAME)". name is the limit's setting.
func LimitError(path, what, name string, value, max int) error {
	return &FieldError{Path: path, limit: true,
		Reason: fmt.Sprintf("%s is %d, more than the limit of %d (%s)", what, value, max, name)}
}

// BudgetError is the rejection of a request whose work ran past a
// budget, counted as the work went and stopped there: "PATH: WHAT took
// more than the budget of MAX UNIT for one request (NAME); it ran out
// here". path is where it ran out, name the budget's setting.
func BudgetError(path, what, unit, name string, max int) error {
	return &FieldError{Path: path, limit: true, budget: true,
		Reason: fmt.Sprintf("%s took more than the budget of %d %s for one request (%s); it ran out here", what, max, unit, name)}
}

// over reports whether value exceeds a limit; zero is no limit.
func over(value, max int) bool { return max > 0 && value > max }

// CheckLimits checks the workloads and config items of s against the
// per-item limits. The leader runs it on what an update changes; counts
// and totals, which depend on the whole state, are checked by the caller
// (CheckCounts and the Store's usage).
func (s State) CheckLimits(l Limits) error {
	for _, name := range SortedKeys(s.Workloads) {
		if err := s.Workloads[name].CheckLimits("desiredState.workloads."+name, l); err != nil {
			return err
		}
	}
	for _, key := range SortedKeys(s.Configs) {
		if err := CheckConfigLimits("desiredState.configs."+key, s.Configs[key], l); err != nil {
			return err
		}
	}
	return nil
}

// CheckCounts checks how many workloads and config items s holds.
func (s State) CheckCounts(l Limits) error {
	if over(len(s.Workloads), l.MaxWorkloads) {
		return LimitError("desiredState.workloads", "the number of workloads", "max_workloads", len(s.Workloads), l.MaxWorkloads)
	}
	if over(len(s.Configs), l.MaxConfigItems) {
		return LimitError("desiredState.configs", "the number of config items", "max_config_items", len(s.Configs), l.MaxConfigItems)
	}
	return nil
}

// CheckLimits checks one workload (as written or as rendered) at path.
func (w *Workload) CheckLimits(path string, l Limits) error {
	if w == nil {
		return nil
	}
	if err := checkString(join(path, "runtimeConfig"), w.RuntimeConfig, l); err != nil {
		return err
	}
	if err := checkString(join(path, "agent"), w.Agent, l); err != nil {
		return err
	}
	for _, k := range SortedKeys(w.Tags) {
		if err := checkString(join(path, "tags."+k), w.Tags[k], l); err != nil {
			return err
		}
	}
	for i, f := range w.Files {
		if err := checkString(fmt.Sprintf("%s.files.%d", path, i), f.Content, l); err != nil {
			return err
		}
	}
	if n := w.Size(); over(n, l.MaxWorkloadBytes) {
		return LimitError(path, "the workload's size in bytes", "max_workload_bytes", n, l.MaxWorkloadBytes)
	}
	return nil
}

func checkString(path, s string, l Limits) error {
	if over(len(s), l.MaxStringBytes) {
		return LimitError(path, "the string's length in bytes", "max_string_bytes", len(s), l.MaxStringBytes)
	}
	return nil
}

// CheckConfigLimits checks one config item: its nesting depth, its
// strings and its size. The walk stops at the first limit crossed, so a
// hostile item costs no more than the limits allow.
func CheckConfigLimits(path string, v any, l Limits) error {
	w := configWalk{root: path, l: l}
	return w.walk(path, v, 1)
}

// configWalk is one check of a config item: its path and the size seen
// so far.
type configWalk struct {
	root string
	l    Limits
	size int
}

func (w *configWalk) walk(path string, v any, depth int) error {
	if over(depth, w.l.MaxConfigDepth) {
		return LimitError(path, "the nesting depth", "max_config_depth", depth, w.l.MaxConfigDepth)
	}
	w.size += sizeOverhead
	switch x := v.(type) {
	case string:
		if err := checkString(path, x, w.l); err != nil {
			return err
		}
		w.size += len(x)
	case []any:
		for i, e := range x {
			if err := w.walk(fmt.Sprintf("%s.%d", path, i), e, depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, k := range SortedKeys(x) {
			w.size += len(k)
			if err := w.walk(join(path, k), x[k], depth+1); err != nil {
				return err
			}
		}
	}
	if over(w.size, w.l.MaxConfigItemBytes) {
		return LimitError(w.root, "the config item's size in bytes (counted so far)", "max_config_item_bytes", w.size, w.l.MaxConfigItemBytes)
	}
	return nil
}
