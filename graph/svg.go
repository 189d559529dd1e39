package graph

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/grapnel-io/grapnel/graph/layout"
	"github.com/grapnel-io/grapnel/state"
)

// Sizes of the SVG drawing. Text widths are estimated from the number of
// characters (charWidth per character of an 11px sans-serif font), so
// the drawing needs no font files and comes out the same everywhere.
const (
	fontSize   = 11
	charWidth  = 7.0
	nodeHeight = 38
	nodeMinW   = 80
	nodePadX   = 20
	// deleteOffset moves a delete-graph edge that is routed round the
	// boxes down a little, off the dependency edge it reverses.
	deleteOffset = 10
	// portInset keeps the ends of edges off a box's rounded corners.
	portInset = 10
	// sideRoute is how far right of the boxes a loop or an edge that
	// closes a cycle swings.
	sideRoute = 40
	legendRow = 22
)

// WriteSVG draws g as a standalone SVG image: agents as titled boxes side
// by side, a workload's dependencies above it, each node filled with the
// colour of its execution state, a legend below. Every node is a
// <g class="node" data-workload="NAME" data-state="STATE"> and every edge
// a <g class="edge" data-kind="dependency|delete" data-from data-to
// data-condition>, so a page can find them.
func WriteSVG(w io.Writer, g *Graph) error {
	d := place(g)
	b := bufio.NewWriter(w)
	width, height := d.width, d.height+legendHeight(d.width)
	fmt.Fprintf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
	fmt.Fprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%s\" height=\"%s\" viewBox=\"0 0 %s %s\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"%d\">\n",
		num(width), num(height), num(width), num(height), fontSize)
	fmt.Fprintf(b, "<title>grapnel dependency graph</title>\n")
	// The marker ids carry a prefix: a page may inline several drawings.
	b.WriteString("<defs>\n")
	for _, m := range []struct{ id, colour string }{{"grapnel-arrow", edgeColour}, {"grapnel-arrow-delete", deleteEdgeColour}, {"grapnel-arrow-cycle", cycleColour}, {"grapnel-arrow-missing", missingStyle.Stroke}} {
		fmt.Fprintf(b, "<marker id=\"%s\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"%s\"/></marker>\n", m.id, m.colour)
	}
	b.WriteString("</defs>\n")
	fmt.Fprintf(b, "<rect width=\"%s\" height=\"%s\" fill=\"#ffffff\"/>\n", num(width), num(height))

	for i, a := range g.Agents {
		r := d.res.Lanes[i]
		title := a.Name
		dash := ""
		if !a.Connected {
			title += " (not connected)"
			dash = " stroke-dasharray=\"6 4\""
		}
		fmt.Fprintf(b, "<g class=\"agent\" data-agent=\"%s\" data-connected=\"%t\">", esc(a.Name), a.Connected)
		fmt.Fprintf(b, "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" rx=\"8\" fill=\"#f7f9fa\" stroke=\"%s\"%s/>",
			num(r.X), num(r.Y), num(r.W), num(r.H), agentColour, dash)
		fmt.Fprintf(b, "<text x=\"%s\" y=\"%s\" font-weight=\"bold\" fill=\"%s\">%s</text></g>\n",
			num(r.X+layout.LanePad), num(r.Y+layout.LaneTitle-8), agentColour, esc(title))
	}

	for i, e := range g.Edges {
		writeSVGEdge(b, d, i, e)
	}

	for i := range g.Nodes {
		n := &g.Nodes[i]
		p, sz := d.res.Nodes[i], d.in.Nodes[i]
		s := StyleOf(n)
		stroke, pen := s.Stroke, "1.2"
		if n.InCycle {
			stroke, pen = cycleColour, "2.5"
		}
		if n.Changed {
			pen = "3.5"
		}
		dash := ""
		if s.Dashed {
			dash = " stroke-dasharray=\"5 3\""
		}
		fmt.Fprintf(b, "<g class=\"node\" data-workload=\"%s\" data-kind=\"%s\" data-state=\"%s\" data-in-cycle=\"%t\">", esc(n.Name), n.Kind, esc(n.State), n.InCycle)
		fmt.Fprintf(b, "<title>%s</title>", esc(tooltip(n)))
		fmt.Fprintf(b, "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" rx=\"6\" fill=\"%s\" stroke=\"%s\" stroke-width=\"%s\"%s/>",
			num(p.X-sz.W/2), num(p.Y-sz.H/2), num(sz.W), num(sz.H), s.Fill, stroke, pen, dash)
		fmt.Fprintf(b, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\" font-weight=\"bold\">%s</text>", num(p.X), num(p.Y-3), esc(n.Name))
		fmt.Fprintf(b, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\" font-size=\"%d\" fill=\"#424242\">%s</text></g>\n", num(p.X), num(p.Y+12), fontSize-1, esc(StateText(n)))
	}

	writeLegend(b, d.width, d.height)
	b.WriteString("</svg>\n")
	return b.Flush()
}

// drawing is g placed: the layout's input and result, with node i of the
// layout being g.Nodes[i] and edge j being g.Edges[j].
type drawing struct {
	in    layout.Input
	res   layout.Result
	index map[string]int // node name → index
	// ports are the x of each edge's two ends (From, To) on the boxes'
	// top or bottom sides, by edge index.
	ports         [][2]float64
	width, height float64
}

// place lays g out: one lane per agent, then one lane without a box for
// the nodes that have no agent; a dependency's node above its dependent's.
func place(g *Graph) drawing {
	laneOf := make(map[string]int, len(g.Agents))
	in := layout.Input{Lanes: len(g.Agents)}
	for i, a := range g.Agents {
		laneOf[a.Name] = i
		title := a.Name
		if !a.Connected {
			title += " (not connected)"
		}
		in.LaneMinWidth = append(in.LaneMinWidth, textWidth(title)+2*layout.LanePad)
	}
	index := make(map[string]int, len(g.Nodes))
	for i, n := range g.Nodes {
		index[n.Name] = i
		lane, ok := laneOf[n.Agent]
		if !ok || n.Agent == "" {
			lane = len(g.Agents)
			in.Lanes = len(g.Agents) + 1
		}
		w := max(nodeMinW, max(textWidth(n.Name), textWidth(StateText(&n)))+nodePadX)
		in.Nodes = append(in.Nodes, layout.Node{Lane: lane, W: w, H: nodeHeight})
	}
	for _, e := range g.Edges {
		// Only dependencies order the rows; a delete edge is the reverse
		// of one.
		if e.Kind == EdgeDependency {
			in.Edges = append(in.Edges, layout.Edge{Upper: index[e.To], Lower: index[e.From]})
		}
	}
	res := layout.Place(in)
	d := drawing{in: in, res: res, index: index, ports: ports(g, in, res, index)}
	// Room on the right for the edges routed round the boxes' right side.
	d.width, d.height = max(res.Width+sideRoute, legendMinWidth), res.Height
	return d
}

// ports spreads the ends of the edges along each box's top and bottom
// sides, ordered by where the other end lies (a dependency before its
// delete edge), so that edges into one box do not meet in one point and
// a dependency and its delete edge run side by side without crossing.
// An end whose other end is in the same row keeps the box's centre.
func ports(g *Graph, in layout.Input, res layout.Result, index map[string]int) [][2]float64 {
	type end struct {
		edge, side int // side 0: From, 1: To
		otherX     float64
		kind       int
	}
	type key struct {
		node int
		top  bool
	}
	sides := map[key][]end{}
	out := make([][2]float64, len(g.Edges))
	for i, e := range g.Edges {
		f, t := index[e.From], index[e.To]
		pf, pt := res.Nodes[f], res.Nodes[t]
		out[i] = [2]float64{pf.X, pt.X}
		if pf.Y == pt.Y {
			continue
		}
		k := edgeKindOrder(e.Kind)
		sides[key{f, pt.Y < pf.Y}] = append(sides[key{f, pt.Y < pf.Y}], end{i, 0, pt.X, k})
		sides[key{t, pf.Y < pt.Y}] = append(sides[key{t, pf.Y < pt.Y}], end{i, 1, pf.X, k})
	}
	for k, ends := range sides {
		slices.SortFunc(ends, func(a, b end) int {
			return cmp.Or(cmp.Compare(a.otherX, b.otherX), cmp.Compare(a.kind, b.kind), cmp.Compare(a.edge, b.edge))
		})
		w := in.Nodes[k.node].W - 2*portInset
		left := res.Nodes[k.node].X - w/2
		for j, e := range ends {
			out[e.edge][e.side] = left + w*float64(j+1)/float64(len(ends)+1)
		}
	}
	return out
}

func writeSVGEdge(b *bufio.Writer, d drawing, i int, e Edge) {
	from, to := d.index[e.From], d.index[e.To]
	pf, pt := d.res.Nodes[from], d.res.Nodes[to]
	hf, ht := d.in.Nodes[from].H/2, d.in.Nodes[to].H/2

	colour, marker, dash, width := edgeColour, "grapnel-arrow", "", "1.2"
	var x1, y1, x2, y2 float64
	if e.Kind == EdgeDelete {
		// From the dependency's bottom down to the dependent's top.
		colour, marker, dash = deleteEdgeColour, "grapnel-arrow-delete", " stroke-dasharray=\"5 4\""
		x1, y1, x2, y2 = d.ports[i][0], pf.Y+hf, d.ports[i][1], pt.Y-ht
	} else {
		// From the dependent's top up to the dependency's bottom.
		x1, y1, x2, y2 = d.ports[i][0], pf.Y-hf, d.ports[i][1], pt.Y+ht
		switch {
		case e.InCycle:
			colour, marker, width = cycleColour, "grapnel-arrow-cycle", "2.5"
		case e.Missing:
			colour, marker, dash = missingStyle.Stroke, "grapnel-arrow-missing", " stroke-dasharray=\"5 4\""
		}
	}
	// A curve from (x1,y1) to (x2,y2) with control points c1 and c2.
	var c1x, c1y, c2x, c2y float64
	// down says the edge should run downwards: a delete edge goes from
	// the dependency down to its dependent, a dependency edge up.
	down := e.Kind == EdgeDelete
	switch {
	case from == to:
		// A loop on the node's right side.
		r := d.in.Nodes[from].W / 2
		x1, y1, x2, y2 = pf.X+r, pf.Y-6, pf.X+r, pf.Y+6
		c1x, c1y, c2x, c2y = x1+sideRoute, pf.Y-30, x2+sideRoute, pf.Y+30
	case down != (pt.Y > pf.Y):
		// The layout could not put the ends in the edge's direction (the
		// edge closes a cycle): go round the right side of both boxes.
		x1, y1 = pf.X+d.in.Nodes[from].W/2, pf.Y
		x2, y2 = pt.X+d.in.Nodes[to].W/2, pt.Y
		if e.Kind == EdgeDelete {
			y1, y2 = y1+deleteOffset, y2+deleteOffset
		}
		side := max(x1, x2) + sideRoute
		c1x, c1y, c2x, c2y = side, y1, side, y2
	default:
		bend := max(abs(y2-y1)/2, 30)
		if !down {
			bend = -bend
		}
		c1x, c1y, c2x, c2y = x1, y1+bend, x2, y2-bend
	}
	path := fmt.Sprintf("M%s,%s C%s,%s %s,%s %s,%s", num(x1), num(y1), num(c1x), num(c1y), num(c2x), num(c2y), num(x2), num(y2))
	// The label sits at the curve's midpoint (t = 1/2).
	lx, ly := (x1+3*c1x+3*c2x+x2)/8, (y1+3*c1y+3*c2y+y2)/8
	fmt.Fprintf(b, "<g class=\"edge\" data-kind=\"%s\" data-from=\"%s\" data-to=\"%s\" data-condition=\"%s\" data-in-cycle=\"%t\" data-missing=\"%t\">",
		e.Kind, esc(e.From), esc(e.To), esc(e.Condition), e.InCycle, e.Missing)
	what := "waits for " + e.To + " to be " + ConditionText(e.Condition)
	if e.Kind == EdgeDelete {
		what = "deleting " + e.From + " waits until " + e.To + " is " + ConditionText(e.Condition)
	} else {
		what = e.From + " " + what
	}
	fmt.Fprintf(b, "<title>%s</title>", esc(what))
	fmt.Fprintf(b, "<path d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s marker-end=\"url(#%s)\"/>", path, colour, width, dash, marker)
	if e.Kind == EdgeDependency {
		fmt.Fprintf(b, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\" font-size=\"%d\" fill=\"%s\" stroke=\"#ffffff\" stroke-width=\"3\" paint-order=\"stroke\">%s</text>",
			num(lx), num(ly+3), fontSize-2, colour, esc(ConditionText(e.Condition)))
	}
	b.WriteString("</g>\n")
}

// legendItems are the entries of the legend: the states' colours, then
// the kinds of nodes and edges.
var legendItems = func() []legendItem {
	var items []legendItem
	for _, st := range []state.ExecState{state.StateRunning, state.StatePending, state.StateSucceeded, state.StateFailed,
		state.StateStopping, state.StateAgentDisconnected, state.StateNotScheduled, state.StateRemoved} {
		items = append(items, legendItem{text: string(st), style: stateStyles[st]})
	}
	return append(items,
		legendItem{text: "no state", style: noStateStyle},
		legendItem{text: "missing", style: missingStyle},
		legendItem{text: "deleting", style: Style{Fill: noStateStyle.Fill, Stroke: noStateStyle.Stroke, Dashed: true}},
		legendItem{text: "in a cycle", style: Style{Fill: noStateStyle.Fill, Stroke: cycleColour}},
		legendItem{text: "depends on", edge: edgeColour},
		legendItem{text: "deletion waits for", edge: deleteEdgeColour, dashed: true},
	)
}()

type legendItem struct {
	text   string
	style  Style
	edge   string // an edge's colour; empty for a node swatch
	dashed bool
}

// legendMinWidth keeps the legend to a few rows in a small drawing.
const legendMinWidth = 480

func legendItemWidth(it legendItem) float64 { return 28 + textWidth(it.text) + 14 }

// legendLayout places the legend's items in rows across width, below y.
func legendLayout(width, y float64, f func(it legendItem, x, y float64)) float64 {
	x := float64(layout.Margin)
	for _, it := range legendItems {
		w := legendItemWidth(it)
		if x+w > width-layout.Margin && x > layout.Margin {
			x, y = layout.Margin, y+legendRow
		}
		f(it, x, y)
		x += w
	}
	return y + legendRow
}

func legendHeight(width float64) float64 {
	return legendLayout(width, 0, func(legendItem, float64, float64) {}) + layout.Margin/2
}

func writeLegend(b *bufio.Writer, width, y float64) {
	b.WriteString("<g class=\"legend\">\n")
	legendLayout(width, y, func(it legendItem, x, y float64) {
		if it.edge != "" {
			dash := ""
			if it.dashed {
				dash = " stroke-dasharray=\"5 4\""
			}
			fmt.Fprintf(b, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"1.2\"%s/>",
				num(x), num(y+7), num(x+22), num(y+7), it.edge, dash)
		} else {
			dash := ""
			if it.style.Dashed {
				dash = " stroke-dasharray=\"3 2\""
			}
			fmt.Fprintf(b, "<rect x=\"%s\" y=\"%s\" width=\"22\" height=\"14\" rx=\"3\" fill=\"%s\" stroke=\"%s\"%s/>",
				num(x), num(y), it.style.Fill, it.style.Stroke, dash)
		}
		fmt.Fprintf(b, "<text x=\"%s\" y=\"%s\" font-size=\"%d\">%s</text>\n", num(x+28), num(y+11), fontSize-1, esc(it.text))
	})
	b.WriteString("</g>\n")
}

// textWidth estimates the width of s in the drawing's font.
func textWidth(s string) float64 { return float64(len([]rune(s))) * charWidth }

// num writes a coordinate with one decimal, the same on every machine.
func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// esc escapes text for an XML attribute or element. Characters XML 1.0
// does not allow (control characters other than tab and line breaks)
// become U+FFFD, so that any additional info an agent reports still
// gives a well-formed document.
func esc(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '"':
			b.WriteString("&quot;")
		case r == '\'':
			b.WriteString("&apos;")
		case r == '\n':
			b.WriteString("&#10;")
		case r == '\r':
			b.WriteString("&#13;")
		case r == '\t':
			b.WriteString("&#9;")
		case r < 0x20, r == 0xFFFE, r == 0xFFFF, r >= 0xD800 && r <= 0xDFFF:
			b.WriteRune('\uFFFD')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
