package campaign

import (
	"strings"
	"testing"
)

// A run that logged a problem (here a replica that exited after a fault)
// fails the settled check, naming the problem; a run without passes it.
func TestSettledFailsOnAProblem(t *testing.T) {
	if r := settled(nil); !r.OK {
		t.Fatalf("no problems: %+v", r)
	}
	p := "after the faults: campaign: cluster did not settle: r2 exited: exit status 2"
	if r := settled([]string{p}); r.OK || !strings.Contains(r.Detail, "r2 exited") {
		t.Fatalf("a problem: %+v", r)
	}
}
