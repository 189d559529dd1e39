// Command grapnel-upgrade runs the upgrade test (chaos/upgrade): it builds
// the previous release named in .ci/previous-release from git and this
// tree, starts three replicas and three agents of the previous release,
// moves each replica and agent to the new build and back and forward
// again, checking after every step that no workload restarted, no
// acknowledged write was lost, the history is linearizable, every
// replica is healthy and all hold the same state. `make upgrade-test`
// runs it in full, `make upgrade-test-short` the CI version.
//
// Exit status: 0 when every step passed, 1 when one failed, 2 when the
// test could not run.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/grapnel-io/grapnel/chaos/upgrade"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("grapnel-upgrade", flag.ContinueOnError)
	short := fs.Bool("short", false, "the CI version: no write bursts, no replica kept behind, probes once per phase")
	dir := fs.String("dir", "", "run directory (default a new temporary directory, kept when the test fails)")
	top := fs.String("top", "", "top of the git tree (default: git rev-parse --show-toplevel)")
	oldCommit := fs.String("old", "", "commit of the previous release (default: "+upgrade.PreviousReleaseFile+")")
	oldBin := fs.String("old-bin-dir", "", "binaries of the previous release, built before (default: build them from git)")
	newBin := fs.String("new-bin-dir", "", "binaries of this tree, built before (default: build them)")
	plain := fs.Bool("insecure", false, "every channel without TLS (by default the test makes a CA and a certificate per process)")
	seed := fs.Int64("seed", 0, "seed of the writers' operations; 0 draws one (printed)")
	keep := fs.Bool("keep", false, "keep the run directory when the test passes")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logf := func(format string, a ...any) {
		fmt.Printf("%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, a...))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "grapnel-upgrade:", err)
		return 2
	}
	if *top == "" {
		out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
		if err != nil {
			return fail(fmt.Errorf("not in a git tree (--top): %v", err))
		}
		*top = strings.TrimSpace(string(out))
	}
	if *oldCommit == "" {
		c, err := upgrade.ReadPreviousRelease(*top)
		if err != nil {
			return fail(err)
		}
		*oldCommit = c
	}
	if *seed == 0 {
		*seed = rand.Int64N(1<<31-1) + 1
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "grapnel-upgrade-")
		if err != nil {
			return fail(err)
		}
		*dir = d
	} else if err := os.MkdirAll(*dir, 0o755); err != nil {
		return fail(err)
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return fail(err)
	}
	*dir = abs
	fmt.Printf("grapnel-upgrade: previous release %s, seed %d, run dir %s\n", *oldCommit, *seed, *dir)
	began := time.Now()
	builds := map[upgrade.Release]*upgrade.Build{}
	if *oldBin != "" {
		builds[upgrade.Old], err = upgrade.Prebuilt(ctx, *top, upgrade.Old, *oldCommit, *oldBin)
	} else {
		logf("building the previous release %s in a git worktree", *oldCommit)
		builds[upgrade.Old], err = upgrade.BuildPrevious(ctx, *top, *oldCommit, *dir)
	}
	if err != nil {
		return fail(err)
	}
	if *newBin != "" {
		builds[upgrade.New], err = upgrade.Prebuilt(ctx, *top, upgrade.New, "HEAD", *newBin)
	} else {
		logf("building this tree")
		builds[upgrade.New], err = upgrade.BuildCurrent(ctx, *top, *dir)
	}
	if err != nil {
		return fail(err)
	}
	logf("built in %v: old %s, new %s", time.Since(began).Round(time.Second), builds[upgrade.Old].Commit, builds[upgrade.New].Commit)
	rep, err := upgrade.Run(ctx, upgrade.Config{
		Dir: *dir, Builds: builds, Short: *short, Insecure: *plain, Seed: *seed,
		RequirePodman: os.Getenv("GRAPNEL_REQUIRE_PODMAN") == "1", Logf: logf,
	})
	if rep == nil {
		return fail(err)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "grapnel-upgrade: writing the report:", err)
	}
	fmt.Println()
	fmt.Print(rep.Markdown())
	fmt.Printf("\ntook %v in all; report in %s\n", time.Since(began).Round(time.Second), *dir)
	if !rep.Passed() {
		return 1
	}
	if !*keep {
		os.RemoveAll(*dir)
	}
	return 0
}
