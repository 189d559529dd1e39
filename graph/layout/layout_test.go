package layout

import (
	"reflect"
	"testing"
)

func box(lane int) Node { return Node{Lane: lane, W: 80, H: 36} }

// checkGeometry asserts what every layout must keep: an edge that is not a
// back edge goes downwards, a box lies inside its lane, no two boxes
// overlap, lanes do not overlap and everything is inside the drawing.
func checkGeometry(t *testing.T, in Input, r Result) {
	t.Helper()
	for i, e := range in.Edges {
		if r.Back[i] || e.Upper == e.Lower {
			continue
		}
		if r.Layers[e.Upper] >= r.Layers[e.Lower] || r.Nodes[e.Upper].Y >= r.Nodes[e.Lower].Y {
			t.Errorf("edge %d (%d→%d): upper in layer %d at y=%v, lower in layer %d at y=%v",
				i, e.Upper, e.Lower, r.Layers[e.Upper], r.Nodes[e.Upper].Y, r.Layers[e.Lower], r.Nodes[e.Lower].Y)
		}
	}
	rect := func(v int) Rect {
		p, n := r.Nodes[v], in.Nodes[v]
		return Rect{X: p.X - n.W/2, Y: p.Y - n.H/2, W: n.W, H: n.H}
	}
	overlap := func(a, b Rect) bool {
		return a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H
	}
	inside := func(a, b Rect) bool {
		return a.X >= b.X && a.Y >= b.Y && a.X+a.W <= b.X+b.W && a.Y+a.H <= b.Y+b.H
	}
	for v := range in.Nodes {
		if !inside(rect(v), r.Lanes[in.Nodes[v].Lane]) {
			t.Errorf("node %d %+v is not inside its lane %+v", v, rect(v), r.Lanes[in.Nodes[v].Lane])
		}
		for w := v + 1; w < len(in.Nodes); w++ {
			if overlap(rect(v), rect(w)) {
				t.Errorf("nodes %d %+v and %d %+v overlap", v, rect(v), w, rect(w))
			}
		}
	}
	for a := range r.Lanes {
		if !inside(r.Lanes[a], Rect{W: r.Width, H: r.Height}) {
			t.Errorf("lane %d %+v is outside the drawing %vx%v", a, r.Lanes[a], r.Width, r.Height)
		}
		for b := a + 1; b < len(r.Lanes); b++ {
			if overlap(r.Lanes[a], r.Lanes[b]) {
				t.Errorf("lanes %d and %d overlap", a, b)
			}
		}
	}
}

func TestPlace(t *testing.T) {
	tests := []struct {
		name   string
		in     Input
		layers []int
		back   []bool
	}{
		{name: "empty", in: Input{}, layers: []int{}, back: []bool{}},
		{name: "lanes without nodes", in: Input{Lanes: 2, LaneMinWidth: []float64{100, 50}}, layers: []int{}, back: []bool{}},
		{
			name:   "a chain across lanes takes one row per step",
			in:     Input{Nodes: []Node{box(0), box(1), box(0)}, Edges: []Edge{{0, 1}, {1, 2}}, Lanes: 2},
			layers: []int{0, 1, 2}, back: []bool{false, false},
		},
		{
			name: "a node goes below its lowest upper neighbour (longest path)",
			in: Input{Nodes: []Node{box(0), box(0), box(0), box(1)}, Lanes: 2,
				Edges: []Edge{{0, 1}, {1, 2}, {0, 2}, {3, 2}}},
			layers: []int{0, 1, 2, 0}, back: []bool{false, false, false, false},
		},
		{
			name: "a cycle is broken at the edge that closes it; a self-loop is a back edge",
			in: Input{Nodes: []Node{box(0), box(0), box(0), box(0)}, Lanes: 1,
				Edges: []Edge{{0, 1}, {1, 2}, {2, 0}, {3, 3}}},
			layers: []int{0, 1, 2, 0}, back: []bool{false, false, true, true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Place(tt.in)
			if !reflect.DeepEqual(r.Layers, tt.layers) {
				t.Errorf("layers = %v; want %v", r.Layers, tt.layers)
			}
			if !reflect.DeepEqual(r.Back, tt.back) {
				t.Errorf("back = %v; want %v", r.Back, tt.back)
			}
			checkGeometry(t, tt.in, r)
			if len(tt.in.LaneMinWidth) > 0 && r.Lanes[0].W < tt.in.LaneMinWidth[0] {
				t.Errorf("lane 0 width %v < its minimum %v", r.Lanes[0].W, tt.in.LaneMinWidth[0])
			}
			if again := Place(tt.in); !reflect.DeepEqual(again, r) {
				t.Errorf("two layouts of one input differ")
			}
		})
	}
}

// Children are ordered under their parents: with a above-left of b, b's
// child c, listed first, moves right of a's child d, so the edges do not
// cross.
func TestPlaceUncrossesEdges(t *testing.T) {
	in := Input{Nodes: []Node{box(0), box(0), box(0), box(0)}, Lanes: 1, Edges: []Edge{{1, 2}, {0, 3}}}
	r := Place(in)
	checkGeometry(t, in, r)
	if !(r.Nodes[0].X < r.Nodes[1].X) || !(r.Nodes[3].X < r.Nodes[2].X) {
		t.Fatalf("a=%v b=%v c=%v d=%v: want a left of b and d left of c", r.Nodes[0], r.Nodes[1], r.Nodes[2], r.Nodes[3])
	}
}

// A larger random-looking graph keeps the geometric rules.
func TestPlaceManyNodes(t *testing.T) {
	var in Input
	in.Lanes = 4
	for i := range 60 {
		in.Nodes = append(in.Nodes, Node{Lane: i % 4, W: float64(40 + (i*37)%90), H: 36})
		if i > 0 {
			in.Edges = append(in.Edges, Edge{Upper: (i * 7) % i, Lower: i})
		}
		if i > 3 {
			in.Edges = append(in.Edges, Edge{Upper: i - 3, Lower: i})
		}
	}
	in.Edges = append(in.Edges, Edge{Upper: 59, Lower: 0}) // a cycle through everything above 59
	r := Place(in)
	checkGeometry(t, in, r)
	backs := 0
	for _, b := range r.Back {
		if b {
			backs++
		}
	}
	if backs != 1 {
		t.Errorf("back edges = %d; want 1", backs)
	}
}
