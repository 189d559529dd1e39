package campaign

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/check"
	"github.com/grapnel-io/grapnel/chaos/intruder"
	"github.com/grapnel-io/grapnel/chaos/netns"
	"github.com/grapnel-io/grapnel/chaos/pki"
	"github.com/grapnel-io/grapnel/chaos/upgrade"
)

// newerFlags are the flags of a replica's command line that release
// 50f62c3 lacks (its --help, compared with this build's).
var newerFlags = []string{"--grpc-max-conns-per-source", "--grpc-handshake-timeout", "--max-streams-per-agent", "--hello-timeout",
	"--max-log-campaigns-per-requester", "--max-render-steps-per-request"}

// previousFlags are the flags of a previous release that has every flag
// of args but newerFlags, read as upgrade.ReadFlags reads a --help.
func previousFlags(args []string) upgrade.Flags {
	f := upgrade.Flags{"--help": true}
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if strings.HasPrefix(a, "-") && !slices.Contains(newerFlags, name) {
			f[name] = true
		}
	}
	return f
}

// The previous release's command line is the replica's, less the flags
// it lacks with their values: the same name, data dir, addresses, joins
// and certificates, in the same order.
func TestPreviousArgs(t *testing.T) {
	c := &cluster{grace: DefaultGrace, extra: RaftDefaults}
	for i := range 3 {
		h := &netns.Host{Name: "gch-h" + string(rune('1'+i)), Addr: "10.213.7.1" + string(rune('1'+i))}
		c.reps = append(c.reps, &replica{host: h, name: "r" + string(rune('1'+i)), dataDir: "/run/r" + string(rune('1'+i))})
	}
	args, err := c.replicaArgs(1)
	if err != nil {
		t.Fatal(err)
	}
	args = append(args, "--max-streams-per-agent=9") // the = form too
	kept, dropped := PreviousArgs(args, previousFlags(args))
	if !slices.Equal(dropped, newerFlags) {
		t.Errorf("dropped %v, want %v", dropped, newerFlags)
	}
	var want []string
	for i := 0; i < len(args); i++ {
		name, _, _ := strings.Cut(args[i], "=")
		if slices.Contains(newerFlags, name) {
			if !strings.Contains(args[i], "=") {
				i++ // its value
			}
			continue
		}
		want = append(want, args[i])
	}
	if !slices.Equal(kept, want) {
		t.Fatalf("kept\n%q\nwant\n%q", kept, want)
	}
	for _, must := range [][]string{{"--name", "r2"}, {"--data-dir", "/run/r2"}, {"--join", "10.213.7.11:25571"}, {"--join", "10.213.7.13:25571"},
		{"--metrics-address", ":25581"}, {"--raft-election-timeout", "1s"}} {
		if i := slices.Index(kept, must[0]); i < 0 || !slices.Contains(kept[i:], must[1]) {
			t.Errorf("%v missing from %q", must, kept)
		}
	}
	if bad := previousFlags(args).Unknown(kept); len(bad) > 0 {
		t.Errorf("the previous release would still be given %v", bad)
	}
	// A build that has every flag gets the command line unchanged.
	full := previousFlags(args)
	for _, f := range newerFlags {
		full[f] = true
	}
	all, none := PreviousArgs(args, full)
	if !slices.Equal(all, args) || len(none) > 0 {
		t.Errorf("a build with every flag: kept %q, dropped %v", all, none)
	}
}

// Without the previous release the plan leaves the upgrade out and the
// report says why; a scripted upgrade is then a configuration error.
func TestNoPreviousRelease(t *testing.T) {
	cfg := Config{Dir: "/tmp/x", Bins: map[string]string{"grapnel-server": "s", "grapnel-agent": "a"}, Self: "c", Short: true, Flash: true,
		UpgradeSkipped: "the previous release 50f62c3 could not be built: no git history"}
	if slices.Contains(cfg.kinds(), Upgrade) {
		t.Fatal("the upgrade is in a plan without the previous release")
	}
	if got := cfg.skipped(); len(got) != 1 || got[0] != "upgrade: the previous release 50f62c3 could not be built: no git history" {
		t.Fatalf("skipped %q", got)
	}
	if _, err := cfg.withDefaults(); err != nil {
		t.Fatal(err)
	}
	cfg.Steps = []Step{{Kind: LeaderKill}, {Kind: Upgrade}}
	if _, err := cfg.withDefaults(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Steps[1]") {
		t.Fatalf("a scripted upgrade without the previous release: %v", err)
	}
	cfg.Previous = &Previous{Commit: "50f62c34ea60864e55b9e558cb65257da179397c", Server: "/bin/old"}
	if _, err := cfg.withDefaults(); err != nil {
		t.Fatal(err)
	}
	cfg.Steps = nil
	if !slices.Contains(cfg.kinds(), Upgrade) || len(cfg.skipped()) != 0 {
		t.Fatalf("with the previous release: kinds %v, skipped %v", cfg.kinds(), cfg.skipped())
	}
}

// An attempt with a key removed at cluster version 0 is reported, not
// counted: accepted or refused, it fails no check; an accepted attempt
// that owed a refusal still does.
func TestIntruderExpectationSplit(t *testing.T) {
	attempts := []intruder.Attempt{
		{Target: "r1", Channel: "forward", What: "UpdateState with a removed replica's revoked certificate", Detail: "Unauthenticated"},
		{Target: "r1", Channel: "forward", What: "UpdateState with a replica's certificate removed at cluster version 0", Accepted: true,
			NotExpected: intruder.NotRevoked, Detail: "PermissionDenied: not from the member's address"},
		{Target: "r2", Channel: "forward", What: "UpdateState with a replica's certificate removed at cluster version 0",
			NotExpected: intruder.NotRevoked, Detail: "PermissionDenied"},
		{Target: "r1", Channel: "forward", What: "SnapshotSave with a removed replica's revoked certificate", Skipped: "no such key"},
	}
	var f check.IntruderFinding
	tallyAttempts(&f, attempts)
	if f.Attempts != 4 || len(f.Accepted) != 0 {
		t.Fatalf("attempts %d, accepted %v", f.Attempts, f.Accepted)
	}
	res := check.IntruderRefused([]check.IntruderFinding{f})
	if !res.OK || !strings.Contains(res.Detail, "1 attempts, every one refused") || !strings.Contains(res.Detail, "2 more not expected refused ("+intruder.NotRevoked+"), 1 of them refused anyway") {
		t.Fatalf("OK %v: %s", res.OK, res.Detail)
	}
	// The revoked key's attempt accepted fails, as before.
	attempts[0].Accepted = true
	f = check.IntruderFinding{}
	tallyAttempts(&f, attempts)
	if len(f.Accepted) != 1 || check.IntruderRefused([]check.IntruderFinding{f}).OK {
		t.Fatalf("an accepted attempt with the revoked key: accepted %v", f.Accepted)
	}
}

// Removed keys carry the cluster version recorded at their removal; one
// not recorded is taken at the revocation's version (its refusal owed).
func TestRemovedKeysCarryTheirClusterVersion(t *testing.T) {
	set, err := pki.Make(t.TempDir(), []string{"r1", "r2", "r3"}, []string{"agent_h1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{pki: set, removedAt: map[string]uint32{}}
	for i, name := range []string{"r1", "r2", "r3"} {
		old, err := set.Replica(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := set.Reissue(name, 1); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			c.removedAt[old.Cert] = uint32(i)
		}
	}
	got := c.removedKeys()
	if len(got) != 3 || got[0].ClusterVersion != 0 || got[1].ClusterVersion != 1 || got[2].ClusterVersion != 1 {
		t.Fatalf("removed keys %+v, want versions 0, 1 and 1 (not recorded)", got)
	}
}
