package cluster_test

import (
	"slices"
	"testing"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
)

// Three replicas started at the same moment with bootstrap-expect 3 form
// exactly one cluster: all agree on one leader and one configuration of
// three voters. Two rounds: everyone joins everyone, and each joins one
// peer only with encrypted gossip.
func TestBootstrapExpect_RacingStartsFormOneCluster(t *testing.T) {
	key := []byte("0123456789abcdef")
	tests := []struct {
		name string
		edit func(*cluster.Config)
	}{
		{"all join all", nil},
		{"each joins one, encrypted", func(cfg *cluster.Config) {
			cfg.Join = cfg.Join[:1]
			cfg.GossipKey = key
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []clustertest.Option
			if tt.edit != nil {
				opts = append(opts, clustertest.WithConfig(tt.edit))
			}
			c := clustertest.New(t, 3, opts...)
			c.WaitLeader(waitLong)
			idx := c.MustApply(agentCmd(t, "one"))
			c.WaitApplied(idx)
			// Under load leadership may move; what must hold is that the
			// replicas come to agree on one leader and one configuration.
			c.WaitFor("every replica agreeing on one leader and three voters", waitLong, func() bool {
				leader := c.Leader()
				if leader == nil {
					return false
				}
				for _, id := range c.IDs() {
					n := c.Node(id)
					if _, lid := n.Leader(); lid != leader.ID() {
						return false
					}
					voters, nonvoters := c.Configuration(id)
					if !slices.Equal(voters, []string{"n1", "n2", "n3"}) || len(nonvoters) > 0 {
						t.Fatalf("%s configuration voters=%v nonvoters=%v", id, voters, nonvoters)
					}
				}
				return true
			})
		})
	}
}
