package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

func TestParseUIDRange(t *testing.T) {
	tests := []struct {
		in   string
		want UIDRange
		err  string
	}{
		{"60000-60999", UIDRange{60000, 60999}, ""},
		{" 5-5 ", UIDRange{5, 5}, ""},
		{"off", UIDRange{}, ""},
		{"0-10", UIDRange{}, "uid 0 is root"},
		{"10-5", UIDRange{}, "below the first"},
		{"10", UIDRange{}, "expected FIRST-LAST"},
		{"a-b", UIDRange{}, "expected FIRST-LAST"},
		{"1-100000", UIDRange{}, "more than"},
		{"4294967290-4294967295", UIDRange{}, "not a valid user"},
	}
	for _, tt := range tests {
		got, err := ParseUIDRange(tt.in)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%q: %v", tt.in, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: error %v, want one with %q", tt.in, err, tt.err)
		case got != tt.want:
			t.Errorf("%q: %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestUIDTable: each workload name gets a uid of the range that no other
// name has, the same one after a restart (the file), and a full range is
// a clear error.
func TestUIDTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), uidFile)
	rng := UIDRange{First: 100, Last: 102}
	tab, err := loadUIDTable(path, rng)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint32{}
	seen := map[uint32]string{}
	for _, name := range []string{"a", "b", "c"} {
		uid, err := tab.assign(name)
		if err != nil {
			t.Fatal(err)
		}
		if uid < rng.First || uid > rng.Last {
			t.Fatalf("%s: uid %d outside %v", name, uid, rng)
		}
		if other, ok := seen[uid]; ok {
			t.Fatalf("uid %d given to %s and %s", uid, other, name)
		}
		seen[uid], got[name] = name, uid
	}
	if uid, _ := tab.assign("b"); uid != got["b"] {
		t.Fatalf("b asked again: %d, first %d", uid, got["b"])
	}
	if _, err := tab.assign("d"); err == nil || !strings.Contains(err.Error(), "widen --workload-uid-range") {
		t.Fatalf("a fourth workload in a range of three: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("assignment file: %v, %v; want mode 0600", fi.Mode(), err)
	}
	again, err := loadUIDTable(path, rng)
	if err != nil {
		t.Fatal(err)
	}
	for name, uid := range got {
		if u, _ := again.assign(name); u != uid {
			t.Fatalf("after a restart %s has uid %d, before %d", name, u, uid)
		}
	}
}

// requireRoot skips a test that starts processes under other uids.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test starts workloads under uids of their own (setuid)")
	}
}

// isolatedRunFolder is a run folder whose parents other uids can pass
// through, as the agent's /tmp/ankaios: t.TempDir's parent is 0700.
func isolatedRunFolder(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "grapnel-isolation-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestWorkloadsRunUnderUIDsOfTheirOwn proves issue 17 point 5 for the
// process runtime: each workload runs under its own unprivileged uid,
// without root's groups, in a directory of its own (0700, its own) that
// is its HOME, and can write there.
func TestWorkloadsRunUnderUIDsOfTheirOwn(t *testing.T) {
	requireRoot(t)
	h := newHarness(t, Config{RunFolder: isolatedRunFolder(t), UIDs: UIDRange{First: 61000, Last: 61009}})
	script := `echo "uid=$(id -u) gid=$(id -g) groups=$(id -G) pwd=$(pwd) home=$HOME"; echo hi > "$HOME/note" && echo wrote`
	uids := map[string]string{}
	for _, name := range []string{"first", "second"} {
		s := h.spec(name, "command: sh\nargs: ['-c', '"+script+"']")
		id := h.create(s)
		h.waitState(id, state.SucceededOk)
		owner, err := h.rt.Owner(s.Instance, s.Workload)
		if err != nil || owner == nil {
			t.Fatalf("Owner: %v, %v", owner, err)
		}
		home := filepath.Join(s.RunDir, workSubdir)
		want := fmt.Sprintf("uid=%d gid=%d groups=%d pwd=%s home=%s\nwrote\n", owner.UID, owner.UID, owner.UID, home, home)
		if got := h.logs(id, runtime.LogOptions{Tail: -1}); got != want {
			t.Fatalf("%s saw\n%q\nwant\n%q", name, got, want)
		}
		fi, err := os.Stat(home)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != owner.UID || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: home owned by %d mode %v, want %d 0700", name, st.Uid, fi.Mode().Perm(), owner.UID)
		}
		if other, ok := uids[fmt.Sprint(owner.UID)]; ok {
			t.Fatalf("%s and %s share uid %d", other, name, owner.UID)
		}
		uids[fmt.Sprint(owner.UID)] = name
		// The record (the rendered environment) stays the agent's.
		dir, _ := h.rt.recordDir(id)
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Fatalf("record directory %s: %v %v", dir, fi.Mode(), err)
		}
	}
}

// TestNamedUsers: runtimeConfig.user runs the workload as that user:
// at baseline one of the agent's --workload-users, never root; root only
// at --workload-policy privileged; none at restricted. Each refusal names
// the field.
func TestNamedUsers(t *testing.T) {
	requireRoot(t)
	h := newHarness(t, Config{RunFolder: isolatedRunFolder(t), UIDs: UIDRange{First: 61010, Last: 61019}, Users: []string{"61234"}})
	refused := func(rt *Runtime, rc, words string) {
		t.Helper()
		err := rt.Check(rc)
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.HasPrefix(ce.Field, "runtimeConfig") || !strings.Contains(err.Error(), words) {
			t.Fatalf("%q: %v, want a refusal naming %q", rc, err, words)
		}
	}
	for _, u := range []string{"root", "0"} {
		refused(h.rt, "command: id\nuser: "+u, "runtimeConfig.user: \""+u+"\" is root; that needs --workload-policy privileged, and this agent's is baseline")
	}
	refused(h.rt, "command: id\nuser: no-such-user-grapnel", `runtimeConfig.user: no user "no-such-user-grapnel"`)
	refused(h.rt, "command: id\nuser: 61235", "not one of this agent's --workload-users (61234)")
	s := h.spec("numbered", "command: sh\nargs: ['-c', 'id -u']\nuser: 61234")
	id := h.create(s)
	h.waitState(id, state.SucceededOk)
	if got := h.logs(id, runtime.LogOptions{Tail: -1}); got != "61234\n" {
		t.Fatalf("user 61234 ran as %q", got)
	}

	allowed := newHarness(t, Config{RunFolder: isolatedRunFolder(t), UIDs: UIDRange{First: 61020, Last: 61029}, Policy: workloadpolicy.Privileged})
	s = allowed.spec("rooted", "command: sh\nargs: ['-c', 'id -u']\nuser: root")
	id = allowed.create(s)
	allowed.waitState(id, state.SucceededOk)
	if got := allowed.logs(id, runtime.LogOptions{Tail: -1}); got != "0\n" {
		t.Fatalf("user root at --workload-policy privileged ran as %q", got)
	}

	strict := newHarness(t, Config{RunFolder: isolatedRunFolder(t), UIDs: UIDRange{First: 61030, Last: 61039}, Policy: workloadpolicy.Restricted, Users: []string{"61234"}})
	refused(strict.rt, "command: id\nuser: 61234", "runtimeConfig.user: names a user, and this agent's --workload-policy is restricted")
	if err := strict.rt.Check("command: id"); err != nil {
		t.Fatalf("restricted, a uid of its own: %v", err)
	}
	noRange := newHarness(t, Config{RunFolder: isolatedRunFolder(t), Policy: workloadpolicy.Restricted})
	refused(noRange.rt, "command: id", "runs under a uid of its own, and this agent gives none")
}

// TestUIDOfTheRangeIsOneWorkloads replays hole 2 of issue 27 on the
// runtime: a uid of the workload range belongs to the workload it is
// given to; another workload naming it, by number or by a name that
// resolves to it, is refused at every level, even where the agent lists
// the user; the workload itself may name its own.
func TestUIDOfTheRangeIsOneWorkloads(t *testing.T) {
	requireRoot(t)
	rng := UIDRange{First: 61040, Last: 61049}
	for _, level := range []workloadpolicy.Level{workloadpolicy.Baseline, workloadpolicy.Privileged} {
		h := newHarness(t, Config{RunFolder: isolatedRunFolder(t), UIDs: rng, Policy: level, Users: []string{"61040", "61041", "61042", "61043", "61044", "61045", "61046", "61047", "61048", "61049"}})
		victim := h.spec("victim", "command: sleep\nargs: ['60']")
		vowner, err := h.rt.Owner(victim.Instance, victim.Workload)
		if err != nil || vowner == nil {
			t.Fatalf("the victim's uid: %v, %v", vowner, err)
		}
		taken := fmt.Sprint(vowner.UID)
		for _, u := range []string{taken, fmt.Sprint(rng.Last - (vowner.UID - rng.First))} {
			intruder := h.spec("intruder", "command: id\nuser: '"+u+"'")
			_, err := h.rt.Owner(intruder.Instance, intruder.Workload)
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != "runtimeConfig.user" || !strings.Contains(err.Error(), "belongs to another workload") {
				t.Fatalf("%s: the intruder naming uid %s: %v", level, u, err)
			}
			if _, err := h.rt.Create(context.Background(), intruder); !errors.Is(err, runtime.ErrBadConfig) {
				t.Fatalf("%s: Create of the intruder naming uid %s: %v", level, u, err)
			}
		}
		own := h.spec("victim", "command: id\nuser: '"+taken+"'")
		if o, err := h.rt.Owner(own.Instance, own.Workload); err != nil || o.UID != vowner.UID {
			t.Fatalf("%s: the victim naming its own uid: %v, %v", level, o, err)
		}
	}
}
