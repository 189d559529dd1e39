// Package bench measures Grapnel as a cluster of real grapnel-server
// processes: UpdateState throughput and latency with a number of concurrent
// CLI clients, compared in the same run with three etcd members doing puts
// of the same payload size, and the time from SIGKILL or SIGSTOP (a frozen,
// hung leader) of the leader to the next acknowledged update.
//
// It starts and stops processes (Process, Grapnel, Etcd), drives
// closed-loop load (RunLoad, Writer), turns raw latencies into figures
// (Summarize) and prints tables (ThroughputTable, FailoverTable). Numbers
// are always measured by the run that prints them. The etcd server and its
// put client live in the separate module chaos/etcdpeer, so that etcd never
// enters Grapnel's go.mod; this package only runs their binaries and reads
// the load client's JSON. cmd/grapnel-bench is the program `make bench`
// runs (through scripts/bench.sh).
package bench
