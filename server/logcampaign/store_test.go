package logcampaign

import (
	"reflect"
	"slices"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// sorted returns a sorted copy, so expectations can be listed by meaning.
func sorted(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

func inst(workload, agent string) state.InstanceName {
	return state.InstanceName{WorkloadName: workload, AgentName: agent, ID: "id-" + workload}
}

const (
	cli1   = "cli-conn-1@req_1"
	cli1b  = "cli-conn-1@req_2"
	cli2   = "cli-conn-2@req_1"
	cmd1   = "commander-conn-7@req_9"
	wlA1   = "agent_A@collector_1@42"
	wlA1b  = "agent_A@collector_1@43"
	wlA2   = "agent_A@collector_2@42"
	wlB3   = "agent_B@collector_3@42"
	wlAtID = "agent_B@collector_3@id@with@ats"
)

// fixture fills a store with campaigns collected by CLIs and by workloads
// on agent_A and agent_B, providing from agent_A, agent_B and agent_C.
func fixture() *Store {
	s := NewStore()
	s.Insert(cli1, []state.InstanceName{inst("p1", "agent_A"), inst("p2", "agent_B")})
	s.Insert(cli1b, []state.InstanceName{inst("p3", "agent_C")})
	s.Insert(cli2, []state.InstanceName{inst("p1", "agent_A")})
	s.Insert(cmd1, []state.InstanceName{inst("p2", "agent_B")})
	s.Insert(wlA1, []state.InstanceName{inst("p2", "agent_B"), inst("p3", "agent_C")})
	s.Insert(wlA1b, []state.InstanceName{inst("p1", "agent_A")})
	s.Insert(wlA2, []state.InstanceName{inst("p2", "agent_B")})
	s.Insert(wlB3, []state.InstanceName{inst("p1", "agent_A"), inst("p4", "agent_A"), inst("p2", "agent_B")})
	return s
}

// checkIndexes asserts that every index agrees with the campaigns, so no
// operation leaves a dangling or missing entry behind.
func checkIndexes(t *testing.T, s *Store) {
	t.Helper()
	want := NewStore()
	for id, c := range s.campaigns {
		if c.collector.isWorkload {
			indexAdd(want.byCollectorAgent, c.collector.workload.agent, id)
			indexAdd(want.byCollectorWorkload, c.collector.workload, id)
		} else {
			indexAdd(want.byConnection, c.collector.connection, id)
		}
		for agent, list := range c.providers {
			if len(list) == 0 {
				t.Errorf("campaign %s keeps an empty provider list for %s", id, agent)
			}
			indexAdd(want.byProviderAgent, agent, id)
		}
	}
	if !reflect.DeepEqual(s.byConnection, want.byConnection) {
		t.Errorf("byConnection = %v, want %v", s.byConnection, want.byConnection)
	}
	if !reflect.DeepEqual(s.byCollectorAgent, want.byCollectorAgent) {
		t.Errorf("byCollectorAgent = %v, want %v", s.byCollectorAgent, want.byCollectorAgent)
	}
	if !reflect.DeepEqual(s.byCollectorWorkload, want.byCollectorWorkload) {
		t.Errorf("byCollectorWorkload = %v, want %v", s.byCollectorWorkload, want.byCollectorWorkload)
	}
	if !reflect.DeepEqual(s.byProviderAgent, want.byProviderAgent) {
		t.Errorf("byProviderAgent = %v, want %v", s.byProviderAgent, want.byProviderAgent)
	}
}

// swdd~server-log-campaign-store-holds-log-campaign-metadata~1
func TestParseCollector(t *testing.T) {
	tests := []struct {
		id   string
		want collector
	}{
		{"cli-conn-1@req", collector{connection: "cli-conn-1"}},
		{"commander-conn-x@req", collector{connection: "commander-conn-x"}},
		{"agent_A@wl@42", collector{isWorkload: true, workload: workloadKey{"agent_A", "wl"}}},
		{"agent_A@wl@id@with@ats", collector{isWorkload: true, workload: workloadKey{"agent_A", "wl"}}},
		{"no-prefix", collector{connection: "no-prefix"}},
		{"", collector{connection: ""}},
	}
	for _, tt := range tests {
		if got := parseCollector(tt.id); got != tt.want {
			t.Errorf("parseCollector(%q) = %+v, want %+v", tt.id, got, tt.want)
		}
	}
}

// swdd~server-log-campaign-store-holds-log-campaign-metadata~1
func TestInsert(t *testing.T) {
	tests := []struct {
		name      string
		inserts   []string
		providers []state.InstanceName
		want      []string
	}{
		{"cli campaign", []string{cli1}, []state.InstanceName{inst("p1", "agent_A")}, []string{cli1}},
		{"two campaigns of one cli", []string{cli1, cli1b}, []state.InstanceName{inst("p1", "agent_A")}, []string{cli1, cli1b}},
		{"workload campaign", []string{wlA1}, []state.InstanceName{inst("p1", "agent_B")}, []string{wlA1}},
		{"workload id with @", []string{wlAtID}, []state.InstanceName{inst("p1", "agent_A")}, []string{wlAtID}},
		{"no providers", []string{cli2}, nil, []string{cli2}},
		{"same id twice is one campaign", []string{wlA1, wlA1}, []state.InstanceName{inst("p1", "agent_B")}, []string{wlA1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStore()
			for _, id := range tt.inserts {
				s.Insert(id, tt.providers)
			}
			if got := s.Campaigns(); !slices.Equal(got, sorted(tt.want)) {
				t.Errorf("Campaigns() = %v, want %v", got, tt.want)
			}
			checkIndexes(t, s)
		})
	}
}

// A re-insert replaces the providers: the old provider agent must no longer
// lead to the campaign.
func TestInsertReplacesProviders(t *testing.T) {
	s := NewStore()
	s.Insert(cli1, []state.InstanceName{inst("p1", "agent_A")})
	s.Insert(cli1, []state.InstanceName{inst("p2", "agent_B")})
	checkIndexes(t, s)
	if _, stopped := s.RemoveByAgent("agent_A"); len(stopped) != 0 {
		t.Errorf("agent_A still provides for %v after re-insert", stopped)
	}
	_, stopped := s.RemoveByAgent("agent_B")
	if want := map[string][]state.InstanceName{cli1: {inst("p2", "agent_B")}}; !reflect.DeepEqual(stopped, want) {
		t.Errorf("stopped = %v, want %v", stopped, want)
	}
}

// swdd~server-handles-logs-cancel-request-message~1
// swdd~server-log-campaign-store-holds-log-campaign-metadata~1
func TestRemove(t *testing.T) {
	tests := []struct {
		name string
		id   string
		ok   bool
		left []string
	}{
		{"cli campaign", cli1, true, []string{cli1b, cli2, cmd1, wlA1, wlA1b, wlA2, wlB3}},
		{"workload campaign", wlA1, true, []string{cli1, cli1b, cli2, cmd1, wlA1b, wlA2, wlB3}},
		{"unknown id", "cli-conn-9@req", false, []string{cli1, cli1b, cli2, cmd1, wlA1, wlA1b, wlA2, wlB3}},
		{"id without prefix", "req_1", false, []string{cli1, cli1b, cli2, cmd1, wlA1, wlA1b, wlA2, wlB3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fixture()
			if got := s.Remove(tt.id); got != tt.ok {
				t.Errorf("Remove(%q) = %v, want %v", tt.id, got, tt.ok)
			}
			if got := s.Campaigns(); !slices.Equal(got, sorted(tt.left)) {
				t.Errorf("Campaigns() = %v, want %v", got, tt.left)
			}
			if tt.ok && s.Remove(tt.id) {
				t.Errorf("second Remove(%q) reported the campaign still there", tt.id)
			}
			checkIndexes(t, s)
		})
	}
}

// swdd~server-cancels-log-campaign-for-disconnected-cli~1
// swdd~server-log-campaign-store-holds-log-campaign-metadata~1
func TestRemoveByConnection(t *testing.T) {
	tests := []struct {
		name    string
		conn    string
		removed []string
		left    []string
	}{
		{"cli with two campaigns", "cli-conn-1", []string{cli1, cli1b}, []string{cli2, cmd1, wlA1, wlA1b, wlA2, wlB3}},
		{"commander connection", "commander-conn-7", []string{cmd1}, []string{cli1, cli1b, cli2, wlA1, wlA1b, wlA2, wlB3}},
		{"unknown connection", "cli-conn-9", nil, []string{cli1, cli1b, cli2, cmd1, wlA1, wlA1b, wlA2, wlB3}},
		{"agent name is no connection", "agent_A", nil, []string{cli1, cli1b, cli2, cmd1, wlA1, wlA1b, wlA2, wlB3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fixture()
			if got := s.RemoveByConnection(tt.conn); !slices.Equal(got, tt.removed) {
				t.Errorf("RemoveByConnection(%q) = %v, want %v", tt.conn, got, tt.removed)
			}
			if got := s.Campaigns(); !slices.Equal(got, sorted(tt.left)) {
				t.Errorf("Campaigns() = %v, want %v", got, tt.left)
			}
			if got := s.RemoveByConnection(tt.conn); len(got) != 0 {
				t.Errorf("second RemoveByConnection(%q) = %v, want none", tt.conn, got)
			}
			checkIndexes(t, s)
		})
	}
}

// swdd~server-cancels-log-campaign-for-deleted-workloads~1
// swdd~server-log-campaign-store-holds-log-campaign-metadata~1
func TestRemoveByWorkload(t *testing.T) {
	tests := []struct {
		name     string
		agent    string
		workload string
		removed  []string
		left     []string
	}{
		{"collector with two campaigns", "agent_A", "collector_1", []string{wlA1, wlA1b}, []string{cli1, cli1b, cli2, cmd1, wlA2, wlB3}},
		{"other collector on same agent", "agent_A", "collector_2", []string{wlA2}, []string{cli1, cli1b, cli2, cmd1, wlA1, wlA1b, wlB3}},
		{"same name on another agent", "agent_B", "collector_1", nil, []string{cli1, cli1b, cli2, cmd1, wlA1, wlA1b, wlA2, wlB3}},
		{"provider only", "agent_A", "p1", nil, []string{cli1, cli1b, cli2, cmd1, wlA1, wlA1b, wlA2, wlB3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fixture()
			if got := s.RemoveByWorkload(tt.agent, tt.workload); !slices.Equal(got, tt.removed) {
				t.Errorf("RemoveByWorkload(%q, %q) = %v, want %v", tt.agent, tt.workload, got, tt.removed)
			}
			if got := s.Campaigns(); !slices.Equal(got, sorted(tt.left)) {
				t.Errorf("Campaigns() = %v, want %v", got, tt.left)
			}
			checkIndexes(t, s)
		})
	}
}

// swdd~server-handles-log-campaign-for-disconnected-agent~1
// swdd~server-log-campaign-store-holds-log-campaign-metadata~1
func TestRemoveByAgent(t *testing.T) {
	tests := []struct {
		name       string
		agent      string
		collectors []string
		stopped    map[string][]state.InstanceName
		left       []string
	}{
		{
			name: "agent collecting and providing",
			// The campaigns collected on agent_A are cancelled, including
			// wlA1b whose provider is on agent_A too: nobody needs a stop.
			// cli2 asked agent_A only: it is over.
			agent:      "agent_A",
			collectors: []string{wlA1, wlA1b, wlA2},
			stopped: map[string][]state.InstanceName{
				cli1: {inst("p1", "agent_A")},
				cli2: {inst("p1", "agent_A")},
				wlB3: {inst("p1", "agent_A"), inst("p4", "agent_A")},
			},
			left: []string{cli1, cli1b, cmd1, wlB3},
		},
		{
			name:       "agent providing only to others",
			agent:      "agent_C",
			collectors: nil,
			stopped: map[string][]state.InstanceName{
				cli1b: {inst("p3", "agent_C")},
				wlA1:  {inst("p3", "agent_C")},
			},
			left: []string{cli1, cli2, cmd1, wlA1, wlA1b, wlA2, wlB3},
		},
		{
			name:       "unknown agent",
			agent:      "agent_Z",
			collectors: nil,
			stopped:    map[string][]state.InstanceName{},
			left:       []string{cli1, cli1b, cli2, cmd1, wlA1, wlA1b, wlA2, wlB3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fixture()
			collectors, stopped := s.RemoveByAgent(tt.agent)
			if !slices.Equal(collectors, tt.collectors) {
				t.Errorf("collectorIDs = %v, want %v", collectors, tt.collectors)
			}
			if !reflect.DeepEqual(stopped, tt.stopped) {
				t.Errorf("stopped = %v, want %v", stopped, tt.stopped)
			}
			if got := s.Campaigns(); !slices.Equal(got, sorted(tt.left)) {
				t.Errorf("Campaigns() = %v, want %v", got, tt.left)
			}
			checkIndexes(t, s)
			// The providers are gone: a second loss of the agent has nothing to stop.
			if c, st := s.RemoveByAgent(tt.agent); len(c) != 0 || len(st) != 0 {
				t.Errorf("second RemoveByAgent = %v, %v, want nothing", c, st)
			}
		})
	}
}

// Providers on other agents survive the loss of one agent, so a later loss
// of those agents still produces their stop responses.
func TestRemoveByAgentKeepsOtherProviders(t *testing.T) {
	s := fixture()
	s.RemoveByAgent("agent_A")
	collectors, stopped := s.RemoveByAgent("agent_B")
	if !slices.Equal(collectors, []string{wlB3}) {
		t.Errorf("collectorIDs = %v, want [%s]", collectors, wlB3)
	}
	want := map[string][]state.InstanceName{
		cli1: {inst("p2", "agent_B")},
		cmd1: {inst("p2", "agent_B")},
	}
	if !reflect.DeepEqual(stopped, want) {
		t.Errorf("stopped = %v, want %v", stopped, want)
	}
	checkIndexes(t, s)
}

// Duplicated providers in a request give one stop response each, in order.
func TestInsertDeduplicatesProviders(t *testing.T) {
	s := NewStore()
	s.Insert(cli1, []state.InstanceName{inst("b", "agent_A"), inst("a", "agent_A"), inst("b", "agent_A")})
	_, stopped := s.RemoveByAgent("agent_A")
	want := map[string][]state.InstanceName{cli1: {inst("a", "agent_A"), inst("b", "agent_A")}}
	if !reflect.DeepEqual(stopped, want) {
		t.Errorf("stopped = %v, want %v", stopped, want)
	}
}

// Only the agent a live campaign asked for an instance provides it: log
// responses from anyone else are dropped by the server.
//
// swdd~server-log-campaign-store-holds-log-campaign-metadata~1
func TestProvides(t *testing.T) {
	s := fixture()
	tests := []struct {
		name  string
		id    string
		agent string
		inst  state.InstanceName
		want  bool
	}{
		{"the hosting agent, its instance", cli1, "agent_A", inst("p1", "agent_A"), true},
		{"the other provider, its instance", cli1, "agent_B", inst("p2", "agent_B"), true},
		{"another provider's instance", cli1, "agent_A", inst("p2", "agent_B"), false},
		{"an agent the campaign did not ask", cli1, "agent_C", inst("p1", "agent_A"), false},
		{"an instance the campaign did not ask for", cli1, "agent_A", inst("p9", "agent_A"), false},
		{"no such campaign", "cli-conn-9@req_1", "agent_A", inst("p1", "agent_A"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.Provides(tt.id, tt.agent, tt.inst); got != tt.want {
				t.Fatalf("Provides = %v, want %v", got, tt.want)
			}
		})
	}
	if !s.HasProvider(cli1, "agent_B") || s.HasProvider(cli1, "agent_C") {
		t.Fatal("HasProvider disagrees with the campaign's providers")
	}
	// A provider that went away provides nothing any more.
	s.RemoveByAgent("agent_A")
	if s.Provides(cli1, "agent_A", inst("p1", "agent_A")) || s.HasProvider(cli1, "agent_A") {
		t.Fatal("a lost agent still provides")
	}
	s.Remove(cli1)
	if s.Provides(cli1, "agent_B", inst("p2", "agent_B")) {
		t.Fatal("a removed campaign still has providers")
	}
}

// A campaign is over once every instance it asked for stopped: it is
// removed, so that finished campaigns neither pile up for a collector nor
// count against its cap (issue 27, point 5).
func TestStopped(t *testing.T) {
	s := fixture()
	if s.Stopped(wlB3, "agent_A", inst("p1", "agent_A")) {
		t.Fatal("wlB3 over after one of three instances stopped")
	}
	if s.Provides(wlB3, "agent_A", inst("p1", "agent_A")) || !s.Provides(wlB3, "agent_A", inst("p4", "agent_A")) {
		t.Fatal("a stopped instance still provides, or its neighbour does not")
	}
	checkIndexes(t, s)
	if s.Stopped(wlB3, "agent_A", inst("p1", "agent_A")) || s.Stopped(wlB3, "agent_C", inst("p3", "agent_C")) {
		t.Fatal("a repeated stop, or one of an instance not asked for, ended wlB3")
	}
	if s.Stopped(wlB3, "agent_A", inst("p4", "agent_A")) {
		t.Fatal("wlB3 over while agent_B still provides")
	}
	checkIndexes(t, s)
	if !s.Stopped(wlB3, "agent_B", inst("p2", "agent_B")) {
		t.Fatal("wlB3 not over after every instance stopped")
	}
	if slices.Contains(s.Campaigns(), wlB3) || s.Stopped("cli-conn-9@x", "agent_A", inst("p1", "agent_A")) {
		t.Fatal("wlB3 still there, or an unknown campaign stopped")
	}
	checkIndexes(t, s)
}

// Live counts the other campaigns of a request's collector.
func TestLive(t *testing.T) {
	s := fixture()
	for _, tt := range []struct {
		id   string
		want int
	}{
		{cli1, 1},                      // cli1b
		{"cli-conn-1@new", 2},          // cli1, cli1b
		{"cli-conn-9@new", 0},          // nobody
		{"agent_A@collector_1@new", 2}, // wlA1, wlA1b
		{wlA1, 1},                      // wlA1b
		{"agent_B@collector_1@new", 0}, // same name, other agent
		{"agent_A@collector_2@new", 1}, // wlA2
	} {
		if got := s.Live(tt.id); got != tt.want {
			t.Errorf("Live(%q) = %d, want %d", tt.id, got, tt.want)
		}
	}
}
