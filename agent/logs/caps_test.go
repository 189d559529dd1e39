package logs

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
)

func testwaitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	testwait.For(t, wait, cond, "%s", what)
}

// newCappedFixture is newFixture with the agent-wide caps set.
func newCappedFixture(t *testing.T, campaigns, sources int) *fixture {
	f := newFixture(t, 0)
	f.c.cfg.MaxCampaigns, f.c.cfg.MaxSources, f.c.cfg.Agent = campaigns, sources, "agent_A"
	return f
}

// opened counts the readers the campaigns asked the runtime for.
func (f *fixture) opened() int { return len(f.rt.asked()) }

// refusal waits for the entry and stop of a refused source.
func (f *fixture) refusal(requestID, name, want string) {
	f.t.Helper()
	entries, stops := f.collect(requestID, name)
	if len(stops) != 1 || len(entries[name]) != 1 || !strings.Contains(entries[name][0], want) {
		f.t.Fatalf("refusal of %s: entries %q, stops %v; want one entry with %q", name, entries[name], stops, want)
	}
}

// TestCampaignCap: past MaxCampaigns a request opens nothing; each of
// its instances gets an entry naming the cap and its stop at once, and a
// campaign that ends frees its slot (issue 27, point 5).
func TestCampaignCap(t *testing.T) {
	const max = 3
	f := newCappedFixture(t, max, 100)
	streams := map[string]*stream{}
	for i := range max + 2 {
		name := fmt.Sprintf("wl%d", i)
		streams[name] = newStream()
		f.add(name, streams[name])
	}
	for i := range max {
		f.c.Start(request(fmt.Sprintf("r%d", i), &ankbase.LogsRequest{Follow: ptr(true)}, fmt.Sprintf("wl%d", i)))
	}
	f.c.Start(request("over", &ankbase.LogsRequest{Follow: ptr(true)}, "wl3", "wl4"))
	entries, stops := f.collect("over", "wl3", "wl4")
	want := "log campaign refused: the agent 'agent_A' runs 3 log campaigns, as many as it may (--max-log-campaigns 3)"
	for _, n := range []string{"wl3", "wl4"} {
		if len(entries[n]) != 1 || !strings.HasPrefix(entries[n][0], want) {
			t.Fatalf("%s: %q, want %q", n, entries[n], want)
		}
	}
	if len(stops) != 2 {
		t.Fatalf("stops %v", stops)
	}
	if got := f.c.Stats(); got.Campaigns != max || got.RefusedCampaigns != 1 {
		t.Fatalf("stats %+v", got)
	}
	if n := f.opened(); n != max {
		t.Fatalf("the runtime was asked for %d readers, want %d", n, max)
	}
	// The same id again replaces its campaign: no new slot needed.
	f.add("wl0b", newStream())
	f.c.Start(request("r0", &ankbase.LogsRequest{Follow: ptr(true)}, "wl0b"))
	streams["wl0"].waitClosed(t)
	if s := f.c.Stats(); s.Campaigns != max || s.RefusedCampaigns != 1 {
		t.Fatalf("after a replacement: %+v", s)
	}
	// A campaign cancelled frees its slot.
	f.c.Cancel("r1")
	streams["wl1"].waitClosed(t)
	f.c.Start(request("next", &ankbase.LogsRequest{Follow: ptr(true)}, "wl3"))
	streams["wl3"].line(t, "read")
	if got := entriesOf(t, f); len(got) != 1 || got[0] != "read" {
		t.Fatalf("after a slot was freed: %q", got)
	}
	if got := f.c.Stats(); got.Campaigns != max || got.RefusedCampaigns != 1 {
		t.Fatalf("stats %+v", got)
	}
}

// TestSourceCap: past MaxSources an instance is not opened but answered
// with an entry naming the cap and its stop, while the campaign's other
// instances are read; closing a source frees its slot at once.
func TestSourceCap(t *testing.T) {
	f := newCappedFixture(t, 100, 3)
	streams := map[string]*stream{}
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		streams[n] = newStream()
		f.add(n, streams[n])
	}
	f.c.Start(request("r1", &ankbase.LogsRequest{Follow: ptr(true)}, "a", "b"))
	testwaitFor(t, func() bool { return f.c.Stats().Sources == 2 }, "two sources open")
	f.c.Start(request("r2", &ankbase.LogsRequest{Follow: ptr(true)}, "c", "d"))
	f.refusal("r2", "d", "the agent 'agent_A' reads 3 log sources, as many as it may (--max-log-sources 3)")
	if got := f.c.Stats(); got.Sources != 3 || got.RefusedSources != 1 {
		t.Fatalf("stats %+v", got)
	}
	streams["c"].line(t, "c1")
	if got := entriesOf(t, f); len(got) != 1 || got[0] != "c1" {
		t.Fatalf("the campaign's open source: %q", got)
	}
	f.c.Cancel("r1")
	if got := f.c.Stats(); got.Sources != 1 || got.Campaigns != 1 {
		t.Fatalf("after Cancel: %+v", got)
	}
	f.c.Start(request("r3", &ankbase.LogsRequest{Follow: ptr(true)}, "e"))
	testwaitFor(t, func() bool { return f.c.Stats().Sources == 2 }, "the freed slot used")
	f.c.StopAll()
	if got := f.c.Stats(); got.Sources != 0 || got.Campaigns != 0 {
		t.Fatalf("after StopAll: %+v", got)
	}
}

// TestCapsHoldUnderAFlood: many collectors asking at once never get more
// than the caps, and each refused request is answered.
func TestCapsHoldUnderAFlood(t *testing.T) {
	const campaigns, sources, asks = 8, 12, 200
	f := newCappedFixture(t, campaigns, sources)
	for i := range 4 {
		name := fmt.Sprintf("wl%d", i)
		f.known[instance(name)] = "src"
	}
	f.rt.sources["src"] = func() (io.ReadCloser, error) { return newStream(), nil }
	for i := range asks {
		f.c.Start(request(fmt.Sprintf("collector%d@agent_B@%d", i%20, i), &ankbase.LogsRequest{Follow: ptr(true)}, "wl0", "wl1", "wl2", "wl3"))
		if s := f.c.Stats(); s.Campaigns > campaigns || s.Sources > sources {
			t.Fatalf("after %d requests: %+v", i+1, s)
		}
	}
	// Every instance is answered, but those read: a campaign whose
	// instances were all refused ends at once and frees its slot.
	stops, want := 0, asks*4-sources
	for stops < want {
		if f.next().GetLogsStopResponse() != nil {
			stops++
		}
	}
	s := f.c.Stats()
	if n := f.opened(); n != sources || s.Sources != sources || s.Campaigns > campaigns {
		t.Fatalf("the runtime was asked for %d readers (want %d); stats %+v", n, sources, s)
	}
	if s.RefusedCampaigns == 0 || s.RefusedSources == 0 {
		t.Fatalf("stats %+v: both caps should have refused", s)
	}
}
