package servercmd

import (
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/server"
)

// The caps that bound what the leader loop does per commit and per
// report (issue 27, hole 6): the default, set by flag, environment or
// file, refused when not positive.
func TestLeaderLoopCaps(t *testing.T) {
	for _, c := range []struct {
		flag, env, key string
		def            int
		get            func(config) int
	}{
		{"--max-workload-states", "GRAPNEL_SERVER_MAX_WORKLOAD_STATES", "max_workload_states", server.DefaultMaxWorkloadStates,
			func(c config) int { return c.MaxWorkloadStates }},
		{"--max-event-subscriptions-per-requester", "GRAPNEL_SERVER_MAX_EVENT_SUBSCRIPTIONS_PER_REQUESTER", "max_event_subscriptions_per_requester",
			server.DefaultMaxEventSubscriptionsPerRequester, func(c config) int { return c.MaxEventSubscriptionsPerRequester }},
		{"--max-event-subscriptions", "GRAPNEL_SERVER_MAX_EVENT_SUBSCRIPTIONS", "max_event_subscriptions", server.DefaultMaxEventSubscriptions,
			func(c config) int { return c.MaxEventSubscriptions }},
		{"--max-locks", "GRAPNEL_SERVER_MAX_LOCKS", "max_locks", server.DefaultMaxLocks, func(c config) int { return c.MaxLocks }},
	} {
		t.Run(c.flag, func(t *testing.T) {
			cfg, err := loadConfig([]string{"-k", "-x", writeFile(t, "")}, env(nil))
			if err != nil || c.get(cfg) != c.def {
				t.Fatalf("default: %d, %v; want %d", c.get(cfg), err, c.def)
			}
			for _, s := range []struct {
				args []string
				env  map[string]string
				want int
			}{
				{[]string{"-k", "-x", writeFile(t, ""), c.flag, "5"}, nil, 5},
				{[]string{"-k", "-x", writeFile(t, "")}, map[string]string{c.env: "6"}, 6},
				{[]string{"-k", "-x", writeFile(t, c.key+": 7\n")}, nil, 7},
			} {
				cfg, err := loadConfig(s.args, env(s.env))
				if err != nil || c.get(cfg) != s.want {
					t.Errorf("%v %v: %d, %v; want %d", s.args[3:], s.env, c.get(cfg), err, s.want)
				}
			}
			if _, err := loadConfig([]string{"-k", "-x", writeFile(t, ""), c.flag, "0"}, env(nil)); err == nil ||
				!strings.Contains(err.Error(), c.flag+" 0: must be positive") {
				t.Fatalf("a zero cap: %v", err)
			}
		})
	}
}
