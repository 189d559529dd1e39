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

// FailoverTable prints p50, p99 and max of the outages, the elections and
// the rejoin times of a failover measurement.
func FailoverTable(r FailoverResult) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tn\tp50\tp99\tmax")
	for _, row := range []struct {
		name string
		d    []time.Duration
	}{
		{"kill -> next acknowledged update", r.Outage},
		{"kill -> new leader (Status poll)", r.Election},
		{"restart -> healthy and caught up", r.Rejoin},
	} {
		d := slices.Clone(row.d)
		slices.Sort(d)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", row.name, len(d),
			FormatDuration(Percentile(d, 50)), FormatDuration(Percentile(d, 99)), FormatDuration(Percentile(d, 100)))
	}
	tw.Flush()
	fmt.Fprintf(&b, "writer: %d updates acknowledged, %d failed during the run\n", r.Acks, r.Errors)
	return b.String()
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

// FailoverSecurityTable prints the failover percentiles of a plain and a
// secured run side by side.
func FailoverSecurityTable(plain, secured FailoverResult) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tplain p50\tp99\tmax\tTLS p50\tp99\tmax")
	for _, row := range []struct {
		name string
		p, t []time.Duration
	}{
		{"kill -> next acknowledged update", plain.Outage, secured.Outage},
		{"kill -> new leader (Status poll)", plain.Election, secured.Election},
		{"restart -> healthy and caught up", plain.Rejoin, secured.Rejoin},
	} {
		p, t := slices.Clone(row.p), slices.Clone(row.t)
		slices.Sort(p)
		slices.Sort(t)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.name,
			FormatDuration(Percentile(p, 50)), FormatDuration(Percentile(p, 99)), FormatDuration(Percentile(p, 100)),
			FormatDuration(Percentile(t, 50)), FormatDuration(Percentile(t, 99)), FormatDuration(Percentile(t, 100)))
	}
	tw.Flush()
	return b.String()
}
