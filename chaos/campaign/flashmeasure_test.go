package campaign

import (
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/check"
	"github.com/grapnel-io/grapnel/chaos/history"
	"github.com/grapnel-io/grapnel/chaos/report"
)

var nextID int64

func op(kind history.Kind, key, value string, call, ret int, outcome history.Outcome) history.Op {
	nextID++
	return history.Op{ID: nextID, Kind: kind, Key: key, Value: value, Call: ms(call), Return: ms(ret), Outcome: outcome}
}

func readAll(call, ret int, values map[string]string) history.Op {
	nextID++
	return history.Op{ID: nextID, Kind: history.Read, Read: values, Call: ms(call), Return: ms(ret), Outcome: history.OK}
}

// The window's writes: 4 called in it, 3 acknowledged; the longest
// stretch without an acknowledgement is from 1100 to 1900.
func TestWriterAvailability(t *testing.T) {
	ops := []history.Op{
		op(history.Write, "k", "a", 900, 1100, history.OK),       // called before, acknowledged in the window
		op(history.Write, "k", "b", 1000, 1900, history.OK),      // in
		op(history.Write, "k", "c", 1050, 3000, history.Unknown), // in, not acknowledged
		op(history.Delete, "k", "", 1950, 1990, history.OK),      // in
		op(history.Write, "k", "d", 1995, 2100, history.OK),      // in, acknowledged after the window
		readAll(1200, 1300, nil),                                 // a read is no write
	}
	called, acked, gap := WriterAvailability(ops, ms(1000), ms(2000))
	if called != 4 || acked != 3 || gap != 800*time.Millisecond {
		t.Fatalf("called %d acked %d gap %v, want 4, 3, 800ms", called, acked, gap)
	}
	// No acknowledgement at all: the gap is the whole window.
	if _, _, gap := WriterAvailability(nil, ms(0), ms(500)); gap != 500*time.Millisecond {
		t.Fatalf("empty window gap %v", gap)
	}
}

func TestLostAcross(t *testing.T) {
	const at, after = 1000, 2000
	tests := []struct {
		name string
		ops  []history.Op
		lost string // "" when nothing is lost
	}{
		{"kept", []history.Op{
			op(history.Write, "k", "old", 100, 200, history.OK),
			op(history.Write, "k", "new", 300, 400, history.OK),
			readAll(2100, 2200, map[string]string{"k": "new"}),
		}, ""},
		{"rolled back to an older value", []history.Op{
			op(history.Write, "k", "old", 100, 200, history.OK),
			op(history.Write, "k", "new", 300, 400, history.OK),
			readAll(2100, 2200, map[string]string{"k": "old"}),
		}, "the value of"},
		{"gone", []history.Op{
			op(history.Write, "k", "new", 300, 400, history.OK),
			readAll(2100, 2200, map[string]string{}),
		}, "absent"},
		{"a delete gone", []history.Op{
			op(history.Write, "k", "old", 100, 200, history.OK),
			op(history.Delete, "k", "", 300, 400, history.OK),
			readAll(2100, 2200, map[string]string{"k": "old"}),
		}, "the value of"},
		{"a value nobody wrote", []history.Op{
			op(history.Write, "k", "new", 300, 400, history.OK),
			readAll(2100, 2200, map[string]string{"k": "garbage"}),
		}, "nobody wrote"},
		{"a later write", []history.Op{
			op(history.Write, "k", "new", 300, 400, history.OK),
			op(history.Write, "k", "later", 1500, 2050, history.OK),
			readAll(2100, 2200, map[string]string{"k": "later"}),
		}, ""},
		{"a concurrent write that may come after", []history.Op{
			op(history.Write, "k", "overlap", 250, 450, history.OK),
			op(history.Write, "k", "new", 300, 400, history.OK),
			readAll(2100, 2200, map[string]string{"k": "overlap"}),
		}, ""},
		{"an unknown delete may have taken effect", []history.Op{
			op(history.Write, "k", "new", 300, 400, history.OK),
			op(history.Delete, "k", "", 100, 150, history.Unknown),
			readAll(2100, 2200, map[string]string{}),
		}, ""},
		{"a failed write convicts nothing and excuses nothing", []history.Op{
			op(history.Write, "k", "new", 300, 400, history.OK),
			op(history.Delete, "k", "", 500, 600, history.Fail),
			readAll(2100, 2200, map[string]string{}),
		}, "absent"},
		{"only the first read after counts", []history.Op{
			op(history.Write, "k", "old", 100, 200, history.OK),
			op(history.Write, "k", "new", 300, 400, history.OK),
			readAll(1500, 1600, map[string]string{"k": "new"}), // before after
			readAll(2100, 2200, map[string]string{"k": "old"}),
			readAll(2300, 2400, map[string]string{"k": "new"}),
		}, "the value of"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checked, lost := LostAcross(tc.ops, ms(at), ms(after))
			if checked != 1 {
				t.Fatalf("checked %d keys, want 1", checked)
			}
			switch {
			case tc.lost == "" && len(lost) > 0:
				t.Fatalf("lost %v, want nothing", lost)
			case tc.lost != "" && (len(lost) != 1 || !strings.Contains(lost[0], tc.lost)):
				t.Fatalf("lost %v, want one naming %q", lost, tc.lost)
			}
		})
	}
	// Nothing acknowledged before the fault, or no read after: nothing
	// to check.
	if checked, _ := LostAcross([]history.Op{op(history.Write, "k", "v", 1100, 1200, history.OK), readAll(2100, 2200, nil)}, ms(at), ms(after)); checked != 0 {
		t.Fatalf("checked %d keys with nothing acknowledged before the fault", checked)
	}
	if checked, _ := LostAcross([]history.Op{op(history.Write, "k", "v", 100, 200, history.OK)}, ms(at), ms(after)); checked != 0 {
		t.Fatalf("checked %d keys with no read after the fault", checked)
	}
}

func TestMeasureFlash(t *testing.T) {
	f := report.Fault{Kind: string(DiskFull), At: ms(1000), Detected: ms(1300), Healed: ms(5000), Repaired: ms(7000)}
	ops := []history.Op{
		op(history.Write, "k", "before", 100, 200, history.OK),
		op(history.Write, "k", "in", 1100, 1200, history.OK),
		op(history.Write, "k", "late", 7100, 7200, history.OK), // after the repair: not in the window
		readAll(5100, 5200, map[string]string{"k": "in"}),
	}
	m := MeasureFlash(f, ops, ms(9000))
	if !m.Detected || m.Detect != 300*time.Millisecond || !m.Repaired || m.Repair != 2*time.Second {
		t.Fatalf("detect %v %v, repair %v %v", m.Detected, m.Detect, m.Repaired, m.Repair)
	}
	if m.Writes != 1 || m.Acked != 1 || m.LongestGap != 5800*time.Millisecond || m.Checked != 1 || len(m.Lost) != 0 {
		t.Fatalf("%+v", m)
	}
	// Never repaired: the window runs to until.
	f.Repaired = time.Time{}
	if m := MeasureFlash(f, ops, ms(9000)); m.Repaired || m.Writes != 2 {
		t.Fatalf("unrepaired: %+v", m)
	}
}

func TestFlashFiguresAndCheck(t *testing.T) {
	faults := []report.Fault{
		{Kind: string(DiskFull), Target: "r1", At: ms(0)},
		{Kind: string(DiskFull), Target: "r2", At: ms(100)},
		{Kind: string(PowerCut), Target: "every host", At: ms(200)},
	}
	ms3 := []FlashMeasured{
		{Detect: 200 * time.Millisecond, Detected: true, Repair: time.Second, Repaired: true, Writes: 10, Acked: 9, Checked: 8},
		{Detect: 400 * time.Millisecond, Detected: true, Repair: 3 * time.Second, Repaired: true, Writes: 10, Acked: 10, Checked: 8},
		{Repair: 2 * time.Second, Repaired: true, Writes: 4, Acked: 1, Checked: 8},
	}
	kinds := []Kind{DiskFull, DiskFull, PowerCut}
	figs := FlashFigures(kinds, ms3)
	df, pc := figs[string(DiskFull)], figs[string(PowerCut)]
	if df.N != 2 || df.Detect.N != 2 || df.Detect.Max != 400*time.Millisecond || df.Repair.P50 != time.Second ||
		df.Writes != 20 || df.Acked != 19 || df.MinShare != 0.9 || df.Checked != 16 || df.Undetected != 0 {
		t.Fatalf("disk-full %+v", df)
	}
	// A power cut has no detection to miss.
	if pc.N != 1 || pc.Detect.N != 0 || pc.Undetected != 0 || pc.MinShare != 0.25 {
		t.Fatalf("power-cut %+v", pc)
	}
	if res := FlashChecked(faults, ms3); !res.OK || !strings.Contains(res.Detail, "24 acknowledged writes") {
		t.Fatalf("all good: %+v", res)
	}
	for _, tc := range []struct {
		name   string
		break_ func(f []report.Fault, m []FlashMeasured)
		want   string
	}{
		{"undetected", func(_ []report.Fault, m []FlashMeasured) { m[0].Detected = false }, "no StorageFailed"},
		{"not repaired", func(_ []report.Fault, m []FlashMeasured) { m[1].Repaired = false }, "not a healthy voter"},
		{"power not back", func(_ []report.Fault, m []FlashMeasured) { m[2].Repaired = false }, "did not come back"},
		{"a write lost", func(_ []report.Fault, m []FlashMeasured) { m[2].Lost = []string{"write k=v"} }, "lost write k=v"},
		{"an undo step failed", func(f []report.Fault, _ []FlashMeasured) {
			f[2].PowerCut = []report.MountLoss{{Mount: "h1", Problems: []string{"could not restore x"}}}
		}, "h1: could not restore x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := append([]report.Fault(nil), faults...)
			m := append([]FlashMeasured(nil), ms3...)
			tc.break_(f, m)
			if res := FlashChecked(f, m); res.OK || !strings.Contains(res.Detail, tc.want) {
				t.Fatalf("got %+v, want a failure naming %q", res, tc.want)
			}
		})
	}
	// An undetected storage fault is counted as such.
	ms3[0].Detected = false
	if df := FlashFigures(kinds, ms3)[string(DiskFull)]; df.Undetected != 1 || df.Detect.N != 1 {
		t.Fatalf("undetected %+v", df)
	}
}

// Between power cuts the pids must not change; across one they do.
func TestStableAcrossPowerCuts(t *testing.T) {
	ok := check.StableIDs(map[string]string{"a": "pid 1"}, map[string]string{"a": "pid 1"})
	if res := StableAcrossPowerCuts(ok, nil, 2); !res.OK || !strings.Contains(res.Detail, "2 power cuts") {
		t.Fatalf("%+v", res)
	}
	res := StableAcrossPowerCuts(ok, []string{"before the power cut at +3s: a: restarted, pid 1 became pid 2"}, 1)
	if res.OK || !strings.Contains(res.Detail, "pid 1 became pid 2") || strings.Contains(res.Detail, "at the end") {
		t.Fatalf("%+v", res)
	}
	bad := check.StableIDs(map[string]string{"a": "pid 3"}, map[string]string{"a": "pid 4"})
	if res := StableAcrossPowerCuts(bad, nil, 1); res.OK {
		t.Fatalf("a restart after the last power cut passed: %+v", res)
	}
}
