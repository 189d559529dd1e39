// Command grapnel-bench measures a Grapnel cluster of real grapnel-server
// processes against an etcd cluster on the same machine and prints the
// tables of chaos/bench: UpdateState throughput and latency next to etcd
// puts for each client count, and the failover time after SIGKILL and
// after SIGSTOP of the leader. scripts/bench.sh builds the binaries and
// runs it.
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
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/chaos/pki"
)

type options struct {
	grapnelBin, etcdBin, etcdLoad string
	clients                       []int
	load                          bench.LoadConfig
	payload                       int
	timeout                       time.Duration
	replicas                      int
	kills, freezes                int
	lookout                       bool
	settle                        time.Duration
	bound                         time.Duration
	skipThroughput, skipEtcd      bool
	out, workDir                  string
	keep                          bool
	serverFlags                   []string
	configOnly                    bool
	commanders                    bool
	// pki secures the cluster of one measurement; nil is --insecure.
	pki *pki.Set
	// security is plain, tls or both (one run, side by side).
	security string
	// logStore is wal, bolt or both: the throughput of the first security
	// mode measured on each Raft log store, side by side.
	logStore string
	// timerSlack is the replicas' timer slack, as their unit sets it.
	timerSlack time.Duration
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

var errUsage = errors.New("usage")

func parse(args []string) (options, error) {
	fs := flag.NewFlagSet("grapnel-bench", flag.ContinueOnError)
	var o options
	var clients string
	var extra stringList
	fs.StringVar(&o.grapnelBin, "grapnel-server", "", "grapnel-server binary (required)")
	fs.StringVar(&o.etcdBin, "etcd", "", "etcd binary from chaos/etcdpeer (required unless -skip-etcd)")
	fs.StringVar(&o.etcdLoad, "etcdload", "", "etcdload binary from chaos/etcdpeer (required unless -skip-etcd)")
	fs.StringVar(&clients, "clients", "1,16,64", "comma-separated concurrent client counts")
	fs.DurationVar(&o.load.Duration, "duration", 10*time.Second, "measured phase per client count and system")
	fs.IntVar(&o.load.Count, "count", 1000000, "most measured operations per client count and system")
	fs.DurationVar(&o.load.Warmup, "warmup", time.Second, "unmeasured phase before each measurement")
	fs.IntVar(&o.payload, "payload", 256, "runtimeConfig size (Grapnel) and value size (etcd) in bytes")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Second, "bound of one request")
	fs.IntVar(&o.replicas, "replicas", 3, "Grapnel replicas (etcd always runs 3 members)")
	fs.IntVar(&o.kills, "kills", 50, "leader kills (SIGKILL, then a restart) of the failover measurement (0 skips them)")
	fs.IntVar(&o.freezes, "freezes", 50, "leader freezes (SIGSTOP, SIGCONT once a new leader acknowledged an update) of the failover measurement, on a fresh cluster after the kills (0 skips them)")
	// A failover writer stands for a long-lived client, such as an agent
	// or a vehicle's app, which keeps a lookout; -lookout=false measures
	// the CLI, which learns of a frozen leader from its heartbeat alone.
	fs.BoolVar(&o.lookout, "lookout", true, "the failover writer keeps a lookout at another replica, as an agent does (long-lived client); -lookout=false: a CLI-like client (heartbeat only)")
	fs.DurationVar(&o.settle, "settle", time.Second, "steady writes to the healthy cluster before each kill or freeze")
	fs.DurationVar(&o.bound, "bound", 60*time.Second, "longest wait for a cluster to become ready or recover")
	fs.BoolVar(&o.skipThroughput, "skip-throughput", false, "measure only the failover")
	fs.BoolVar(&o.skipEtcd, "skip-etcd", false, "measure Grapnel only")
	bench.TimerSlackFlag(fs, &o.timerSlack)
	fs.StringVar(&o.out, "out", "", "also write the report to this file")
	fs.StringVar(&o.workDir, "work-dir", "", "data dirs and logs (default: a fresh temp dir, removed unless the run fails or -keep)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work dir")
	fs.BoolVar(&o.configOnly, "config-updates", false, "UpdateState writes a config item instead of a workload's runtimeConfig (no new instance, no Removed broadcast)")
	// CommandConnection is Ankaios's current client stream; CliConnection
	// is deprecated upstream and also carries every workload-state
	// broadcast, which etcd's put clients have no counterpart of.
	fs.BoolVar(&o.commanders, "commanders", true, "writers open CommandConnection (commanders: own answers only); -commanders=false opens the deprecated CliConnection, which also receives every workload-state broadcast")
	fs.StringVar(&o.security, "security", "both", "plain (--insecure), tls (mTLS on gRPC and Raft, gossip encrypted) or both, measured in one run side by side")
	fs.StringVar(&o.logStore, "log-store", "both", "the replicas' Raft log store (--raft-log-store): wal, bolt, or both (the throughput of the first -security mode measured on each, side by side; the rest on the WAL)")
	fs.Var(&extra, "server-flag", "extra grapnel-server flag, e.g. -server-flag=--raft-heartbeat-timeout=500ms (repeatable)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.serverFlags = extra
	o.load.Clients = 1
	for _, c := range strings.Split(clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return o, fmt.Errorf("%w: -clients: %q is not a positive number", errUsage, c)
		}
		o.clients = append(o.clients, n)
	}
	switch {
	case o.grapnelBin == "":
		return o, fmt.Errorf("%w: -grapnel-server is required", errUsage)
	case !o.skipEtcd && !o.skipThroughput && (o.etcdBin == "" || o.etcdLoad == ""):
		return o, fmt.Errorf("%w: -etcd and -etcdload are required unless -skip-etcd", errUsage)
	case o.payload < bench.MinPayload:
		return o, fmt.Errorf("%w: -payload %d: need at least %d bytes", errUsage, o.payload, bench.MinPayload)
	case o.kills < 0:
		return o, fmt.Errorf("%w: -kills %d: must not be negative", errUsage, o.kills)
	case o.freezes < 0:
		return o, fmt.Errorf("%w: -freezes %d: must not be negative", errUsage, o.freezes)
	case o.security != "plain" && o.security != "tls" && o.security != "both":
		return o, fmt.Errorf("%w: -security %q: plain, tls or both", errUsage, o.security)
	case o.logStore != "wal" && o.logStore != "bolt" && o.logStore != "both":
		return o, fmt.Errorf("%w: -log-store %q: wal, bolt or both", errUsage, o.logStore)
	case (o.kills > 0 || o.freezes > 0) && o.replicas < 3:
		return o, fmt.Errorf("%w: -kills and -freezes need -replicas of at least 3", errUsage)
	}
	return o, nil
}

func main() { bench.Main("grapnel-bench", parse, run) }

func run(ctx context.Context, o options, stdout io.Writer) (err error) {
	dir, cleanup, err := bench.WorkDir(o.workDir, "grapnel-bench-", o.keep)
	if err != nil {
		return err
	}
	defer func() { cleanup(err != nil) }()
	var report strings.Builder
	report.WriteString(header(o))
	var modes []bool // secured?
	switch o.security {
	case "plain":
		modes = []bool{false}
	case "tls":
		modes = []bool{true}
	default:
		modes = []bool{false, true}
	}
	var certs *pki.Set
	if o.security != "plain" {
		if certs, err = pki.Make(filepath.Join(dir, "pki"), nil, nil, 24*time.Hour); err != nil {
			return err
		}
	}
	label := func(secured bool) string {
		if secured {
			return "TLS (mTLS on gRPC and Raft, TLS 1.3 on Raft; gossip encrypted)"
		}
		return "plain (--insecure: no TLS anywhere)"
	}
	perMode := map[bool][]bench.ThroughputRow{}
	fails := map[bool][]bench.FailoverResult{}
	var boltRows []bench.ThroughputRow
	boltMode := false // the security mode boltRows were measured in
	for i, secured := range modes {
		mo := o.onStore(o.logStore)
		if secured {
			mo.pki = certs
			mo.skipEtcd = true // etcd is measured once, beside the first mode
		}
		if !o.skipThroughput {
			rows, err := throughput(ctx, mo, filepath.Join(dir, mode(secured)))
			if err != nil {
				return err
			}
			perMode[secured] = rows
			if i == 0 && o.logStore == "both" {
				bo := o.onStore("bolt")
				bo.pki, bo.skipEtcd = mo.pki, true
				if boltRows, err = throughput(ctx, bo, filepath.Join(dir, mode(secured)+"-bolt")); err != nil {
					return err
				}
				boltMode = secured
			}
			what := fmt.Sprintf("one workload per client, %d-byte runtimeConfig", o.payload)
			if o.configOnly {
				what = fmt.Sprintf("one config item per client, %d bytes", o.payload)
			}
			if o.commanders {
				what += ", writers on CommandConnection"
			} else {
				what += ", writers on the deprecated CliConnection (each receives every workload-state broadcast)"
			}
			fmt.Fprintf(&report, "\nThroughput, %s: UpdateState (%s) vs etcd put (%d-byte value), %d replicas/members\n\n",
				label(secured), what, o.payload, o.replicas)
			report.WriteString(bench.ThroughputTable(rows))
		}
		if o.kills > 0 || o.freezes > 0 {
			res, err := failover(ctx, mo, filepath.Join(dir, mode(secured)))
			if err != nil {
				return err
			}
			fails[secured] = res
			fmt.Fprintf(&report, "\nFailover, %s: %s; one client updating continuously, %s\n\n",
				label(secured), faults(o), writerKind(o.lookout))
			report.WriteString(bench.FailoverTable(res...))
		}
	}
	if len(modes) == 2 {
		fmt.Fprintf(&report, "\nCost of security, same run: plain vs TLS (mTLS on gRPC and on Raft, gossip encrypted)\n\n")
		if !o.skipThroughput {
			rows := make([]bench.SecurityRow, len(o.clients))
			for i, n := range o.clients {
				rows[i] = bench.SecurityRow{Clients: n, Plain: perMode[false][i].Grapnel, TLS: perMode[true][i].Grapnel}
			}
			report.WriteString(bench.SecurityTable(rows))
		}
		if o.kills > 0 || o.freezes > 0 {
			if !o.skipThroughput {
				report.WriteString("\n")
			}
			report.WriteString(bench.FailoverSecurityTable(fails[false], fails[true]))
		}
	}
	if boltRows != nil {
		fmt.Fprintf(&report, "\nRaft log store, same run, %s: the WAL (the default) vs raft-boltdb/v2 (--raft-log-store bolt); disk/op is what the %d replicas wrote per update\n\n",
			label(boltMode), o.replicas)
		rows := make([]bench.LogStoreRow, len(o.clients))
		for i, n := range o.clients {
			rows[i] = bench.LogStoreRow{Clients: n, WAL: perMode[boltMode][i].Grapnel, Bolt: boltRows[i].Grapnel}
		}
		report.WriteString(bench.LogStoreTable(rows))
	}
	fmt.Fprint(stdout, report.String())
	if o.out != "" {
		if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(o.out, []byte(report.String()), 0o644)
	}
	return nil
}

// onStore is o with the replicas on the Raft log store kind names ("both":
// the WAL, the default).
func (o options) onStore(kind string) options {
	if kind == "both" {
		kind = "wal"
	}
	o.serverFlags = append(slices.Clone(o.serverFlags), "--raft-log-store="+kind)
	return o
}

// header says what was measured on what, so a figure is never read
// without its conditions.
func header(o options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "grapnel-bench %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "machine: %s/%s, %d CPUs, %s\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	flags := "defaults"
	if len(o.serverFlags) > 0 {
		flags = strings.Join(o.serverFlags, " ")
	}
	fmt.Fprintf(&b, "grapnel-server flags: %s\n", flags)
	fmt.Fprintf(&b, "security: %s\n", o.security)
	fmt.Fprintf(&b, "raft log store: %s\n", o.logStore)
	if !o.skipEtcd && !o.skipThroughput {
		fmt.Fprintf(&b, "etcd: %s (defaults)\n", version(o.etcdBin))
	}
	fmt.Fprintf(&b, "bounds: %v or %d operations measured after %v warm-up per point; request timeout %v\n",
		o.load.Duration, o.load.Count, o.load.Warmup, o.timeout)
	if o.kills > 0 || o.freezes > 0 {
		fmt.Fprintf(&b, "failover writer: %s (-lookout=%v)\n", writerKind(o.lookout), o.lookout)
	}
	return b.String()
}

// writerKind says which client the failover writer stands for.
func writerKind(lookout bool) string {
	if lookout {
		return "a long-lived client with a lookout at another replica, as an agent keeps"
	}
	return "a CLI-like client without a lookout, which learns of a frozen leader from its heartbeat"
}

// faults says what the failover measurement does to the leader.
func faults(o options) string {
	var parts []string
	if o.kills > 0 {
		parts = append(parts, fmt.Sprintf("SIGKILL of the leader of %d replicas, %d times (restarted from its data directory)", o.replicas, o.kills))
	}
	if o.freezes > 0 {
		fresh := ""
		if o.kills > 0 {
			fresh = " on a fresh cluster"
		}
		parts = append(parts, fmt.Sprintf("SIGSTOP of the leader of %d replicas%s, %d times (SIGCONT once a new leader acknowledged an update)", o.replicas, fresh, o.freezes))
	}
	return strings.Join(parts, "; then ")
}

func version(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "version unknown"
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(first)
}

func bounded(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

func startGrapnel(ctx context.Context, o options, dir string) (*bench.Grapnel, int, error) {
	g, err := bench.StartGrapnel(bench.GrapnelConfig{Bin: o.grapnelBin, Dir: dir, Replicas: o.replicas, Extra: o.serverFlags, PKI: o.pki, TimerSlack: o.timerSlack})
	if err != nil {
		return nil, 0, err
	}
	bctx, cancel := bounded(ctx, o.bound)
	defer cancel()
	leader, err := g.WaitHealthy(bctx)
	if err != nil {
		g.Close()
		return nil, 0, err
	}
	bench.Logf("grapnel: %d replicas up in %s, leader %s", o.replicas, dir, g.Replicas[leader].Name)
	return g, leader, nil
}

func throughput(ctx context.Context, o options, dir string) ([]bench.ThroughputRow, error) {
	rows := make([]bench.ThroughputRow, len(o.clients))
	g, leader, err := startGrapnel(ctx, o, filepath.Join(dir, "grapnel-throughput"))
	if err != nil {
		return nil, err
	}
	defer g.Close()
	for i, n := range o.clients {
		rows[i].Clients = n
		cfg := o.load
		cfg.Clients = n
		// Every address is given; the leader's first, so that even a
		// client that does not follow leaders talks to it directly.
		op, ws, err := bench.GrapnelOp(g.LeaderFirst(leader), g.ClientOptions(), n, o.payload, o.timeout, o.configOnly, o.commanders)
		if err != nil {
			return nil, err
		}
		term := g.Term(ctx)
		pids := make([]int, o.replicas)
		for i := range pids {
			pids[i] = g.Pid(i)
		}
		written := bench.WrittenBytes(pids)
		s, err := bench.RunLoad(ctx, "grapnel", cfg, op)
		written = bench.WrittenBytes(pids) - written
		elections := g.Term(ctx) - term
		onLeader := 0
		for _, w := range ws {
			if w.Addr() == g.Replicas[leader].Addr {
				onLeader++
			}
			w.Close()
		}
		if err != nil {
			return nil, err
		}
		sum := bench.SummarizeWithDisk(s, written)
		rows[i].Grapnel = &sum
		rows[i].Elections = int(elections)
		bench.Logf("grapnel %d clients: %.0f ops/s, p50 %v, p99 %v, %d errors, %d/%d clients on the first leader, term +%d",
			n, sum.OpsPerSec, bench.FormatDuration(sum.P50), bench.FormatDuration(sum.P99), sum.Errors, onLeader, n, elections)
	}
	g.Close()
	if o.skipEtcd {
		return rows, nil
	}
	e, err := bench.StartEtcd(bench.EtcdConfig{Bin: o.etcdBin, Load: o.etcdLoad, Dir: filepath.Join(dir, "etcd"), Members: 3})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	bctx, cancel := bounded(ctx, o.bound)
	err = e.WaitHealthy(bctx)
	cancel()
	if err != nil {
		return nil, err
	}
	bench.Logf("etcd: 3 members up")
	for i, n := range o.clients {
		cfg := o.load
		cfg.Clients = n
		written := bench.WrittenBytes(e.Pids())
		s, err := e.Run(ctx, cfg, o.payload, o.timeout)
		if err != nil {
			return nil, err
		}
		sum := bench.SummarizeWithDisk(s, bench.WrittenBytes(e.Pids())-written)
		rows[i].Etcd = &sum
		bench.Logf("etcd %d clients: %.0f ops/s, p50 %v, p99 %v, %d errors",
			n, sum.OpsPerSec, bench.FormatDuration(sum.P50), bench.FormatDuration(sum.P99), sum.Errors)
	}
	return rows, nil
}

// failover measures the kills and then the freezes, each on a cluster of
// its own, so that the freeze figures do not depend on how many kills (and
// restarts, each replaying a longer log) came before them.
func failover(ctx context.Context, o options, dir string) ([]bench.FailoverResult, error) {
	var out []bench.FailoverResult
	for _, f := range []struct {
		fault bench.Fault
		n     int
		dir   string
	}{
		{bench.Kill, o.kills, "grapnel-failover"},
		{bench.Freeze, o.freezes, "grapnel-freeze"},
	} {
		if f.n == 0 {
			continue
		}
		res, err := measureFailover(ctx, o, filepath.Join(dir, f.dir), f.fault, f.n)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

func measureFailover(ctx context.Context, o options, dir string, fault bench.Fault, n int) (bench.FailoverResult, error) {
	g, _, err := startGrapnel(ctx, o, dir)
	if err != nil {
		return bench.FailoverResult{}, err
	}
	defer g.Close()
	return bench.MeasureFailover(ctx, g, bench.FailoverConfig{
		Fault: fault, Faults: n, Lookout: o.lookout,
		Payload: o.payload, Timeout: o.timeout, Bound: o.bound, Settle: o.settle, Logf: bench.Logf,
	})
}

// mode names a measurement's directory.
func mode(secured bool) string {
	if secured {
		return "tls"
	}
	return "plain"
}
