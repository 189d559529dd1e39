package cluster_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// agentCmd is an FSM command that records a connected agent: the
// replicated state the tests build and compare.
func agentCmd(t testing.TB, name string) []byte {
	t.Helper()
	b, err := fsm.Encode(&fsm.AgentConnectedRequest{Name: name, Tags: map[string]string{"n": name}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// applyAgents commits agents prefix-0..prefix-(k-1) through the leader and
// returns the last index.
func applyAgents(t testing.TB, c *clustertest.Cluster, prefix string, k int) uint64 {
	t.Helper()
	var last uint64
	for i := range k {
		last = c.MustApply(agentCmd(t, fmt.Sprintf("%s-%d", prefix, i)))
	}
	return last
}

// agents lists the agents in a replica's FSM, sorted.
func agents(f *fsm.FSM) []string {
	var out []string
	f.Read(func(s *state.Store, _ uint64) {
		for name := range s.Agents {
			out = append(out, name)
		}
	})
	slices.Sort(out)
	return out
}

// requireAgents fails unless the replica holds every named agent.
func requireAgents(t testing.TB, c *clustertest.Cluster, id string, names ...string) {
	t.Helper()
	have := agents(c.FSM(id))
	for _, n := range names {
		if !slices.Contains(have, n) {
			t.Fatalf("replica %s lost committed agent %s (has %d agents)", id, n, len(have))
		}
	}
}

// names is prefix-0..prefix-(k-1).
func names(prefix string, k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// waitSameContent waits until every running replica holds the same state.
func waitSameContent(t testing.TB, c *clustertest.Cluster, want []byte) {
	t.Helper()
	c.WaitFor("equal FSM content on every replica", 15*time.Second, func() bool {
		for _, id := range c.Running() {
			if !bytes.Equal(c.Content(id), want) {
				return false
			}
		}
		return true
	})
}

// holdsFor fails if cond stops holding at any poll within d: testwait.Holds
// with the description first, as the cluster tests read.
func holdsFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.Holds(t, d, cond, "%s", what)
}

const waitLong = 15 * time.Second
