// Package layout places the boxes of a layered drawing with swimlanes: each
// node sits in the column of its lane (for the dependency graph, its
// agent) and in the row of its layer, so that every edge runs from a row
// above to a row below; within a row of a lane, nodes are ordered to cut
// edge crossings. It is a small Sugiyama-style layout: cycles are broken
// by a depth-first search, layers are longest paths from the top, and
// the order comes from a few barycentre sweeps. Edge routing is left to
// the drawing.
//
// It is written here because the one layered layout the Go module proxy
// offered, Graphviz compiled to WebAssembly (goccy/go-graphviz with
// wazero), adds 8.8 MB (+42%) to the grapnel binary, and because lanes, one
// per agent, are simple in a layout that knows them and awkward in a
// general one. The layout is deterministic: the same input gives the same
// coordinates.
package layout

import (
	"cmp"
	"slices"
)

// Node is a box to place.
type Node struct {
	// Lane is the column the node belongs to, 0 <= Lane < Input.Lanes.
	Lane int
	// W and H are the box's size.
	W, H float64
}

// Edge asks for Upper to be drawn in a row above Lower.
type Edge struct{ Upper, Lower int }

// Input is what to place.
type Input struct {
	Nodes []Node
	Edges []Edge
	// Lanes is the number of columns; LaneMinWidth, when it has an entry
	// for a lane, is that lane's narrowest width (room for its title).
	Lanes        int
	LaneMinWidth []float64
}

// Spacing, in the drawing's units.
const (
	NodeGap   = 24 // between boxes in a row
	LayerGap  = 56 // between rows
	LaneGap   = 24 // between lanes
	LanePad   = 16 // inside a lane, around its boxes
	LaneTitle = 28 // above a lane's first row, for its title
	Margin    = 16 // around everything
	sweeps    = 4  // barycentre passes down and up
)

// Point is the centre of a box.
type Point struct{ X, Y float64 }

// Rect is a lane's box.
type Rect struct{ X, Y, W, H float64 }

// Result is where everything goes.
type Result struct {
	// Nodes are the centres of the boxes, by node index.
	Nodes []Point
	// Layers are the rows of the nodes, 0 at the top.
	Layers []int
	// Back marks the edges that had to point upwards because they close a
	// cycle, by edge index.
	Back  []bool
	Lanes []Rect
	// Width and Height are the drawing's size, margins included.
	Width, Height float64
}

// Place lays out in.
func Place(in Input) Result {
	n := len(in.Nodes)
	res := Result{Nodes: make([]Point, n), Layers: make([]int, n), Back: backEdges(in), Lanes: make([]Rect, in.Lanes)}

	// Layers: the longest path from a node without an upper neighbour,
	// following the edges that are not back edges, in topological order.
	uppers := make([][]int, n)
	lowers := make([][]int, n)
	indeg := make([]int, n)
	for i, e := range in.Edges {
		if res.Back[i] || e.Upper == e.Lower {
			continue
		}
		uppers[e.Lower] = append(uppers[e.Lower], e.Upper)
		lowers[e.Upper] = append(lowers[e.Upper], e.Lower)
		indeg[e.Lower]++
	}
	var queue []int
	for v := range n {
		if indeg[v] == 0 {
			queue = append(queue, v)
		}
	}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range lowers[v] {
			res.Layers[w] = max(res.Layers[w], res.Layers[v]+1)
			if indeg[w]--; indeg[w] == 0 {
				queue = append(queue, w)
			}
		}
	}
	layers := 0
	for _, l := range res.Layers {
		layers = max(layers, l+1)
	}

	// Cells: the nodes of one lane in one row, ordered by barycentre.
	cells := make([][][]int, in.Lanes)
	for l := range cells {
		cells[l] = make([][]int, layers)
	}
	for v, nd := range in.Nodes {
		cells[nd.Lane][res.Layers[v]] = append(cells[nd.Lane][res.Layers[v]], v)
	}
	order(cells, uppers, lowers, layers)

	// Sizes: a lane is as wide as its widest row; a row as high as its
	// highest box.
	rowH := make([]float64, layers)
	for v, nd := range in.Nodes {
		rowH[res.Layers[v]] = max(rowH[res.Layers[v]], nd.H)
	}
	rowY := make([]float64, layers)
	y := float64(Margin + LaneTitle + LanePad)
	for l := range layers {
		rowY[l] = y + rowH[l]/2
		y += rowH[l] + LayerGap
	}
	bottom := y - LayerGap + LanePad
	if layers == 0 {
		bottom = Margin + LaneTitle + 2*LanePad
	}
	x := float64(Margin)
	for lane := range in.Lanes {
		width := 0.0
		for _, row := range cells[lane] {
			width = max(width, rowWidth(in.Nodes, row))
		}
		width += 2 * LanePad
		if lane < len(in.LaneMinWidth) {
			width = max(width, in.LaneMinWidth[lane])
		}
		res.Lanes[lane] = Rect{X: x, Y: Margin, W: width, H: bottom - Margin}
		for l, row := range cells[lane] {
			cx := x + (width-rowWidth(in.Nodes, row))/2
			for _, v := range row {
				res.Nodes[v] = Point{X: cx + in.Nodes[v].W/2, Y: rowY[l]}
				cx += in.Nodes[v].W + NodeGap
			}
		}
		x += width + LaneGap
	}
	res.Width = max(x-LaneGap+Margin, 2*Margin)
	res.Height = bottom + Margin
	return res
}

// backEdges finds, by a depth-first search from the nodes in index order,
// the edges that point back to a node on the search path: without them the
// edges form no cycle. A self-loop is a back edge.
func backEdges(in Input) []bool {
	out := make([][]int, len(in.Nodes)) // edge indexes by upper node
	for i, e := range in.Edges {
		out[e.Upper] = append(out[e.Upper], i)
	}
	back := make([]bool, len(in.Edges))
	const (
		unseen = iota
		onPath
		done
	)
	mark := make([]int, len(in.Nodes))
	var visit func(v int)
	visit = func(v int) {
		mark[v] = onPath
		for _, i := range out[v] {
			w := in.Edges[i].Lower
			switch mark[w] {
			case onPath:
				back[i] = true
			case unseen:
				visit(w)
			}
		}
		mark[v] = done
	}
	for v := range in.Nodes {
		if mark[v] == unseen {
			visit(v)
		}
	}
	return back
}

// order sorts each cell by the mean position of the node's neighbours in
// the row above (sweeping down) or below (sweeping up). A position is the
// lane, then the place in the cell, so a neighbour in a lane to the left
// pulls a node to the left. Ties keep the current order.
func order(cells [][][]int, uppers, lowers [][]int, layers int) {
	pos := map[int]float64{}
	setPos := func(l int) {
		for lane := range cells {
			for i, v := range cells[lane][l] {
				pos[v] = float64(lane)*1e6 + float64(i)
			}
		}
	}
	for l := range layers {
		setPos(l)
	}
	sortRow := func(l int, nb [][]int) {
		for lane := range cells {
			row := cells[lane][l]
			bary := make(map[int]float64, len(row))
			for _, v := range row {
				bary[v] = pos[v]
				if len(nb[v]) > 0 {
					sum := 0.0
					for _, w := range nb[v] {
						sum += pos[w]
					}
					bary[v] = sum / float64(len(nb[v]))
				}
			}
			slices.SortStableFunc(row, func(a, b int) int { return cmp.Compare(bary[a], bary[b]) })
		}
		setPos(l)
	}
	for range sweeps {
		for l := 1; l < layers; l++ {
			sortRow(l, uppers)
		}
		for l := layers - 2; l >= 0; l-- {
			sortRow(l, lowers)
		}
	}
}

func rowWidth(nodes []Node, row []int) float64 {
	if len(row) == 0 {
		return 0
	}
	w := float64(NodeGap * (len(row) - 1))
	for _, v := range row {
		w += nodes[v].W
	}
	return w
}
