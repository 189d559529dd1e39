package graph

import (
	"bytes"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// dotStructure reads back what WriteDOT wrote: the cluster of each node
// statement ("" outside any) and the attribute lists of the edges.
type dotStructure struct {
	clusters map[string][]string // cluster name → node names
	nodeIn   map[string]string   // node name → cluster name
	edges    map[string]string   // "from -> to" (kind prefix) → attributes
}

var (
	clusterLine = regexp.MustCompile(`^\s*subgraph "cluster_([^"]*)" \{$`)
	nodeLine    = regexp.MustCompile(`^\s*"([^"]+)" \[(.*)\];$`)
	edgeLine    = regexp.MustCompile(`^\s*"([^"]+)" -> "([^"]+)" \[(.*)\];$`)
)

func parseDOT(t *testing.T, src string) dotStructure {
	t.Helper()
	if !strings.Contains(src, "digraph grapnel {\n") || !strings.HasSuffix(src, "}\n") {
		t.Fatalf("not a digraph:\n%s", src)
	}
	// Braces balance outside quoted strings.
	depth, inQuote := 0, false
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case c == '\\' && inQuote:
			i++
		case c == '"':
			inQuote = !inQuote
		case c == '{' && !inQuote:
			depth++
		case c == '}' && !inQuote:
			depth--
		}
	}
	if depth != 0 || inQuote {
		t.Fatalf("unbalanced braces (%d) or quotes (%v):\n%s", depth, inQuote, src)
	}
	s := dotStructure{clusters: map[string][]string{}, nodeIn: map[string]string{}, edges: map[string]string{}}
	cluster := ""
	for _, l := range strings.Split(src, "\n") {
		if m := clusterLine.FindStringSubmatch(l); m != nil {
			cluster = m[1]
			s.clusters[cluster] = []string{}
			continue
		}
		if strings.TrimSpace(l) == "}" {
			cluster = ""
			continue
		}
		if m := edgeLine.FindStringSubmatch(l); m != nil {
			kind := "dep "
			if strings.Contains(m[3], "constraint=false") {
				kind = "del "
			}
			s.edges[kind+m[1]+" -> "+m[2]] = m[3]
			continue
		}
		if m := nodeLine.FindStringSubmatch(l); m != nil {
			if _, dup := s.nodeIn[m[1]]; dup {
				t.Errorf("node %q written twice", m[1])
			}
			s.nodeIn[m[1]] = cluster
			if cluster != "" {
				s.clusters[cluster] = append(s.clusters[cluster], m[1])
			}
		}
	}
	return s
}

func TestWriteDOT(t *testing.T) {
	g := Build(bigInput())
	var b bytes.Buffer
	if err := WriteDOT(&b, g); err != nil {
		t.Fatal(err)
	}
	s := parseDOT(t, b.String())

	// One cluster per agent, holding exactly the agent's workloads.
	if len(s.clusters) != len(g.Agents) {
		t.Errorf("clusters %v; want one per agent %v", s.clusters, g.Agents)
	}
	for _, a := range g.Agents {
		if got := strings.Join(s.clusters[a.Name], ","); got != strings.Join(a.Workloads, ",") {
			t.Errorf("cluster_%s holds %q; want %q", a.Name, got, strings.Join(a.Workloads, ","))
		}
	}
	// Every node once; those without agent outside any cluster.
	if len(s.nodeIn) != len(g.Nodes) {
		t.Errorf("%d node statements; want %d", len(s.nodeIn), len(g.Nodes))
	}
	for _, n := range []string{"ghost", "lone"} {
		if c, ok := s.nodeIn[n]; !ok || c != "" {
			t.Errorf("node %s in cluster %q (present %v); want outside", n, c, ok)
		}
	}
	// Every edge, labelled; delete edges dashed and not ranked; cycles
	// red; the missing dependency dashed red.
	if len(s.edges) != len(g.Edges) {
		t.Errorf("%d edges; want %d: %v", len(s.edges), len(g.Edges), s.edges)
	}
	wantEdges := map[string][]string{
		"dep web -> init": {`label="succeeded"`},
		"dep web -> db":   {`label="running"`},
		"del db -> web":   {`label="not pending nor running"`, "style=dashed", "constraint=false"},
		"dep x -> y":      {`label="failed"`, `color="` + cycleColour + `"`, "penwidth=2"},
		"dep y -> x":      {`color="` + cycleColour + `"`},
		"dep x -> ghost":  {"style=dashed", `color="` + missingStyle.Stroke + `"`},
	}
	for e, attrs := range wantEdges {
		got, ok := s.edges[e]
		if !ok {
			t.Errorf("edge %s missing", e)
			continue
		}
		for _, a := range attrs {
			if !strings.Contains(got, a) {
				t.Errorf("edge %s attributes [%s] lack %s", e, got, a)
			}
		}
	}
	for _, want := range []string{
		`label="db\nRunning(Ok)"`, `fillcolor="#c8e6c9"`, // running is green
		`label="ghost\nmissing"`, `label="lone\nno state"`,
		`label="C (not connected)"`,
		`"old" [label="old\nStopping(WaitingToStop)", style="rounded,filled,dashed"`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("DOT lacks %s", want)
		}
	}
}

// Text from the state is quoted so that it cannot end a string or start
// an escape.
func TestDOTQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{`plain`, `"plain"`},
		{`say "hi"`, `"say \"hi\""`},
		{`C:\dir`, `"C:\\dir"`},
		{"two\nlines\r", `"two\nlines"`},
	}
	for _, tt := range tests {
		if got := quote(tt.in); got != tt.want {
			t.Errorf("quote(%q) = %s; want %s", tt.in, got, tt.want)
		}
	}
	if got := quoteLines("a", `b"`); got != `"a\nb\""` {
		t.Errorf("quoteLines = %s", got)
	}
}

// When Graphviz is installed, it reads the DOT without complaint and
// draws every node and edge. The test does not need Graphviz.
func TestDOTWithGraphviz(t *testing.T) {
	dot, err := exec.LookPath("dot")
	if err != nil {
		t.Skip("Graphviz dot is not installed")
	}
	in := bigInput()
	in.States.Set(state.InstanceName{WorkloadName: "db", AgentName: "A", ID: "1"},
		state.ExecutionState{State: state.StateRunning, SubState: state.SubOk, AdditionalInfo: `odd "text" \ with <xml> & a` + "\nnewline"})
	g := Build(in)
	var src bytes.Buffer
	if err := WriteDOT(&src, g); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(dot, "-Tsvg")
	cmd.Stdin = &src
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("dot: %v\n%s\n%s", err, stderr.String(), src.String())
	}
	if n := strings.Count(out.String(), `class="node"`); n != len(g.Nodes) {
		t.Errorf("Graphviz drew %d nodes; want %d", n, len(g.Nodes))
	}
	if n := strings.Count(out.String(), `class="edge"`); n != len(g.Edges) {
		t.Errorf("Graphviz drew %d edges; want %d", n, len(g.Edges))
	}
	if n := strings.Count(out.String(), `class="cluster"`); n != len(g.Agents) {
		t.Errorf("Graphviz drew %d clusters; want %d", n, len(g.Agents))
	}
}
