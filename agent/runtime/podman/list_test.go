package podman

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// List asks podman afresh, with the `podman ps --all` the state polls
// share, so that the polls right after take its answer; it keeps only the
// agent's containers, and skips one whose name label is not an instance
// name.
func TestListAsksAfreshAndSharesTheAnswer(t *testing.T) {
	calls := filepath.Join(t.TempDir(), "calls")
	ps := `[{"Id":"c2","State":"running","Labels":{"name":"w.1.a","agent":"a"}},` +
		`{"Id":"c1","State":"exited","Labels":{"name":"v.2.a","agent":"a"}},` +
		`{"Id":"c3","State":"running","Labels":{"name":"w.1.b","agent":"b"}},` +
		`{"Id":"c4","State":"running","Labels":{"name":"not an instance","agent":"a"}},` +
		`{"Id":"c5","State":"running","Labels":{}}]`
	r := fakePodman(t, fmt.Sprintf("echo \"$*\" >> %s; echo '%s'", calls, ps))
	ctx := context.Background()
	found, err := r.List(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range found {
		got = append(got, f.Instance.String()+"="+string(f.ID))
	}
	if want := "[v.2.a=c1 w.1.a=c2]"; fmt.Sprint(got) != want {
		t.Fatalf("List = %v, want %s", got, want)
	}
	if _, err := r.State(ctx, "c2"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(data)), "\n"); len(lines) != 1 || lines[0] != "ps --all --format json" {
		t.Fatalf("podman calls %q, want one shared ps", lines)
	}
	// A second List does not take the older answer.
	if _, err := r.List(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if data, _ = os.ReadFile(calls); strings.Count(string(data), "\n") != 2 {
		t.Fatalf("podman calls %q, want a second ps for the second List", data)
	}
}
