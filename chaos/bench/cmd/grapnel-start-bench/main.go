// Command grapnel-start-bench measures what a client started at the same
// moment as a single replica sees: the time from exec of both to the
// client's first answer. Each start runs the replica, and at the same
// moment the CLI's `get state`, which dials before the server listens; the
// figure is the time from the two execs to the CLI's successful exit, its
// own start included. The replica finds one of four data directories
// (-data):
//
//   - fresh: empty, as at a vehicle's first boot;
//   - existing: what its earlier starts left, a few entries each, as at
//     every later boot;
//   - grown: a log that -grow updates made longer, one entry each, before
//     the first start (a drive), with every stop a clean one (SIGTERM, as
//     systemd stops the unit at ignition off);
//   - grown-cut: the same, but every stop is a power cut (SIGKILL).
//
// With -grapnel-before (the multi-call binary of another build: its CLI,
// and its replica as `grapnel server`), each start measures both builds,
// each on data of its own, alternating which goes first, so the two are
// compared in the same run on the same load. Beside the CLI, a probe that
// retries every millisecond (bench.FirstAnswer) finds when the replica
// first answers; the CLI's lag behind it is what the CLI's own dialling
// and finding the leader cost, which the machine's load moves much less
// than the replica's start.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
)

type options struct {
	serverBin, cliBin, beforeBin string
	starts, grow                 int
	data                         []string // fresh, existing, grown, grown-cut
	bound                        time.Duration
	out, workDir                 string
	keep, probe                  bool
}

// The data cases (-data).
const (
	dataFresh    = "fresh"
	dataExisting = "existing"
	dataGrown    = "grown"
	dataGrownCut = "grown-cut"
)

var errUsage = errors.New("usage")

func parse(args []string) (options, error) {
	fs := flag.NewFlagSet("grapnel-start-bench", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.serverBin, "grapnel-server", "", "grapnel-server binary (required)")
	fs.StringVar(&o.cliBin, "grapnel", "", "grapnel CLI binary measured (required)")
	fs.StringVar(&o.beforeBin, "grapnel-before", "", "the multi-call grapnel binary of the build before: its CLI and its replica (grapnel server), measured alternately in the same run")
	fs.IntVar(&o.starts, "starts", 100, "starts per build and data case (with 100 the p99 is the second slowest start, not the slowest)")
	fs.IntVar(&o.grow, "grow", 2000, "updates, one log entry each, written before the first start of the grown cases")
	data := fs.String("data", "fresh,existing,grown,grown-cut", "the data directory each start finds, comma-separated: fresh (empty), existing (what the earlier starts of the same server left), grown (existing, with -grow entries written before the first start; stopped with SIGTERM), grown-cut (the same, every stop a SIGKILL)")
	fs.DurationVar(&o.bound, "bound", 10*time.Second, "longest wait for one answer")
	fs.StringVar(&o.out, "out", "", "also write the report to this file")
	fs.StringVar(&o.workDir, "work-dir", "", "data dirs and logs (default: a fresh temp dir, removed unless the run fails or -keep)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work dir")
	fs.BoolVar(&o.probe, "probe", true, "run the 1 ms probe beside the CLI, for the CLI's lag behind the replica's first answer; it takes CPU from the replica and the CLI on a small machine (-probe=false measures the CLI alone)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.serverBin == "" || o.cliBin == "":
		return o, fmt.Errorf("%w: -grapnel-server and -grapnel are required", errUsage)
	case o.starts < 1:
		return o, fmt.Errorf("%w: -starts %d: need at least 1", errUsage, o.starts)
	case o.grow < 0:
		return o, fmt.Errorf("%w: -grow %d: must not be negative", errUsage, o.grow)
	}
	for _, d := range strings.Split(*data, ",") {
		switch d {
		case dataFresh, dataExisting, dataGrown, dataGrownCut:
		default:
			return o, fmt.Errorf("%w: -data %q: fresh, existing, grown or grown-cut", errUsage, d)
		}
		o.data = append(o.data, d)
	}
	return o, nil
}

func main() { bench.Main("grapnel-start-bench", parse, run) }

// build is one build measured: its CLI and its replica.
type build struct {
	cli, server, subcommand string
}

func run(ctx context.Context, o options, stdout io.Writer) (err error) {
	dir, cleanup, err := bench.WorkDir(o.workDir, "grapnel-start-bench-", o.keep)
	if err != nil {
		return err
	}
	defer func() { cleanup(err != nil) }()
	builds := []build{{cli: o.cliBin, server: o.serverBin}}
	if o.beforeBin != "" {
		builds = append(builds, build{cli: o.beforeBin, server: o.beforeBin, subcommand: "server"})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "grapnel-start-bench %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "single replica; `grapnel get state` exec'd at the same moment as the replica; exec -> the CLI's successful exit, %d starts each\n", o.starts)
	for _, data := range o.data {
		times := make([][]time.Duration, len(builds))
		lags := make([][]time.Duration, len(builds))
		// With data kept between starts each build has its own server,
		// prepared once beforehand and stopped after every start.
		servers := make([]*bench.Grapnel, len(builds))
		if data != dataFresh {
			for c, bl := range builds {
				g, err := prepared(ctx, o, bl, data, filepath.Join(dir, fmt.Sprintf("build%d-%s", c, data)))
				if err != nil {
					return fmt.Errorf("preparing the data of %s: %w", bl.cli, err)
				}
				defer g.Close()
				servers[c] = g
			}
		}
		for i := range o.starts {
			for k := range builds {
				c := (i + k) % len(builds) // alternate which build goes first
				bl, g := builds[c], servers[c]
				if g == nil {
					var err error
					if g, err = newServer(o, bl, filepath.Join(dir, fmt.Sprintf("build%d-start%d", c, i))); err != nil {
						return err
					}
				}
				d, ready, err := startOnce(ctx, o, g, bl.cli)
				switch {
				case servers[c] == nil:
					g.Close()
				case data == dataGrownCut:
					g.Kill(0)
				default:
					if serr := g.Stop(0, o.bound); serr != nil && err == nil {
						err = serr
					}
				}
				if err != nil {
					return fmt.Errorf("%s, %s data, start %d: %w", bl.cli, data, i, err)
				}
				times[c] = append(times[c], d)
				lags[c] = append(lags[c], max(0, d-ready))
				if o.probe {
					bench.Logf("%s, %s data, start %d: %s (the replica answered the probe at %s)", bl.cli, data, i, ms(d), ms(ready))
				} else {
					bench.Logf("%s, %s data, start %d: %s", bl.cli, data, i, ms(d))
				}
			}
		}
		fmt.Fprintf(&b, "\n== %s data directory", data)
		if data == dataGrown || data == dataGrownCut {
			fmt.Fprintf(&b, " (%d updates before the first start)", o.grow)
		}
		b.WriteString("\n")
		for c, bl := range builds {
			report(&b, bl.cli+": exec -> answer", times[c])
			if o.probe {
				report(&b, bl.cli+": behind the 1 ms probe's first answer", lags[c])
			}
		}
	}
	fmt.Fprint(stdout, b.String())
	if o.out != "" {
		if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(o.out, []byte(b.String()), 0o644)
	}
	return nil
}

// newServer prepares a single replica of build bl on dir without
// starting it.
func newServer(o options, bl build, dir string) (*bench.Grapnel, error) {
	return bench.StartGrapnel(bench.GrapnelConfig{Bin: bl.server, Subcommand: bl.subcommand, Dir: dir, Replicas: 1, Deferred: true})
}

// prepared is a replica that has run once on dir, elected itself and
// stopped: its next start finds its data. For the grown cases it wrote
// o.grow updates first, and stopped as the case stops it.
func prepared(ctx context.Context, o options, bl build, data, dir string) (*bench.Grapnel, error) {
	g, err := newServer(o, bl, dir)
	if err != nil {
		return nil, err
	}
	if err := g.Start(0); err != nil {
		g.Close()
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, o.bound)
	defer cancel()
	if _, err := bench.FirstAnswer(cctx, g.Addrs()[0], time.Now()); err != nil {
		g.Close()
		return nil, err
	}
	if data == dataGrown || data == dataGrownCut {
		if err := bench.GrowLog(ctx, g.Addrs(), o.grow, false, o.bound); err != nil {
			g.Close()
			return nil, err
		}
	}
	if data == dataGrownCut {
		g.Kill(0)
		return g, nil
	}
	if err := g.Stop(0, o.bound); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// startOnce execs the CLI, then the server g, and returns the time from
// the first exec until the CLI exits with its answer, and until the 1 ms
// probe had its answer. The server is left running.
func startOnce(ctx context.Context, o options, g *bench.Grapnel, cli string) (answer, ready time.Duration, err error) {
	cctx, cancel := context.WithTimeout(ctx, o.bound)
	defer cancel()
	cmd := exec.CommandContext(cctx, cli, "-k", "-s", g.Addrs()[0], "--response-timeout", fmt.Sprint(o.bound.Milliseconds()), "get", "state")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	if err := g.Start(0); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return 0, 0, err
	}
	type probe struct {
		d   time.Duration
		err error
	}
	probed := make(chan probe, 1)
	if o.probe {
		go func() {
			d, err := bench.FirstAnswer(cctx, g.Addrs()[0], start)
			probed <- probe{d, err}
		}()
	}
	err = cmd.Wait()
	answer = time.Since(start)
	p := probe{}
	if o.probe {
		p = <-probed
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %s", err, strings.TrimSpace(out.String()))
	}
	if p.err != nil {
		return 0, 0, p.err
	}
	return answer, p.d, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func report(b *strings.Builder, what string, ds []time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	fmt.Fprintf(b, "%s\n  p50 %s  p90 %s  p99 %s  min %s  max %s  (n=%d)\n  all: ", what,
		ms(bench.Percentile(s, 50)), ms(bench.Percentile(s, 90)), ms(bench.Percentile(s, 99)), ms(s[0]), ms(s[len(s)-1]), len(s))
	for i, d := range ds {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(b, "%.0f", float64(d)/float64(time.Millisecond))
	}
	b.WriteString(" ms\n")
}
