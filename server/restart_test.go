package server

import (
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// A replica that restarts keeps its desired state and does not apply the
// startup manifest over it: unlike Ankaios, nothing is lost on restart.
func TestRestartKeepsState(t *testing.T) {
	dir := t.TempDir()
	startup := mustState(t, twoAgents)
	ts := startServerIn(t, dir, startup)
	cli := ts.cli()
	if r := cli.update(state.Tree{}, "desiredState.workloads.wl_b"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("delete: %v", r)
	}
	if r := cli.update(manifest(t, nginx), "desiredState.workloads.nginx"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("add: %v", r)
	}
	ts.stop()

	ts2 := startServerIn(t, dir, startup)
	wls := ts2.cli().get("desiredState.workloads").GetDesiredState().GetWorkloads().GetWorkloads()
	if _, ok := wls["wl_b"]; ok {
		t.Error("the startup manifest was applied over the kept state")
	}
	for _, n := range []string{"wl_a", "unscheduled", "nginx"} {
		if _, ok := wls[n]; !ok {
			t.Errorf("%s lost on restart", n)
		}
	}
	ts2.store(func(s *state.Store) {
		if _, ok := s.Rendered["nginx"]; !ok {
			t.Error("rendered workloads lost on restart")
		}
	})
}
