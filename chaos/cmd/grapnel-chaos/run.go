package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/chaos/campaign"
	"github.com/grapnel-io/grapnel/chaos/flashfs"
	"github.com/grapnel-io/grapnel/chaos/report"
	"github.com/grapnel-io/grapnel/chaos/upgrade"
)

// Goals of issue 5, printed PASS or MISS; they do not set the exit status.
const (
	goalNextAck  = time.Second
	goalAttached = 1500 * time.Millisecond
)

func runCmd(args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	short := fs.Bool("short", false, "every fault kind once (well under 10 minutes)")
	duration := fs.Duration("duration", 30*time.Minute, "length of the fault phase of a long campaign")
	minRounds := fs.Int("min-rounds", 0, "a long campaign goes on past --duration until every fault kind ran this many times")
	seed := fs.Int64("seed", 0, "seed of the schedule and the clients; 0 draws one (printed)")
	faultList := fs.String("faults", "", "scripted schedule: fault kinds, comma-separated, run once in order")
	dir := fs.String("dir", "", "run directory (default .chaos/<timestamp>)")
	binDir := fs.String("bin-dir", "", "directory with grapnel-server and grapnel-agent (default: this binary's)")
	clients := fs.Int("clients", campaign.DefaultClients, "concurrent clients")
	kills := fs.Int("comparison-kills", 0, "leader kills under Raft's default timing (default 3 short, 20 long)")
	prefix := fs.String("prefix", "gch", "name prefix of the namespaces")
	logStore := fs.String("raft-log-store", "", "the replicas' --raft-log-store: wal or bolt (default: the server's, the WAL); bolt leaves out the upgrade and corrupt-log faults")
	plain := fs.Bool("insecure", false, "run every channel without TLS and gossip without a key, and leave out the intruder fault (by default the campaign makes its own CA and certificates)")
	prevBin := fs.String("previous-release-bin", "", "grapnel-server of the previous release ("+upgrade.PreviousReleaseFile+") for the upgrade fault, built before; default: built from git into bin/"+upgrade.CacheDirName("<commit>")+"/ and kept for the next runs")
	top := fs.String("top", "", "top of the git tree, for the previous release (default: git rev-parse --show-toplevel)")
	flash := fs.Bool("flash", true, "put every host's replica data dirs and agent run folder on a flashfs mount (FUSE, in this process) and add the power-cut, disk-full, read-only, fsync-error, corrupt-log, corrupt-snapshot and flash-replaced faults; --flash=false for a machine without FUSE. When the mounts fail the campaign runs without them and says so, unless GRAPNEL_REQUIRE_FUSE=1")
	flashModel := fs.String("flash-model", "per-directory", "the flash's durability model: per-directory (a name is durable once its directory is fsynced; ALICE's, the stricter) or journal (ext4's ordered journal)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "grapnel-chaos run needs root (network namespaces, iptables)")
		return 2
	}
	if *seed == 0 {
		*seed = rand.Int64N(1<<31-1) + 1
	}
	model, err := flashfs.ParseModel(*flashModel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "--flash-model:", err)
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if *binDir == "" {
		*binDir = filepath.Dir(self)
	}
	if *dir == "" {
		*dir = filepath.Join(".chaos", time.Now().Format("20060102-150405"))
	}
	if *dir, err = filepath.Abs(*dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg := campaign.Config{
		Dir: *dir, Self: self, Seed: *seed, Short: *short, Duration: *duration, MinRounds: *minRounds,
		Bins: map[string]string{
			"grapnel-server": filepath.Join(*binDir, "grapnel-server"),
			"grapnel-agent":  filepath.Join(*binDir, "grapnel-agent"),
		},
		Clients: *clients, ComparisonKills: *kills, Prefix: *prefix, Insecure: *plain, RaftLogStore: *logStore,
		Flash: *flash, FlashModel: model, RequireFlash: os.Getenv("GRAPNEL_REQUIRE_FUSE") == "1",
		Logf: func(format string, a ...any) {
			fmt.Printf("%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, a...))
		},
	}
	if !*flash {
		cfg.NoFlash = "--flash=false"
	}
	if *faultList != "" {
		if cfg.Steps, err = campaign.ParseKinds(strings.Split(*faultList, ","), *seed, campaign.DefaultGrace); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	if *logStore == campaign.LogStoreBolt {
		cfg.UpgradeSkipped = "--raft-log-store bolt"
	}
	if wantsUpgrade(cfg.Steps) && *logStore != campaign.LogStoreBolt {
		prev, err := previousRelease(context.Background(), *top, *prevBin, cfg.Logf)
		switch {
		case err != nil && os.Getenv("GRAPNEL_REQUIRE_UPGRADE") == "1":
			fmt.Fprintln(os.Stderr, "grapnel-chaos: the upgrade fault needs the previous release (GRAPNEL_REQUIRE_UPGRADE=1):", err)
			return 2
		case err != nil:
			cfg.UpgradeSkipped = err.Error()
			fmt.Printf("grapnel-chaos: the upgrade fault is skipped: %v\n", err)
		default:
			cfg.Previous = prev
		}
	}
	fmt.Printf("grapnel-chaos: seed %d, run dir %s\n", *seed, *dir)
	began := time.Now()
	res, err := campaign.Run(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "campaign:", err)
		return 2
	}
	rep := res.Report
	fmt.Println()
	fmt.Print(rep.Markdown())
	fmt.Println()
	goals(rep)
	for _, p := range res.Log {
		fmt.Println("note:", p)
	}
	fmt.Printf("took %v; report in %s\n", time.Since(began).Round(time.Second), *dir)
	ok := true
	for _, c := range rep.Checks {
		if c.OK {
			continue
		}
		ok = false
		fmt.Printf("\nCHECK FAILED %s:\n%s\n", c.Name, c.Detail)
		if len(c.Window) > 0 {
			fmt.Printf("smallest window (%d ops):\n", len(c.Window))
			for _, op := range c.Window {
				fmt.Println("  ", op)
			}
		}
		if c.Artifact != "" {
			fmt.Println("visualization:", c.Artifact)
		}
	}
	if !ok {
		fmt.Printf("full history: %s\n", filepath.Join(*dir, "history.json"))
		return 1
	}
	return 0
}

// goals prints the goals as PASS or MISS.
func goals(rep *report.Report) {
	mark := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "MISS"
	}
	lk := rep.Figures[string(campaign.LeaderKill)]
	fmt.Printf("goal %s: next acknowledged write after a leader kill p99 %v < %v (n=%d)\n",
		mark(lk.NextAck.N > 0 && lk.NextAck.P99 < goalNextAck), lk.NextAck.P99, goalNextAck, lk.NextAck.N)
	fmt.Printf("goal %s: all agents attached after a leader kill p99 %v < %v (n=%d)\n",
		mark(lk.AllAttached.N > 0 && lk.AllAttached.P99 < goalAttached), lk.AllAttached.P99, goalAttached, lk.AllAttached.N)
	failed := 0
	restarted := "?"
	for _, c := range rep.Checks {
		if !c.OK {
			failed++
		}
		if c.Name == "stable-ids" {
			restarted = map[bool]string{true: "0", false: "some"}[c.OK]
		}
	}
	fmt.Printf("goal %s: workloads restarted: %s\n", mark(restarted == "0"), restarted)
	fmt.Printf("goal %s: checker failures: %d\n", mark(failed == 0), failed)
}

// wantsUpgrade says whether the plan may hold an upgrade: a drawn one
// has every kind, a scripted one those it names.
func wantsUpgrade(steps []campaign.Step) bool {
	if len(steps) == 0 {
		return true
	}
	for _, s := range steps {
		if s.Kind == campaign.Upgrade {
			return true
		}
	}
	return false
}

// previousRelease finds the previous release's grapnel-server: in bin
// when given, else built from git (chaos/upgrade.CachedPrevious) into
// bin/previous-<commit>/ under top, or taken from there when an earlier
// run built it; and reads its flags from its --help.
func previousRelease(ctx context.Context, top, bin string, logf func(string, ...any)) (*campaign.Previous, error) {
	if top == "" {
		out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
		if err != nil {
			return nil, fmt.Errorf("not in a git tree (--top): %v", err)
		}
		top = strings.TrimSpace(string(out))
	}
	commit, err := upgrade.ReadPreviousRelease(top)
	if err != nil {
		return nil, err
	}
	var server string
	if bin != "" {
		server = filepath.Join(bin, "grapnel-server")
		if _, err := os.Stat(server); err != nil {
			return nil, fmt.Errorf("--previous-release-bin: %w", err)
		}
	} else {
		began := time.Now()
		b, built, err := upgrade.CachedPrevious(ctx, top, commit, filepath.Join(top, "bin"))
		if err != nil {
			return nil, fmt.Errorf("the previous release %s could not be built: %w", commit, err)
		}
		commit, server = b.Commit, b.Server()
		if built {
			logf("built the previous release %s into %s in %v", commit, filepath.Dir(server), time.Since(began).Round(time.Second))
		} else {
			logf("the previous release %s, built before, from %s", commit, filepath.Dir(server))
		}
	}
	flags, err := upgrade.ReadFlags(ctx, server)
	if err != nil {
		return nil, err
	}
	return &campaign.Previous{Commit: commit, Server: server, Flags: flags}, nil
}
