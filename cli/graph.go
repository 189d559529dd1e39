package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/grapnel-io/grapnel/graph"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// GraphFormat is the output format of `get graph`.
type GraphFormat string

// Graph formats. DOT is the default: it is text a person can read and
// what Graphviz and most graph tools take.
const (
	GraphDOT  GraphFormat = "dot"
	GraphSVG  GraphFormat = "svg"
	GraphJSON GraphFormat = "json"
)

// ParseGraphFormat accepts "dot", "svg" and "json".
func ParseGraphFormat(s string) (GraphFormat, error) {
	switch f := GraphFormat(strings.ToLower(s)); f {
	case GraphDOT, GraphSVG, GraphJSON:
		return f, nil
	}
	return "", fmt.Errorf("output format %q is not supported by get graph: use dot, svg or json", s)
}

// GraphOptions are the flags of `get graph`.
type GraphOptions struct {
	Format GraphFormat
	// Workloads, when given, narrow the graph to them and everything they
	// depend on or that depends on them.
	Workloads []string
	// Graphviz draws the SVG with Graphviz's dot program instead of
	// grapnel's own layout.
	Graphviz bool
	// Txn, when set, draws the desired state right after that history
	// transaction, its changed workloads marked (GraphAtTxn); History
	// reads the history for it.
	Txn     uint64
	History grapnelpb.HistoryClient
}

// graphvizDot finds Graphviz's dot program; a variable so that tests can
// pretend it is absent.
var graphvizDot = func() (string, error) { return exec.LookPath("dot") }

// GraphInput turns a complete-state tree into the input of graph.Build:
// the desired workloads with their agents rendered as the server renders
// them (see desiredAgents), the instance states and the connected agents.
// The delete graph is left nil, so Build derives it from the dependencies,
// as the server did when it stored them.
func GraphInput(cs state.Tree) graph.Input {
	desired := node(cs, "desiredState", "workloads")
	in := graph.Input{
		Workloads: make(map[string]*state.Workload, len(desired)),
		Agents:    desiredAgents(desired, node(cs, "desiredState", "configs")),
		States:    state.WorkloadStatesMap{},
		Connected: connectedAgents(cs),
	}
	for name, w := range desired {
		wm, _ := w.(map[string]any)
		deps := node(wm, "dependencies")
		wl := &state.Workload{Agent: str(wm, "agent"), Runtime: str(wm, "runtime"), Dependencies: make(map[string]state.AddCondition, len(deps))}
		for dep := range deps {
			wl.Dependencies[dep] = state.AddCondition(str(deps, dep))
		}
		in.Workloads[name] = wl
	}
	for _, ws := range workloadStates(cs) {
		in.States.Set(ws.Instance, ws.State)
	}
	return in
}

// WriteGraph writes g in format f.
func WriteGraph(w io.Writer, g *graph.Graph, f GraphFormat) error {
	switch f {
	case GraphSVG:
		return graph.WriteSVG(w, g)
	case GraphJSON:
		return graph.WriteJSON(w, g)
	}
	return graph.WriteDOT(w, g)
}

// GetGraph prints the dependency graph of the workloads, built here from
// the complete state, so that it works against any replica and any
// Ankaios-compatible server.
func (s *Session) GetGraph(ctx context.Context, o GraphOptions) error {
	if o.Graphviz && o.Format != GraphSVG {
		return errors.New("--graphviz draws SVG: use it with -o svg")
	}
	dot := ""
	if o.Graphviz {
		var err error
		if dot, err = graphvizDot(); err != nil {
			return fmt.Errorf("--graphviz: Graphviz's dot program is not on PATH (%w); without --graphviz grapnel draws the SVG itself", err)
		}
	}
	cs, err := s.CompleteState(ctx, nil)
	if err != nil {
		return err
	}
	in := GraphInput(cs)
	var changed []string
	if o.Txn > 0 {
		if in, changed, err = s.rewind(ctx, in, o); err != nil {
			return err
		}
	}
	g := graph.Build(in)
	MarkChanged(g, changed)
	if len(o.Workloads) > 0 {
		if g, err = g.Focus(o.Workloads); err != nil {
			return err
		}
	}
	if dot == "" {
		return WriteGraph(s.Out, g, o.Format)
	}
	var src, out, stderr bytes.Buffer
	if err := graph.WriteDOT(&src, g); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, dot, "-Tsvg")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = &src, &out, &stderr
	s.debugf("drawing the graph with %s -Tsvg", dot)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("--graphviz: %s failed: %w: %s", dot, err, strings.TrimSpace(stderr.String()))
	}
	_, err = s.Out.Write(out.Bytes())
	return err
}

// rewind reads the whole history and rewinds in to transaction o.Txn.
func (s *Session) rewind(ctx context.Context, in graph.Input, o GraphOptions) (graph.Input, []string, error) {
	if o.History == nil {
		return graph.Input{}, nil, errors.New("--txn needs Grapnel's History service, which this server does not offer")
	}
	var txs []*grapnelpb.Transaction
	var since uint64
	for range maxHistoryPages {
		resp, err := o.History.List(ctx, &grapnelpb.HistoryListRequest{Since: since})
		if err != nil {
			return graph.Input{}, nil, err
		}
		page := resp.GetTransactions()
		txs = append(txs, page...)
		if len(page) == 0 || page[len(page)-1].GetSeq() >= resp.GetLastSeq() {
			break
		}
		since = page[len(page)-1].GetSeq()
	}
	out, changed, notes, err := GraphAtTxn(in, txs, o.Txn)
	if err != nil {
		return graph.Input{}, nil, err
	}
	if !s.Quiet && s.Err != nil {
		for _, n := range notes {
			fmt.Fprintln(s.Err, "note:", n)
		}
	}
	return out, changed, nil
}
