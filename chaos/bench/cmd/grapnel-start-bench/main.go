// Command grapnel-start-bench measures what a client started at the same
// moment as a single replica sees: the time from exec of both to the
// client's first answer. Each start runs grapnel-server, on a fresh data
// directory or on the data its earlier starts left (-data: a vehicle's
// replica starts with data at every boot but its first), and at the same
// moment the CLI's `get state`, which dials before the server listens; the
// figure is the time from the two execs to the CLI's successful exit, its
// own start included. With
// -grapnel-before (the CLI of another build), each start measures both
// CLIs against fresh servers, alternating which goes first, so the two
// are compared in the same run on the same load. Beside the CLI, a probe
// that retries every millisecond (bench.FirstAnswer) finds when the
// replica first answers; the CLI's lag behind it is what the CLI's own
// dialling and finding the leader cost, which the machine's load moves
// much less than the replica's start.
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
	starts                       int
	data                         []string // "fresh", "existing"
	bound                        time.Duration
	out, workDir                 string
	keep                         bool
}

var errUsage = errors.New("usage")

func parse(args []string) (options, error) {
	fs := flag.NewFlagSet("grapnel-start-bench", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.serverBin, "grapnel-server", "", "grapnel-server binary (required)")
	fs.StringVar(&o.cliBin, "grapnel", "", "grapnel CLI binary measured (required)")
	fs.StringVar(&o.beforeBin, "grapnel-before", "", "grapnel CLI of the build before, measured alternately in the same run")
	fs.IntVar(&o.starts, "starts", 20, "starts per CLI and data case")
	data := fs.String("data", "fresh,existing", "the data directory each start finds, comma-separated: fresh (empty), existing (what the earlier starts of the same server left)")
	fs.DurationVar(&o.bound, "bound", 10*time.Second, "longest wait for one answer")
	fs.StringVar(&o.out, "out", "", "also write the report to this file")
	fs.StringVar(&o.workDir, "work-dir", "", "data dirs and logs (default: a fresh temp dir, removed unless the run fails or -keep)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work dir")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.serverBin == "" || o.cliBin == "":
		return o, fmt.Errorf("%w: -grapnel-server and -grapnel are required", errUsage)
	case o.starts < 1:
		return o, fmt.Errorf("%w: -starts %d: need at least 1", errUsage, o.starts)
	}
	for _, d := range strings.Split(*data, ",") {
		if d != "fresh" && d != "existing" {
			return o, fmt.Errorf("%w: -data %q: fresh or existing", errUsage, d)
		}
		o.data = append(o.data, d)
	}
	return o, nil
}

func main() { bench.Main("grapnel-start-bench", parse, run) }

func run(ctx context.Context, o options, stdout io.Writer) (err error) {
	dir, cleanup, err := bench.WorkDir(o.workDir, "grapnel-start-bench-", o.keep)
	if err != nil {
		return err
	}
	defer func() { cleanup(err != nil) }()
	clis := []string{o.cliBin}
	if o.beforeBin != "" {
		clis = append(clis, o.beforeBin)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "grapnel-start-bench %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "single replica; `grapnel get state` exec'd at the same moment as grapnel-server; exec -> the CLI's successful exit, %d starts each\n", o.starts)
	for _, data := range o.data {
		times := make([][]time.Duration, len(clis))
		lags := make([][]time.Duration, len(clis))
		// With existing data each CLI has its own server, started once
		// beforehand and stopped after every start.
		servers := make([]*bench.Grapnel, len(clis))
		if data == "existing" {
			for c := range clis {
				g, err := prepared(ctx, o, filepath.Join(dir, fmt.Sprintf("cli%d-existing", c)))
				if err != nil {
					return fmt.Errorf("preparing the data of %s: %w", clis[c], err)
				}
				defer g.Close()
				servers[c] = g
			}
		}
		for i := range o.starts {
			for k := range clis {
				c := (i + k) % len(clis) // alternate which CLI goes first
				g := servers[c]
				if g == nil {
					var err error
					if g, err = newServer(o, filepath.Join(dir, fmt.Sprintf("cli%d-start%d", c, i))); err != nil {
						return err
					}
				}
				d, ready, err := startOnce(ctx, o, g, clis[c])
				if servers[c] == nil {
					g.Close()
				} else if serr := g.Stop(0, o.bound); serr != nil && err == nil {
					err = serr
				}
				if err != nil {
					return fmt.Errorf("%s, %s data, start %d: %w", clis[c], data, i, err)
				}
				times[c] = append(times[c], d)
				lags[c] = append(lags[c], max(0, d-ready))
				bench.Logf("%s, %s data, start %d: %s (the replica answered the probe at %s)", clis[c], data, i, ms(d), ms(ready))
			}
		}
		fmt.Fprintf(&b, "\n== %s data directory\n", data)
		for c, cli := range clis {
			report(&b, cli+": exec -> answer", times[c])
			report(&b, cli+": behind the 1 ms probe's first answer", lags[c])
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

// newServer prepares a single replica on dir without starting it.
func newServer(o options, dir string) (*bench.Grapnel, error) {
	return bench.StartGrapnel(bench.GrapnelConfig{Bin: o.serverBin, Dir: dir, Replicas: 1, Deferred: true})
}

// prepared is a replica that has run once on dir, elected itself and
// stopped: its next start finds its data.
func prepared(ctx context.Context, o options, dir string) (*bench.Grapnel, error) {
	g, err := newServer(o, dir)
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
	go func() {
		d, err := bench.FirstAnswer(cctx, g.Addrs()[0], start)
		probed <- probe{d, err}
	}()
	err = cmd.Wait()
	answer = time.Since(start)
	p := <-probed
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
