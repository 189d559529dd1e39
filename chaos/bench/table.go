package bench

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// ThroughputRow is one client count of the comparison; either side may be
// missing when it was not run.
type ThroughputRow struct {
	Clients       int
	Grapnel, Etcd *Summary
	// Elections is how far Grapnel's Raft term moved during the run: a
	// leader change under load, which the figures include.
	Elections int
}

// ThroughputTable prints the comparison: per client count Grapnel's and
// etcd's acknowledged operations per second, p50 and p99, and the ratio of
// the throughputs (Grapnel / etcd), and the bytes all servers wrote to
// storage per operation. Failed operations are listed below.
func ThroughputTable(rows []ThroughputRow) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "clients\tgrapnel ops/s\tp50\tp99\tdisk/op\tetcd ops/s\tp50\tp99\tdisk/op\tratio\t")
	var notes []string
	for _, r := range rows {
		g, e := side(r.Grapnel), side(r.Etcd)
		ratio := "-"
		if r.Grapnel != nil && r.Etcd != nil && r.Etcd.OpsPerSec > 0 {
			ratio = fmt.Sprintf("%.2f", r.Grapnel.OpsPerSec/r.Etcd.OpsPerSec)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Clients, g[0], g[1], g[2], g[3], e[0], e[1], e[2], e[3], ratio)
		if r.Elections > 0 {
			notes = append(notes, fmt.Sprintf("grapnel, %d clients: the Raft term moved by %d during the run (leader elections under load)", r.Clients, r.Elections))
		}
		for _, s := range []*Summary{r.Grapnel, r.Etcd} {
			if s != nil && s.Errors > 0 {
				notes = append(notes, fmt.Sprintf("%s, %d clients: %d failed operations (first: %s)", s.System, s.Clients, s.Errors, s.FirstError))
			}
		}
	}
	tw.Flush()
	for _, n := range notes {
		b.WriteString(n + "\n")
	}
	return b.String()
}

func side(s *Summary) [4]string {
	if s == nil {
		return [4]string{"-", "-", "-", "-"}
	}
	disk := "-"
	if s.DiskPerOp > 0 {
		disk = fmt.Sprintf("%.1f KiB", s.DiskPerOp/1024)
	}
	return [4]string{fmt.Sprintf("%.0f", s.OpsPerSec), FormatDuration(s.P50), FormatDuration(s.P99), disk}
}

// FormatDuration prints a latency with about three significant digits,
// in ms below a second.
func FormatDuration(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms >= 1000:
		return fmt.Sprintf("%.2fs", ms/1000)
	case ms >= 100:
		return fmt.Sprintf("%.0fms", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1fms", ms)
	default:
		return fmt.Sprintf("%.2fms", ms)
	}
}

// failoverRow is one row of the failover tables.
type failoverRow struct {
	name string
	d    []time.Duration
}

// failoverRows are a result's rows: the outage, the election and the
// rejoin, named after the fault.
func failoverRows(r FailoverResult) []failoverRow {
	heal := "restart"
	if r.Fault == Freeze {
		heal = "thaw"
	}
	return []failoverRow{
		{r.Fault.String() + " -> next acknowledged update", r.Outage},
		{r.Fault.String() + " -> new leader (Status poll)", r.Election},
		{heal + " -> healthy and caught up", r.Rejoin},
	}
}

// FailoverTable prints p50, p99 and max of the outages, the elections and
// the rejoin times of failover measurements (kills, freezes), one block of
// rows per result, and what each writer saw.
func FailoverTable(rs ...FailoverResult) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tn\tp50\tp99\tmax")
	for _, r := range rs {
		for _, row := range failoverRows(r) {
			d := sortedCopy(row.d)
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", row.name, len(d),
				FormatDuration(Percentile(d, 50)), FormatDuration(Percentile(d, 99)), FormatDuration(Percentile(d, 100)))
		}
	}
	tw.Flush()
	for _, r := range rs {
		fmt.Fprintf(&b, "writer across the %ss: %d updates acknowledged, %d failed\n", r.Fault, r.Acks, r.Errors)
	}
	return b.String()
}

// sortedCopy is a sorted copy of d.
func sortedCopy(d []time.Duration) []time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d
}

// SecurityRow is one client count measured with the cluster plain
// (--insecure) and secured (mTLS on gRPC and Raft, gossip encrypted).
type SecurityRow struct {
	Clients    int
	Plain, TLS *Summary
}

// SecurityTable prints plain and TLS side by side: ops/s, p50 and p99 of
// each, and the TLS throughput as a share of the plain one.
func SecurityTable(rows []SecurityRow) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "clients\tplain ops/s\tp50\tp99\tTLS ops/s\tp50\tp99\tTLS/plain\t")
	for _, r := range rows {
		p, t := side(r.Plain), side(r.TLS)
		ratio := "-"
		if r.Plain != nil && r.TLS != nil && r.Plain.OpsPerSec > 0 {
			ratio = fmt.Sprintf("%.2f", r.TLS.OpsPerSec/r.Plain.OpsPerSec)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Clients, p[0], p[1], p[2], t[0], t[1], t[2], ratio)
	}
	tw.Flush()
	return b.String()
}

// LogStoreRow is one client count measured with the replicas' Raft log
// in the WAL (the default) and in raft-boltdb/v2 (--raft-log-store bolt).
type LogStoreRow struct {
	Clients   int
	WAL, Bolt *Summary
}

// LogStoreTable prints the WAL and raft-boltdb side by side: ops/s, p50,
// p99 and the bytes written per update of each, and the bolt throughput
// and bytes written as shares of the WAL's.
func LogStoreTable(rows []LogStoreRow) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "clients	WAL ops/s	p50	p99	disk/op	bolt ops/s	p50	p99	disk/op	bolt/WAL ops	bolt/WAL disk	")
	for _, r := range rows {
		w, o := side(r.WAL), side(r.Bolt)
		ops, disk := "-", "-"
		if r.WAL != nil && r.Bolt != nil {
			if r.WAL.OpsPerSec > 0 {
				ops = fmt.Sprintf("%.2f", r.Bolt.OpsPerSec/r.WAL.OpsPerSec)
			}
			if r.WAL.DiskPerOp > 0 && r.Bolt.DiskPerOp > 0 {
				disk = fmt.Sprintf("%.1f", r.Bolt.DiskPerOp/r.WAL.DiskPerOp)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Clients, w[0], w[1], w[2], w[3], o[0], o[1], o[2], o[3], ops, disk)
	}
	tw.Flush()
	return b.String()
}

// FailoverSecurityTable prints the failover percentiles of plain and
// secured runs side by side, the rows of each fault measured in both.
func FailoverSecurityTable(plain, secured []FailoverResult) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tplain p50\tp99\tmax\tTLS p50\tp99\tmax")
	for _, p := range plain {
		i := slices.IndexFunc(secured, func(s FailoverResult) bool { return s.Fault == p.Fault })
		if i < 0 {
			continue
		}
		prows, trows := failoverRows(p), failoverRows(secured[i])
		for j, row := range prows {
			pd, td := sortedCopy(row.d), sortedCopy(trows[j].d)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.name,
				FormatDuration(Percentile(pd, 50)), FormatDuration(Percentile(pd, 99)), FormatDuration(Percentile(pd, 100)),
				FormatDuration(Percentile(td, 50)), FormatDuration(Percentile(td, 99)), FormatDuration(Percentile(td, 100)))
		}
	}
	tw.Flush()
	return b.String()
}
