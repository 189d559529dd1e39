package graph

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// svgGroup is a <g> of the drawing with its data attributes.
type svgGroup struct {
	class string
	attrs map[string]string
	title string
	rects int
	paths int
}

// parseSVG reads the drawing with encoding/xml and returns its groups and
// the viewBox size.
func parseSVG(t *testing.T, src []byte) (groups []svgGroup, w, h float64) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(src))
	var cur *svgGroup
	var inTitle bool
	sawSVG := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, src)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			attrs := map[string]string{}
			for _, a := range x.Attr {
				attrs[a.Name.Local] = a.Value
			}
			switch x.Name.Local {
			case "svg":
				sawSVG = true
				if x.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("svg namespace %q", x.Name.Space)
				}
				f := strings.Fields(attrs["viewBox"])
				if len(f) != 4 {
					t.Fatalf("viewBox %q", attrs["viewBox"])
				}
				w, _ = strconv.ParseFloat(f[2], 64)
				h, _ = strconv.ParseFloat(f[3], 64)
			case "g":
				groups = append(groups, svgGroup{class: attrs["class"], attrs: attrs})
				cur = &groups[len(groups)-1]
			case "title":
				inTitle = true
			case "rect":
				if cur != nil {
					cur.rects++
					x, _ := strconv.ParseFloat(attrs["x"], 64)
					y, _ := strconv.ParseFloat(attrs["y"], 64)
					rw, _ := strconv.ParseFloat(attrs["width"], 64)
					rh, _ := strconv.ParseFloat(attrs["height"], 64)
					if x < 0 || y < 0 || x+rw > w || y+rh > h {
						t.Errorf("rect %v of %s %v lies outside the %vx%v drawing", attrs, cur.class, cur.attrs, w, h)
					}
				}
			case "path":
				if cur != nil {
					cur.paths++
				}
			}
		case xml.CharData:
			if inTitle && cur != nil {
				cur.title += string(x)
			}
		case xml.EndElement:
			switch x.Name.Local {
			case "title":
				inTitle = false
			case "g":
				cur = nil
			}
		}
	}
	if !sawSVG {
		t.Fatal("no <svg> element")
	}
	return groups, w, h
}

func TestWriteSVG(t *testing.T) {
	in := bigInput()
	in.States.Set(state.InstanceName{WorkloadName: "db", AgentName: "A", ID: "1"},
		state.ExecutionState{State: state.StateRunning, SubState: state.SubOk, AdditionalInfo: `odd "text" with <xml> & ]]>`})
	g := Build(in)
	var b bytes.Buffer
	if err := WriteSVG(&b, g); err != nil {
		t.Fatal(err)
	}
	groups, _, _ := parseSVG(t, b.Bytes())

	nodes := map[string]svgGroup{}
	var edges []svgGroup
	var agents []string
	for _, gr := range groups {
		switch gr.class {
		case "node":
			name := gr.attrs["data-workload"]
			if _, dup := nodes[name]; dup {
				t.Errorf("node %s drawn twice", name)
			}
			nodes[name] = gr
			if gr.rects != 1 {
				t.Errorf("node %s has %d boxes", name, gr.rects)
			}
		case "edge":
			edges = append(edges, gr)
			if gr.paths != 1 {
				t.Errorf("edge %v has %d paths", gr.attrs, gr.paths)
			}
		case "agent":
			agents = append(agents, gr.attrs["data-agent"])
		}
	}
	// One node per workload, with its state.
	if len(nodes) != len(g.Nodes) {
		t.Errorf("%d nodes drawn; want %d", len(nodes), len(g.Nodes))
	}
	for _, n := range g.Nodes {
		gr, ok := nodes[n.Name]
		if !ok {
			t.Errorf("node %s not drawn", n.Name)
			continue
		}
		if gr.attrs["data-state"] != n.State || gr.attrs["data-kind"] != string(n.Kind) || gr.attrs["data-in-cycle"] != strconv.FormatBool(n.InCycle) {
			t.Errorf("node %s drawn with %v; want state %q kind %s in-cycle %v", n.Name, gr.attrs, n.State, n.Kind, n.InCycle)
		}
	}
	if !strings.Contains(nodes["db"].title, `odd "text" with <xml> & ]]>`) {
		t.Errorf("db's tooltip %q lacks its additional info", nodes["db"].title)
	}
	// Every edge, in order, with its ends and condition.
	if len(edges) != len(g.Edges) {
		t.Fatalf("%d edges drawn; want %d", len(edges), len(g.Edges))
	}
	for i, e := range g.Edges {
		a := edges[i].attrs
		if a["data-kind"] != string(e.Kind) || a["data-from"] != e.From || a["data-to"] != e.To || a["data-condition"] != e.Condition ||
			a["data-in-cycle"] != strconv.FormatBool(e.InCycle) || a["data-missing"] != strconv.FormatBool(e.Missing) {
			t.Errorf("edge %d drawn as %v; want %+v", i, a, e)
		}
	}
	if got := strings.Join(agents, ","); got != "A,B,C" {
		t.Errorf("agent boxes %s; want A,B,C", got)
	}
}

// Nodes are filled with the colour of their state, and a dependency is
// drawn above what depends on it.
func TestSVGColoursAndLayers(t *testing.T) {
	g := Build(bigInput())
	d := place(g)
	y := func(name string) float64 { return d.res.Nodes[d.index[name]].Y }
	for _, e := range [][2]string{{"db", "cache"}, {"cache", "web"}, {"init", "web"}} {
		if !(y(e[0]) < y(e[1])) {
			t.Errorf("%s (y=%v) is not above %s (y=%v)", e[0], y(e[0]), e[1], y(e[1]))
		}
	}
	var b bytes.Buffer
	if err := WriteSVG(&b, g); err != nil {
		t.Fatal(err)
	}
	for name, fill := range map[string]string{"db": "#c8e6c9", "web": "#fff59d", "init": "#bbdefb", "x": "#ffcdd2", "old": "#ffe0b2", "lone": "#ffffff"} {
		i := strings.Index(b.String(), `data-workload="`+name+`"`)
		end := strings.Index(b.String()[i:], "</g>")
		if !strings.Contains(b.String()[i:i+end], `fill="`+fill+`"`) {
			t.Errorf("node %s not filled %s: %s", name, fill, b.String()[i:i+end])
		}
	}
}

// An empty state draws an empty, valid picture (the legend only).
func TestSVGOfEmptyGraph(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSVG(&b, Build(Input{})); err != nil {
		t.Fatal(err)
	}
	groups, w, h := parseSVG(t, b.Bytes())
	if w <= 0 || h <= 0 {
		t.Errorf("size %vx%v", w, h)
	}
	for _, gr := range groups {
		if gr.class != "legend" {
			t.Errorf("unexpected group %v", gr.attrs)
		}
	}
}

// The drawing is the same bytes every time.
func TestSVGIsDeterministic(t *testing.T) {
	var first bytes.Buffer
	if err := WriteSVG(&first, Build(bigInput())); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		var b bytes.Buffer
		if err := WriteSVG(&b, Build(bigInput())); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Bytes(), first.Bytes()) {
			t.Fatal("two drawings of one state differ")
		}
	}
}

// Text from the state, whatever it holds, leaves the XML well-formed and
// reads back as it was (characters XML cannot carry become U+FFFD).
func TestSVGEscapesText(t *testing.T) {
	tests := []struct{ in, want string }{
		{`plain`, `plain`},
		{`a<b>&"c"'d'`, `a<b>&"c"'d'`},
		{"two\nlines\tand\rreturn", "two\nlines\tand\rreturn"},
		{"bell\x07 nul\x00", "bell\uFFFD nul\uFFFD"},
		{"ünïcödé ✓", "ünïcödé ✓"},
	}
	for _, tt := range tests {
		doc := `<t a="` + esc(tt.in) + `">` + esc(tt.in) + `</t>`
		var v struct {
			A    string `xml:"a,attr"`
			Text string `xml:",chardata"`
		}
		if err := xml.Unmarshal([]byte(doc), &v); err != nil {
			t.Errorf("esc(%q) gives bad XML %s: %v", tt.in, doc, err)
			continue
		}
		if v.A != tt.want || v.Text != tt.want {
			t.Errorf("esc(%q) reads back as attribute %q, text %q; want %q", tt.in, v.A, v.Text, tt.want)
		}
	}
}

// Every edge starts on its From box and ends on its To box: on its border
// (top, bottom or, for an edge routed round the side, the right side),
// and no two edges of one box side end in the same point.
func TestSVGEdgesEndOnTheirBoxes(t *testing.T) {
	for _, in := range []Input{bigInput(), {Workloads: map[string]*state.Workload{"self": wl("A", map[string]state.AddCondition{"self": state.AddCondRunning})}}} {
		g := Build(in)
		d := place(g)
		var b bytes.Buffer
		if err := WriteSVG(&b, g); err != nil {
			t.Fatal(err)
		}
		pathRe := regexp.MustCompile(`<path d="M([-0-9.]+),([-0-9.]+) C[-0-9., ]* ([-0-9.]+),([-0-9.]+)" fill="none"`)
		paths := pathRe.FindAllStringSubmatch(b.String(), -1)
		if len(paths) != len(g.Edges) {
			t.Fatalf("%d edge paths; want %d", len(paths), len(g.Edges))
		}
		onBorder := func(name string, x, y float64) bool {
			i := d.index[name]
			p, n := d.res.Nodes[i], d.in.Nodes[i]
			const eps = 0.06
			inX := x >= p.X-n.W/2-eps && x <= p.X+n.W/2+eps
			inY := y >= p.Y-n.H/2-eps && y <= p.Y+n.H/2+eps
			onX := abs(x-(p.X-n.W/2)) < eps || abs(x-(p.X+n.W/2)) < eps
			onY := abs(y-(p.Y-n.H/2)) < eps || abs(y-(p.Y+n.H/2)) < eps
			return inX && inY && (onX || onY)
		}
		ends := map[string]string{}
		for i, e := range g.Edges {
			f := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
			x1, y1, x2, y2 := f(paths[i][1]), f(paths[i][2]), f(paths[i][3]), f(paths[i][4])
			if !onBorder(e.From, x1, y1) || !onBorder(e.To, x2, y2) {
				t.Errorf("edge %+v runs from (%v,%v) to (%v,%v), not from box to box", e, x1, y1, x2, y2)
			}
			for _, p := range []string{paths[i][1] + "," + paths[i][2], paths[i][3] + "," + paths[i][4]} {
				if other, dup := ends[p]; dup && e.From != e.To {
					t.Errorf("edges %s and %+v end in the same point %s", other, e, p)
				}
				ends[p] = fmt.Sprintf("%+v", e)
			}
		}
	}
}
