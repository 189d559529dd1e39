package ui

import (
	"sort"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/graph"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/server/secrets"
	"github.com/grapnel-io/grapnel/state"
)

// Overview is what the main page shows; the events stream sends it
// whole on every change.
type Overview struct {
	// Replica is the replica serving the page.
	Replica string `json:"replica"`
	Leader  string `json:"leader"`
	Term    uint64 `json:"term"`
	// Applied is the Raft index of this replica's store.
	Applied uint64 `json:"applied"`
	// AgentReleases is true when this replica knows the agents' releases:
	// it leads, and heard their hellos. A follower's page names none.
	AgentReleases bool       `json:"agentReleases"`
	Replicas      []Replica  `json:"replicas"`
	Agents        []Agent    `json:"agents"`
	Workloads     []Workload `json:"workloads"`
	// Problems are the open problems of the problems view (replicated:
	// every replica's page shows the same), oldest first.
	Problems []Problem `json:"problems"`
}

// Problem is one open problem, as `grapnel get problems -o json` shows it.
type Problem struct {
	ID      uint64 `json:"id"`
	Kind    string `json:"kind"`
	SinceMs int64  `json:"sinceMs"`
	// LastUpdatedMs is when its objects and descriptions last changed.
	LastUpdatedMs int64 `json:"lastUpdatedMs"`
	// Objects are "kind name" pairs: "replica n3", "workload db".
	Objects []string `json:"objects"`
	Summary string   `json:"summary"`
	Detail  string   `json:"detail,omitempty"`
}

// Replica is one member of the cluster as this replica sees it.
type Replica struct {
	ID      string `json:"id"`
	Role    string `json:"role"`
	Leader  bool   `json:"leader"`
	Healthy bool   `json:"healthy"`
	// LastContactMs is how long ago the leader heard from it; -1 when
	// unknown (only the leader knows it).
	LastContactMs int64  `json:"lastContactMs"`
	GRPCAddress   string `json:"grpc"`
	UIAddress     string `json:"ui"`
	Gossip        string `json:"gossip"`
	// Release is the release its gossip metadata announces; empty while
	// gossip does not know the member.
	Release string `json:"release"`
	// StorageFailed is its storage fault in a few words, empty while its
	// storage works (docs/operations.md, "Failed storage").
	StorageFailed string `json:"storageFailed,omitempty"`
}

// Agent is one agent: connected or named by a workload.
type Agent struct {
	Name      string `json:"name"`
	Mode      string `json:"mode"`
	Connected bool   `json:"connected"`
	// CPUUsage and FreeMemory are the last load report; nil until one.
	CPUUsage   *uint32 `json:"cpu,omitempty"`
	FreeMemory *uint64 `json:"freeMemory,omitempty"`
	Workloads  int     `json:"workloads"`
	// Release is the release its hello to the leader announced (or
	// ankaios, unknown, invalid: server.ReleaseAnkaios...); empty on a
	// follower's page and for an agent that has not said hello to this
	// leader.
	Release string `json:"release,omitempty"`
}

// Workload is one instance of a workload, or a workload with none.
type Workload struct {
	Name     string `json:"name"`
	Agent    string `json:"agent"`
	Instance string `json:"instance"`
	Runtime  string `json:"runtime"`
	State    string `json:"state"`
	SubState string `json:"subState"`
	Info     string `json:"info,omitempty"`
}

// Detail is one workload's page.
type Detail struct {
	Name string `json:"name"`
	// Instances are its instances with their states.
	Instances []Workload `json:"instances"`
	Runtime   string     `json:"runtime"`
	// RenderedConfig is the runtimeConfig as agents get it, every secret
	// shown as secrets.Mask.
	RenderedConfig string `json:"renderedConfig"`
	// Files are the mount points of its files (contents are not shown:
	// they may carry secrets too).
	Files        []string                   `json:"files,omitempty"`
	Dependencies map[string]string          `json:"dependencies,omitempty"`
	Timeline     []*grapnelpb.TimelineEvent `json:"timeline"`
}

// overview builds the main view from the members, the store, the
// agents' releases (nil when this replica does not lead) and their load
// reports as the leader knows them (nil when unknown).
func overview(self, leader string, term, applied uint64, members []cluster.Member, st *state.Store, releases map[string]string,
	loads map[string]state.AgentStatus) Overview {
	o := Overview{Replica: self, Leader: leader, Term: term, Applied: applied, AgentReleases: releases != nil,
		Replicas: []Replica{}, Agents: []Agent{}, Workloads: []Workload{}, Problems: []Problem{}}
	for _, p := range st.Problems.List() {
		row := Problem{ID: p.ID, Kind: p.Kind, SinceMs: p.SinceMs, LastUpdatedMs: p.LastUpdatedMs(), Objects: []string{}, Summary: p.Summary, Detail: p.Detail}
		for _, ob := range p.Objects {
			row.Objects = append(row.Objects, ob.Kind+" "+ob.Name)
		}
		o.Problems = append(o.Problems, row)
	}
	for _, m := range members {
		o.Replicas = append(o.Replicas, Replica{ID: m.ID, Role: m.Role, Leader: m.Leader, Healthy: m.Healthy,
			LastContactMs: contactMs(m), GRPCAddress: m.GRPCAddress, UIAddress: m.UIAddress, Gossip: m.GossipStatus, Release: m.Version,
			StorageFailed: m.StorageFailed})
	}
	agents := map[string]*Agent{}
	agent := func(name string) *Agent {
		a := agents[name]
		if a == nil {
			a = &Agent{Name: name, Mode: st.AgentMode(name).String()}
			agents[name] = a
		}
		return a
	}
	for name, attrs := range st.Agents {
		a := agent(name)
		a.Connected = true
		if attrs != nil {
			a.CPUUsage, a.FreeMemory = attrs.Status.CPUUsage, attrs.Status.FreeMemory
		}
		// The store holds no load (it is leader memory only): the
		// leader's answer fills it.
		if l, ok := loads[name]; ok {
			a.CPUUsage, a.FreeMemory = l.CPUUsage, l.FreeMemory
		}
	}
	for name, w := range st.Desired.Workloads {
		insts := st.Instances(name)
		if len(insts) == 0 {
			o.Workloads = append(o.Workloads, Workload{Name: name, Agent: w.Agent, Runtime: w.Runtime, State: "-"})
			continue
		}
		for _, in := range insts {
			row := Workload{Name: name, Agent: in.AgentName, Instance: in.ID, Runtime: w.Runtime, State: "-"}
			if es, ok := st.States.Get(in); ok {
				row.State, row.SubState, row.Info = string(es.State), es.SubState, es.AdditionalInfo
			}
			o.Workloads = append(o.Workloads, row)
			if in.AgentName != "" {
				agent(in.AgentName).Workloads++
			}
		}
	}
	for name, a := range agents {
		a.Release = releases[name]
		o.Agents = append(o.Agents, *a)
	}
	sort.Slice(o.Agents, func(i, j int) bool { return o.Agents[i].Name < o.Agents[j].Name })
	sort.Slice(o.Workloads, func(i, j int) bool {
		a, b := o.Workloads[i], o.Workloads[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Agent < b.Agent
	})
	return o
}

func contactMs(m cluster.Member) int64 {
	if m.LastContact < 0 {
		return -1
	}
	return m.LastContact.Milliseconds()
}

// detail builds a workload's view; ok is false when the desired state has
// no such workload.
func detail(name string, st *state.Store, timeline func(*state.History, string) []*grapnelpb.TimelineEvent) (Detail, bool) {
	w, ok := st.Desired.Workloads[name]
	if !ok {
		return Detail{}, false
	}
	d := Detail{Name: name, Runtime: w.Runtime, Instances: []Workload{}, Timeline: []*grapnelpb.TimelineEvent{}}
	rendered := w
	if r, ok := st.Rendered[name]; ok && r.Workload != nil {
		rendered = r.Workload
	}
	// The rendering carries sealed tokens where secrets go; the mask
	// replaces them, and nothing here can open them.
	d.RenderedConfig = secrets.MaskTokens(rendered.RuntimeConfig)
	for _, f := range rendered.Files {
		d.Files = append(d.Files, f.MountPoint)
	}
	if len(w.Dependencies) > 0 {
		d.Dependencies = map[string]string{}
		for dep, c := range w.Dependencies {
			d.Dependencies[dep] = string(c)
		}
	}
	for _, in := range st.Instances(name) {
		row := Workload{Name: name, Agent: in.AgentName, Instance: in.ID, Runtime: w.Runtime, State: "-"}
		if es, ok := st.States.Get(in); ok {
			row.State, row.SubState, row.Info = string(es.State), es.SubState, es.AdditionalInfo
		}
		d.Instances = append(d.Instances, row)
	}
	if st.History != nil && timeline != nil {
		if ev := timeline(st.History, name); ev != nil {
			d.Timeline = ev
		}
	}
	return d, true
}

// graphOf is the dependency graph of the store: the desired workloads
// with their rendered agents, the instance states, the connected agents
// and the replicated delete graph, so that deleted workloads still
// stopping show too.
func graphOf(st *state.Store) *graph.Graph { return graph.Build(graph.FromStore(st)) }
