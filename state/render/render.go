package render

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/grapnel-io/grapnel/state"
)

// Renderer renders workloads of the desired state. It caches parsed
// templates by source text and is safe for concurrent use.
type Renderer struct {
	cache *cache
	// max bounds the text one workload renders to, all fields together.
	max int
}

// New returns a Renderer with an empty template cache and the default
// output limit.
func New() *Renderer { return NewLimited(DefaultMaxOutput) }

// NewLimited returns a Renderer whose workloads render to at most max
// bytes of text each (DefaultMaxOutput when max is not positive).
func NewLimited(max int) *Renderer {
	if max <= 0 {
		max = DefaultMaxOutput
	}
	return &Renderer{cache: newCache(), max: max}
}

// Workload renders one workload of the desired state. w is not modified.
//
// A workload that maps no config is returned unrendered, templates and
// all, with the instance name of its raw runtimeConfig. Otherwise every
// alias must name a key of configs, and agent, runtimeConfig and file
// contents are rendered with only the aliases in scope; the result has no
// Configs (swdd~config-renderer-renders-workload-configuration~2). Every
// error is a *state.FieldError.
func (r *Renderer) Workload(name string, w *state.Workload, configs map[string]any) (*state.Workload, state.InstanceName, error) {
	return r.WorkloadWithin(name, w, configs, nil)
}

// WorkloadWithin is Workload spending the work from b, the budget of the
// request that renders it (nil: none). A workload that runs out of it is
// refused with a state.BudgetError naming the field where it ran out
// (errors.Is state.ErrBudget), and b.Spent() holds from then on.
func (r *Renderer) WorkloadWithin(name string, w *state.Workload, configs map[string]any, b *Budget) (*state.Workload, state.InstanceName, error) {
	base := "desiredState.workloads." + name
	if w == nil {
		return nil, state.InstanceName{}, &state.FieldError{Path: base, Reason: "workload is missing"}
	}
	if len(w.Configs) == 0 {
		return w.Clone(), state.NewInstanceName(name, w.Agent, w.RuntimeConfig), nil
	}
	ctx := make(map[string]any, len(w.Configs))
	for _, alias := range state.SortedKeys(w.Configs) {
		key := w.Configs[alias]
		item, ok := configs[key]
		if !ok {
			return nil, state.InstanceName{}, &state.FieldError{
				Path:   base + ".configs." + alias,
				Reason: fmt.Sprintf("Workload references config key '%s' that does not exist", key),
			}
		}
		ctx[alias] = item
	}

	out := w.Clone()
	out.Configs = nil
	// Every field renders within what the fields before it left of the
	// limit, so no workload builds more than the limit in memory.
	left := r.max
	var err error
	if out.RuntimeConfig, err = r.field(base+".runtimeConfig", "runtimeConfig", w.RuntimeConfig, ctx, &left, b); err != nil {
		return nil, state.InstanceName{}, err
	}
	if out.Agent, err = r.field(base+".agent", "agent", w.Agent, ctx, &left, b); err != nil {
		return nil, state.InstanceName{}, err
	}
	for i := range out.Files {
		f := &out.Files[i]
		sub := "data"
		if f.Binary {
			sub = "binaryData"
		}
		path := fmt.Sprintf("%s.files.%d.%s", base, i, sub)
		if f.Content, err = r.field(path, "files with mount point "+f.MountPoint, f.Content, ctx, &left, b); err != nil {
			return nil, state.InstanceName{}, err
		}
	}
	return out, state.NewInstanceName(name, out.Agent, out.RuntimeConfig), nil
}

// field renders one field within *left bytes and the budget b, takes
// what it used from *left, and words a failure the way Ankaios does.
func (r *Renderer) field(path, field, src string, ctx map[string]any, left *int, b *Budget) (string, error) {
	s, err := r.render(src, ctx, *left, b)
	switch {
	case errors.Is(err, errOutOfSteps):
		return "", state.BudgetError(path, "rendering the update's templates", "render steps", "max_render_steps_per_request", b.maxSteps)
	case errors.Is(err, errOutOfBytes):
		return "", state.BudgetError(path, "rendering the update's templates", "bytes of text", "max_update_bytes", b.maxBytes)
	case err != nil:
		return "", &state.FieldError{Path: path, Reason: fmt.Sprintf("Failed to render field '%s': '%s'", field, err)}
	}
	*left -= len(s)
	return s, nil
}

// render renders one template: compile (cached), strict check, then
// raymond, each charged to b before it is done. Text without "{{"
// cannot hold a template and is returned as is.
func (r *Renderer) render(src string, ctx map[string]any, max int, b *Budget) (string, error) {
	if !strings.Contains(src, "{{") {
		return src, nil
	}
	if err := b.compile(src); err != nil {
		return "", err
	}
	t, err := r.cache.get(src)
	if err != nil {
		return "", err
	}
	if err := check(t, ctx, nil, max, b); err != nil {
		return "", err
	}
	return execute(t, ctx)
}

// execute runs raymond on a checked template. raymond reports its own
// failures by panicking and re-panics runtime errors; none is expected
// after the check, but one must not take the server down.
func execute(t *template, ctx map[string]any) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = "", errorf(0, "template execution failed: %v", p)
		}
	}()
	out, err = t.exec.Exec(ctx)
	if err != nil {
		return "", errorf(0, "%s", strings.ReplaceAll(err.Error(), "\n", " "))
	}
	return out, nil
}

// References reports the config keys w refers to (the values of
// w.Configs), sorted and without duplicates. The server uses it to find the
// workloads to re-render when a config item changes.
func References(w *state.Workload) []string {
	if w == nil || len(w.Configs) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(w.Configs))
	keys := make([]string, 0, len(w.Configs))
	for _, k := range w.Configs {
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}
