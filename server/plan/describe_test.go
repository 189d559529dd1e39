package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// The field-level difference reads old and new values as JSON text.
func TestFieldChanges(t *testing.T) {
	old := &state.Workload{Agent: "a", Runtime: "podman", RuntimeConfig: "image: x", Tags: map[string]string{"k": "1", "gone": "x"}}
	cur := &state.Workload{Agent: "b", Runtime: "podman", RuntimeConfig: "image: x", Tags: map[string]string{"k": "2"},
		Dependencies: map[string]state.AddCondition{"db": state.AddCondRunning}}
	var got []string
	for _, f := range fieldChanges(old, cur) {
		got = append(got, f.GetPath()+": "+f.GetOld()+" -> "+f.GetNew())
	}
	want := []string{
		`agent: "a" -> "b"`,
		`dependencies.db:  -> "ADD_COND_RUNNING"`,
		`tags.gone: "x" -> `,
		`tags.k: "1" -> "2"`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
