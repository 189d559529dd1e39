package history

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock hands out times one millisecond apart.
func fakeClock() func() time.Time {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Millisecond); return t }
}

func TestRecorderEnd(t *testing.T) {
	tests := []struct {
		name    string
		run     func(r *Recorder)
		wantOut []Outcome
		wantErr []string
	}{
		{"ok and fail", func(r *Recorder) {
			a := r.Begin(0, Write, "a", "1")
			b := r.Begin(1, Delete, "a", "")
			r.End(b, Fail, nil, "r1", "rejected")
			r.End(a, OK, nil, "r1", "")
		}, []Outcome{OK, Fail}, []string{"", "rejected"}},
		{"first answer stands", func(r *Recorder) {
			a := r.Begin(0, Write, "a", "1")
			r.End(a, Unknown, nil, "", "timeout")
			r.End(a, OK, nil, "r2", "")
		}, []Outcome{Unknown}, []string{"timeout"}},
		{"unknown id ignored", func(r *Recorder) {
			r.Begin(0, Read, "", "")
			r.End(7, OK, nil, "", "")
			r.End(0, OK, nil, "", "")
		}, []Outcome{""}, []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRecorder()
			r.now = fakeClock()
			tt.run(r)
			ops := r.Ops()
			if len(ops) != len(tt.wantOut) {
				t.Fatalf("got %d ops, want %d", len(ops), len(tt.wantOut))
			}
			for i, op := range ops {
				if op.Outcome != tt.wantOut[i] || op.Err != tt.wantErr[i] {
					t.Errorf("op %d: outcome %q err %q, want %q %q", i, op.Outcome, op.Err, tt.wantOut[i], tt.wantErr[i])
				}
				if op.Outcome != "" && !op.Return.After(op.Call) {
					t.Errorf("op %d: return %v not after call %v", i, op.Return, op.Call)
				}
			}
		})
	}
}

func TestRecorderCopiesRead(t *testing.T) {
	r := NewRecorder()
	seen := map[string]string{"a": "1"}
	id := r.Begin(0, Read, "", "")
	r.End(id, OK, seen, "r1", "")
	seen["a"] = "changed"
	ops := r.Ops()
	ops[0].Read["b"] = "2"
	if got := r.Ops()[0].Read; !reflect.DeepEqual(got, map[string]string{"a": "1"}) {
		t.Fatalf("read %v, want the map as observed at End", got)
	}
}

func TestSortByCall(t *testing.T) {
	t0 := time.Unix(100, 0)
	ops := []Op{
		{ID: 3, Call: t0.Add(2)},
		{ID: 2, Call: t0},
		{ID: 1, Call: t0},
		{ID: 4, Call: t0.Add(1)},
	}
	Sort(ops)
	var ids []int64
	for _, op := range ops {
		ids = append(ids, op.ID)
	}
	if !reflect.DeepEqual(ids, []int64{1, 2, 4, 3}) {
		t.Fatalf("order %v", ids)
	}
}

// TestRecorderConcurrent is meant for -race: many clients Begin and End at
// once; every op is there once, ordered by call, with its own answer.
func TestRecorderConcurrent(t *testing.T) {
	const clients, each = 16, 200
	r := NewRecorder()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := r.Begin(c, Write, "k", "v")
				if i%10 == 0 {
					_ = r.Ops()
				}
				r.End(id, OK, map[string]string{"c": string(rune('a' + c))}, "r", "")
			}
		}()
	}
	wg.Wait()
	ops := r.Ops()
	if len(ops) != clients*each {
		t.Fatalf("%d ops, want %d", len(ops), clients*each)
	}
	ids := map[int64]bool{}
	for i, op := range ops {
		if ids[op.ID] {
			t.Fatalf("id %d twice", op.ID)
		}
		ids[op.ID] = true
		if i > 0 && op.Call.Before(ops[i-1].Call) {
			t.Fatalf("op %d called before op %d", i, i-1)
		}
		if op.Outcome != OK || op.Read["c"] != string(rune('a'+op.Client)) {
			t.Fatalf("op %v lost its answer", op)
		}
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	r := NewRecorder()
	r.now = fakeClock()
	w := r.Begin(0, Write, "a", "v1")
	rd := r.Begin(1, Read, "", "")
	d := r.Begin(2, Delete, "a", "")
	r.End(w, OK, nil, "r1", "")
	r.End(rd, OK, map[string]string{"a": "v1"}, "r2", "")
	r.End(d, Unknown, nil, "", "deadline exceeded")
	path := filepath.Join(t.TempDir(), "h.json")
	if err := r.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := r.Ops()
	if len(got) != len(want) {
		t.Fatalf("%d ops back, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.Call.Equal(w.Call) || !g.Return.Equal(w.Return) {
			t.Errorf("op %d times changed: %v", i, g)
		}
		g.Call, g.Return, w.Call, w.Return = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("op %d: got %+v want %+v", i, g, w)
		}
	}
}

func TestLoadRejects(t *testing.T) {
	tests := []struct {
		name, json, field string
	}{
		{"kind", `[{"id":1,"kind":"put","call":"2026-01-01T00:00:00Z"}]`, `"kind"`},
		{"write key", `[{"id":1,"kind":"write","value":"v","call":"2026-01-01T00:00:00Z"}]`, `"key"`},
		{"write value", `[{"id":1,"kind":"write","key":"a","call":"2026-01-01T00:00:00Z"}]`, `"value"`},
		{"outcome", `[{"id":1,"kind":"read","outcome":"maybe","call":"2026-01-01T00:00:00Z","return":"2026-01-01T00:00:01Z"}]`, `"outcome"`},
		{"call", `[{"id":1,"kind":"read"}]`, `"call"`},
		{"return before call", `[{"id":1,"kind":"read","outcome":"ok","call":"2026-01-01T00:00:02Z","return":"2026-01-01T00:00:01Z"}]`, `"return"`},
		{"finished without return", `[{"id":1,"kind":"read","outcome":"ok","call":"2026-01-01T00:00:02Z"}]`, `"return"`},
		{"duplicate id", `[{"id":1,"kind":"read","call":"2026-01-01T00:00:00Z"},{"id":1,"kind":"read","call":"2026-01-01T00:00:00Z"}]`, `"id"`},
		{"not json", `{`, `h.json`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "h.json")
			if err := os.WriteFile(path, []byte(tt.json), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("err %q does not name %s", err, tt.field)
			}
		})
	}
}
