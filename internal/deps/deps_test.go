package deps

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

// module is the import path prefix of our packages.
const module = "github.com/grapnel-io/grapnel/"

// rule says which of our folders a folder's packages may import (besides
// their own folder and, when leaves is set, the leaf packages under
// internal/). Folders are paths below the module; a folder covers its
// subfolders. Only the packages' own imports count, not their tests':
// integration tests (agent's against a real server, say) link what they
// exercise.
type rule struct {
	folder string
	may    []string
	leaves bool
	// notImported are packages (ours or not, with those below them) that
	// the folder's packages must not import themselves.
	notImported []string
	// notLinked are packages that must not be among the folder's
	// dependencies at all, directly or through others.
	notLinked []string
	why       string
}

// impure is what brief §2 keeps out of state and fsm: gRPC, gossip, the
// network and randomness (scripts/check-purity.sh checks the clock and
// goroutines in their source). Files (os) are kept out of their own
// imports only: fmt links os.
var impure = []string{"google.golang.org/grpc", "github.com/hashicorp/memberlist", "net", "math/rand", "math/rand/v2", "crypto/rand"}

// rules are the import rules of brief §2 ("Layout"), plus the leaf rule of
// issue 14: a package under internal/ imports only other leaves, so that
// anyone may import it.
var rules = []rule{
	// state links none of it, not even through a library. state/render,
	// the renderer that the planner and the CLI share, is held to the
	// same (issue 33).
	{folder: "state", why: "brief §2: state imports nothing of ours (pure model); issue 33: nor does the renderer, state/render",
		notImported: []string{"os"}, notLinked: append([]string{"github.com/hashicorp/raft"}, impure...)},
	// fsm implements raft.FSM, so it links Raft and what Raft links; it
	// must not use the impure parts itself.
	{folder: "fsm", may: []string{"state"}, why: "brief §2: fsm imports only state (deterministic)",
		notImported: append([]string{"os"}, impure...)},
	{folder: "cluster", may: []string{"fsm", "state"}, leaves: true, why: "brief §2: cluster imports fsm and state"},
	// graph is pure like state, so that the CLI and the server's
	// dashboard draw the same graph from the same state.
	{folder: "graph", may: []string{"state"}, leaves: true, why: "issue 15: graph imports state and leaves only (pure)",
		notImported: append([]string{"os"}, impure...)},
	// placement is pure like state: the allocator is a function of the
	// replicated state, run by the leader (docs/placement.md).
	{folder: "placement", may: []string{"state"}, why: "issue 16: placement imports only state (pure, deterministic)",
		notImported: append([]string{"os"}, impure...)},
	// access is pure like state: the agent and the server evaluate a
	// workload's control-interface rules with the same code (issue 17).
	{folder: "access", may: []string{"state", "rpc/ankbase", "workloadpolicy"}, leaves: true, why: "issue 17: access imports state, the Ankaios messages and leaves only (pure); issue 27: and the workload policy, for what widens a workload's privileges",
		notImported: append([]string{"os"}, impure...)},
	// workloadpolicy is pure like state: the agent, the server and the
	// widening check read a runtimeConfig with the same code (issue 27).
	{folder: "workloadpolicy", may: []string{"state"}, leaves: true, why: "issue 27: workloadpolicy imports state and leaves only (pure; internal/yamlnode reads runtimeConfigs as the runtimes do)",
		notImported: append([]string{"os", "os/user"}, impure...)},
	{folder: "server", may: []string{"state", "fsm", "cluster", "rpc", "placement", "access", "graph", "workloadpolicy"}, leaves: true, why: "brief §2: server imports state, fsm, cluster and rpc; issue 16: and the allocator (placement); issue 17: and the control-interface rules (access); issue 27: and the workload policy"},
	// The planner is a pure function of the store and the update, like
	// etcd's RawNode: the server owns its I/O. It describes a dry-run in
	// the Plan service's messages (rpc/grapnelpb), but links no server,
	// cluster or client code, reads no clock (the lock time comes in) and
	// opens nothing.
	{folder: "server/plan", may: []string{"state", "fsm", "placement", "access", "workloadpolicy", "rpc/grapnelpb"}, leaves: true,
		why:         "issue 33: the planner imports state, fsm, the allocator, the admission rules and the plan messages only (pure)",
		notImported: append([]string{"os", "time", module + "internal/clock"}, impure...),
		notLinked:   []string{module + "server", module + "cluster", module + "rpc/client", "github.com/hashicorp/memberlist"}},
	{folder: "rpc", may: []string{"state"}, leaves: true, why: "brief §2: rpc imports state"},
	{folder: "agent", may: []string{"state", "rpc", "access", "workloadpolicy"}, leaves: true, why: "brief §2: the agent imports state and rpc (so it links no cluster, server, fsm or Raft); issue 17: and the control-interface rules (access); issue 27: and the workload policy",
		notLinked: []string{"github.com/hashicorp/raft", module + "cluster", module + "server", module + "fsm"}},
	{folder: "internal", leaves: true, why: "issue 14: leaf packages import nothing of ours but other leaves"},
	// The product binaries link no test harness: chaos/ and what only it
	// needs (the FUSE library of chaos/flashfs, issue 29), nor what only
	// tests use (the browser driver, the linearizability checker; issue
	// 32, also checked on the built binary by scripts/check-linked.sh).
	{folder: "cmd", may: []string{""}, why: "brief §2: cmd wires everything; issue 29: but no test harness (chaos/, go-fuse); issue 32: nor a test-only library",
		notLinked: []string{module + "chaos", "github.com/hanwen/go-fuse", "github.com/chromedp", "github.com/anishathalye/porcupine"}},
	{folder: "chaos", may: []string{""}, why: "brief §2: chaos is test-only and may import everything"},
	// deploy/ is the shipped configuration and units; its only Go is the
	// test that follows docs/deploy.md (issue 31).
	{folder: "deploy", why: "issue 31: deploy has no Go code of its own, only the guide's test"},
	{folder: "cli", may: []string{""}, why: "docs/architecture.md: cli holds the commands of cmd/grapnel and may import all"},
}

// testSupport are the packages besides tests that may import
// internal/testwait: the test clusters other packages' tests build on.
// Code that runs in a server or an agent waits on events, not by polling.
var testSupport = []string{"cluster/clustertest", "server/testcluster", "rpc/rpctest", "internal/testwait"}

// pkg is one package as go list reports it.
type pkg struct {
	path    string
	imports []string
}

// listPackages returns every package ours depend on, with its imports.
func listPackages(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}", module+"...")
	cmd.Dir = "../.." // the module root, from internal/deps
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]pkg{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, imports, _ := strings.Cut(sc.Text(), "|")
		pkgs[path] = pkg{path: path, imports: strings.Fields(imports)}
	}
	return pkgs
}

// within reports whether the package below the module, rel, is in folder.
func within(rel, folder string) bool {
	return folder == "" || rel == folder || strings.HasPrefix(rel, folder+"/")
}

// ruleFor returns the rule of the folder that holds rel, the longest match.
func ruleFor(rel string) (rule, bool) {
	var best rule
	found := false
	for _, r := range rules {
		if within(rel, r.folder) && (!found || len(r.folder) > len(best.folder)) {
			best, found = r, true
		}
	}
	return best, found
}

// violations checks every package of ours in pkgs against rules and
// returns one line per broken rule.
func violations(pkgs map[string]pkg) []string {
	var bad []string
	for path, p := range pkgs {
		rel, ours := strings.CutPrefix(path, module)
		if !ours {
			continue
		}
		r, ok := ruleFor(rel)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s: no rule covers its folder; add one to the table", rel))
			continue
		}
		for _, imp := range p.imports {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours || within(dep, r.folder) || (r.leaves && within(dep, "internal")) ||
				slices.ContainsFunc(r.may, func(f string) bool { return within(dep, f) }) {
				continue
			}
			bad = append(bad, fmt.Sprintf("%s imports %s, but %s", rel, dep, r.why))
		}
		for _, imp := range p.imports {
			if slices.ContainsFunc(r.notImported, func(f string) bool { return imp == f || strings.HasPrefix(imp, f+"/") }) {
				bad = append(bad, fmt.Sprintf("%s imports %s, but %s", rel, imp, r.why))
			}
		}
		if slices.Contains(p.imports, module+"internal/testwait") && !slices.Contains(testSupport, rel) {
			bad = append(bad, fmt.Sprintf("%s imports internal/testwait, but only tests and the test-support packages may", rel))
		}
		if slices.Contains(p.imports, module+"internal/durable/crashfs") {
			bad = append(bad, fmt.Sprintf("%s imports internal/durable/crashfs, but only tests may: product code writes through durable.OS", rel))
		}
		for _, forbidden := range r.notLinked {
			if chain := linkChain(pkgs, path, forbidden); chain != nil {
				bad = append(bad, fmt.Sprintf("%s links %s (%s), but %s", rel, forbidden, strings.Join(chain, " → "), r.why))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// linkChain returns an import chain from the package from to a package
// that is target or lies below it, or nil when there is none.
func linkChain(pkgs map[string]pkg, from, target string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur != from && (cur == target || strings.HasPrefix(cur, target+"/")) {
			var chain []string
			for p := cur; p != ""; p = prev[p] {
				chain = append([]string{strings.TrimPrefix(p, module)}, chain...)
			}
			return chain
		}
		for _, imp := range pkgs[cur].imports {
			if _, seen := prev[imp]; !seen {
				prev[imp] = cur
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

// The packages keep the import rules of the brief.
func TestImportRules(t *testing.T) {
	pkgs := listPackages(t)
	if _, ok := pkgs[module+"state"]; !ok {
		t.Fatalf("go list did not report %sstate; the test runs from the wrong place", module)
	}
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
}

// The check catches a broken rule of each kind.
func TestImportRulesCatchViolations(t *testing.T) {
	m := func(rel string) string { return module + rel }
	tests := []struct {
		name string
		pkgs []pkg
		want string
	}{
		{"state imports ours", []pkg{{m("state"), []string{m("internal/clock")}}}, "state imports internal/clock"},
		{"fsm imports a leaf", []pkg{{m("fsm"), []string{m("state"), m("internal/errs")}}}, "fsm imports internal/errs"},
		{"cluster imports rpc", []pkg{{m("cluster"), []string{m("fsm"), m("rpc")}}}, "cluster imports rpc"},
		{"rpc imports server", []pkg{{m("rpc/client"), []string{m("rpc"), m("server/clock")}}}, "rpc/client imports server/clock"},
		{"agent imports cluster", []pkg{{m("agent"), []string{m("rpc"), m("cluster/gossipmeta")}}}, "agent imports cluster/gossipmeta"},
		{"server imports agent", []pkg{{m("server"), []string{m("cluster"), m("agent/runtime")}}}, "server imports agent/runtime"},
		{"a leaf imports rpc", []pkg{{m("internal/clock"), []string{m("rpc")}}}, "internal/clock imports rpc"},
		{"agent links raft through a leaf", []pkg{
			{m("agent"), []string{m("internal/errs")}},
			{m("internal/errs"), []string{"github.com/hashicorp/raft"}},
		}, "agent links github.com/hashicorp/raft (agent → internal/errs → github.com/hashicorp/raft)"},
		{"state links the network", []pkg{{m("state"), []string{"gopkg.in/yaml.v3"}}, {"gopkg.in/yaml.v3", []string{"net"}}}, "state links net (state → gopkg.in/yaml.v3 → net)"},
		{"fsm uses randomness", []pkg{{m("fsm"), []string{m("state"), "math/rand/v2"}}}, "fsm imports math/rand/v2"},
		{"a folder without a rule", []pkg{{m("newthing"), nil}}, "newthing: no rule covers its folder"},
		{"the planner imports the server", []pkg{{m("server/plan"), []string{m("state"), m("server/secrets")}}}, "server/plan imports server/secrets"},
		{"the planner reads the clock", []pkg{{m("server/plan"), []string{m("state"), m("internal/clock")}}}, "server/plan imports github.com/grapnel-io/grapnel/internal/clock"},
		{"the planner links the cluster", []pkg{
			{m("server/plan"), []string{m("fsm")}},
			{m("fsm"), []string{m("cluster")}},
		}, "server/plan links github.com/grapnel-io/grapnel/cluster"},
		{"the renderer imports ours", []pkg{{m("state/render"), []string{m("state"), m("internal/errs")}}}, "state/render imports internal/errs"},
		{"access imports rpc", []pkg{{m("access"), []string{m("state"), m("rpc")}}}, "access imports rpc"},
		{"access uses the network", []pkg{{m("access"), []string{m("state"), "net"}}}, "access imports net"},
		{"workloadpolicy imports rpc", []pkg{{m("workloadpolicy"), []string{m("state"), m("rpc")}}}, "workloadpolicy imports rpc"},
		{"workloadpolicy resolves users", []pkg{{m("workloadpolicy"), []string{m("state"), "os/user"}}}, "workloadpolicy imports os/user"},
		{"server code waits as a test", []pkg{{m("server"), []string{m("internal/testwait")}}}, "server imports internal/testwait, but only tests"},
		{"agent code writes to the crash model", []pkg{{m("agent"), []string{m("internal/durable/crashfs")}}}, "agent imports internal/durable/crashfs, but only tests"},
		{"a product binary links the flash file system", []pkg{
			{m("cmd/grapnel-server"), []string{m("cluster")}},
			{m("cluster"), []string{"github.com/hanwen/go-fuse/v2/fs"}},
		}, "cmd/grapnel-server links github.com/hanwen/go-fuse (cmd/grapnel-server → cluster → github.com/hanwen/go-fuse/v2/fs)"},
		{"a product binary links the browser driver", []pkg{
			{m("cmd/grapnel"), []string{m("cmd/internal/servercmd")}},
			{m("cmd/internal/servercmd"), []string{"github.com/chromedp/chromedp"}},
		}, "cmd/grapnel links github.com/chromedp (cmd/grapnel → cmd/internal/servercmd → github.com/chromedp/chromedp)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pkgs := map[string]pkg{}
			for _, p := range tc.pkgs {
				pkgs[p.path] = p
			}
			got := violations(pkgs)
			if !slices.ContainsFunc(got, func(v string) bool { return strings.HasPrefix(v, tc.want) }) {
				t.Fatalf("violations = %q, want one starting %q", got, tc.want)
			}
		})
	}
	// What the rules allow passes.
	ok := map[string]pkg{
		m("agent"):                  {m("agent"), []string{m("agent/runtime"), m("rpc/client"), m("state"), m("internal/gossipmeta")}},
		m("server"):                 {m("server"), []string{m("server/plan"), m("cluster"), m("fsm"), m("rpc/wire"), m("internal/clock")}},
		m("server/plan"):            {m("server/plan"), []string{m("state"), m("state/render"), m("fsm"), m("placement"), m("rpc/grapnelpb"), m("internal/errs")}},
		m("internal/errs"):          {m("internal/errs"), []string{"errors"}},
		m("fsm"):                    {m("fsm"), []string{m("state"), "github.com/hashicorp/raft"}},
		"github.com/hashicorp/raft": {"github.com/hashicorp/raft", []string{"net", "math/rand"}},
		m("cmd/grapnel"):            {m("cmd/grapnel"), []string{m("server"), m("agent")}},
		m("cluster/clustertest"):    {m("cluster/clustertest"), []string{m("cluster"), m("internal/testwait")}},
	}
	if got := violations(ok); len(got) != 0 {
		t.Fatalf("allowed imports reported: %q", got)
	}
}
