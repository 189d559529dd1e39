package cli

import (
	"context"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// Problems runs `get problems` against the Problems service
// (docs/problems.md).
type Problems struct {
	Client grapnelpb.ProblemsClient
	Out    io.Writer
	// Location is the time zone times are printed in (local when nil).
	Location *time.Location
}

// problemColumns are the columns of `get problems`.
var problemColumns = []string{"ID", "KIND", "SINCE", "OBJECTS", "SUMMARY"}

// List prints the open problems, oldest first: a table of their short
// descriptions, or every field, the long description included, as YAML
// or JSON.
func (p *Problems) List(ctx context.Context, output string) error {
	if err := checkOutput(output); err != nil {
		return err
	}
	resp, err := p.Client.List(ctx, &grapnelpb.ProblemsListRequest{})
	if err != nil {
		return err
	}
	if output == "table" || output == "" {
		t := Table{Headers: problemColumns}
		for _, pr := range resp.GetProblems() {
			t.Rows = append(t.Rows, []string{strconv.FormatUint(pr.GetId(), 10), pr.GetKind(), p.time(pr.GetSinceMs()),
				objectsCell(pr.GetObjects()), pr.GetSummary()})
		}
		_, err := io.WriteString(p.Out, t.Render(0, FitNone, -1)+"\n")
		return err
	}
	list := make([]any, 0, len(resp.GetProblems()))
	for _, pr := range resp.GetProblems() {
		objs := make([]any, 0, len(pr.GetObjects()))
		for _, o := range pr.GetObjects() {
			objs = append(objs, map[string]any{"kind": o.GetKind(), "name": o.GetName()})
		}
		// A leader of a release before lastUpdated sends none: the
		// problem is as it opened.
		updated := max(pr.GetLastUpdatedMs(), pr.GetSinceMs())
		list = append(list, map[string]any{"id": pr.GetId(), "kind": pr.GetKind(), "since": p.time(pr.GetSinceMs()),
			"sinceMs": pr.GetSinceMs(), "lastUpdated": p.time(updated), "lastUpdatedMs": updated,
			"objects": objs, "summary": pr.GetSummary(), "detail": pr.GetDetail()})
	}
	return WriteTree(p.Out, output, map[string]any{"problems": list}, problemsOrder)
}

// objectsCell is the OBJECTS cell: "workload app, workload db".
func objectsCell(objs []*grapnelpb.ProblemObject) string {
	parts := make([]string, 0, len(objs))
	for _, o := range objs {
		parts = append(parts, o.GetKind()+" "+o.GetName())
	}
	return strings.Join(parts, ", ")
}

// problemsOrder orders a problem's fields as the table reads.
func problemsOrder(path []string) []string {
	switch n := len(path); {
	case n == 0:
		return []string{"problems"}
	case n >= 2 && path[n-2] == "problems":
		return []string{"id", "kind", "since", "sinceMs", "lastUpdated", "lastUpdatedMs", "objects", "summary", "detail"}
	case n >= 2 && path[n-2] == "objects":
		return []string{"kind", "name"}
	}
	return nil
}

// time is a leader time in RFC 3339 with milliseconds, as the history
// prints it.
func (p *Problems) time(ms int64) string {
	return (&History{Location: p.Location}).time(ms)
}
