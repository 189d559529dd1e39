#!/usr/bin/env bash
# make bench: builds grapnel-server, etcd and the etcd put client, then runs
# chaos/bench/cmd/grapnel-bench: 3 Grapnel replicas vs 3 etcd members on
# loopback with 1, 16 and 64 clients, then 50 leader kills (SIGKILL) and, on
# a fresh cluster, 50 leader freezes (SIGSTOP), the failover writer keeping
# a lookout as an agent does (-- -lookout=false: a CLI-like writer). All of
# it is measured twice in the same run: plain (--insecure) and secured
# (mTLS on gRPC and Raft, gossip encrypted), with a side-by-side table of
# the cost (-- -security plain|tls measures one). The throughput of the first mode
# is also measured with the replicas' Raft log in raft-boltdb/v2
# (--raft-log-store bolt), side by side with the WAL (-- -log-store wal|bolt
# measures one store). The report goes to stdout and to
# .bench/results/latest.txt.
#
#   scripts/bench.sh                  full run (about 8 minutes: 3 of
#                                     throughput, about 2.5 per security
#                                     mode for the 50 kills and 50 freezes)
#   scripts/bench.sh --quick          every part, short bounds, 3 kills and 3
#                                     freezes (about a minute)
#   scripts/bench.sh --failover-short 3 leader kills and 3 freezes only, no
#                                     etcd (for CI)
#   scripts/bench.sh --agents         3 replicas + 2 agents with mTLS: 50 leader
#                                     kills (agent reconnect, workloads
#                                     restarted), apply→Running, agent RSS; in
#                                     .bench/results/agents.txt
#   scripts/bench.sh --vehicle        idle footprint of 3 replicas + 5 agents x
#                                     10 process workloads (insecure, then with
#                                     mTLS), single-replica and
#                                     cluster start times, and 10 power cycles
#                                     of all of it in a pid namespace
#                                     (power-on -> API, -> all Running, stale
#                                     Running); report in
#                                     .bench/results/vehicle.txt
#   scripts/bench.sh --vehicle-quick  the same with short windows and 3 cycles
#                                     (-- -parts poweron: the power cycles only)
#   scripts/bench.sh [mode] -- ARGS   extra grapnel-bench flags, e.g.
#                                     -- -server-flag=--raft-heartbeat-timeout=1s
#                                     -- -commanders=false -kills 0 -freezes 0
#                                        (writers on the deprecated
#                                        CliConnection, which get every state
#                                        broadcast)
#                                     -- -config-updates -kills 0 -freezes 0
#
# Binaries are cached in .bench/ (BENCH_CACHE overrides); etcd comes from the
# Go module proxy through the separate module chaos/etcdpeer, so it never
# enters Grapnel's go.mod.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
cache=${BENCH_CACHE:-$root/.bench}
mkdir -p "$cache"

mode=full
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) mode=quick ;;
    --failover-short) mode=failover-short ;;
    --full) mode=full ;;
    --agents) mode=agents ;;
    --vehicle) mode=vehicle ;;
    --vehicle-quick) mode=vehicle-quick ;;
    --) shift; args+=("$@"); break ;;
    *) echo "bench.sh: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
  shift
done

# The programs are built as they ship (`make build`): static
# (CGO_ENABLED=0: no libc mapped, about 1 MiB less RSS per process),
# stripped, the one binary grapnel with grapnel-server and grapnel-agent
# links to it, and the shim the agent starts its process workloads
# through, found next to it.
echo "== building grapnel (grapnel-server, grapnel-agent), grapnel-process-shim and grapnel-bench into $cache" >&2
rm -f "$cache/grapnel-server" "$cache/grapnel-agent"
CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -ldflags '-s -w' -o "$cache/grapnel" ./cmd/grapnel
CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -ldflags '-s -w' -o "$cache/grapnel-process-shim" ./cmd/grapnel-process-shim
ln -s grapnel "$cache/grapnel-server"
ln -s grapnel "$cache/grapnel-agent"
go build -o "$cache/grapnel-bench" ./chaos/bench/cmd/grapnel-bench

if [ "$mode" = vehicle ] || [ "$mode" = vehicle-quick ]; then
  go build -o "$cache/grapnel-vehicle-bench" ./chaos/bench/cmd/grapnel-vehicle-bench
  quick=()
  if [ "$mode" = vehicle-quick ]; then
    quick=(-settle 5s -window 15s -starts 3 -cycles 3)
  fi
  exec "$cache/grapnel-vehicle-bench" -grapnel-server "$cache/grapnel-server" -grapnel-agent "$cache/grapnel-agent" \
    -out "$cache/results/vehicle.txt" ${quick[@]+"${quick[@]}"} ${args[@]+"${args[@]}"}
fi

if [ "$mode" = agents ]; then
  go build -o "$cache/grapnel-agent-bench" ./chaos/bench/cmd/grapnel-agent-bench
  exec "$cache/grapnel-agent-bench" -grapnel-server "$cache/grapnel-server" -grapnel-agent "$cache/grapnel-agent" \
    -out "$root/.bench/results/agents.txt" ${args[@]+"${args[@]}"}
fi

etcd_args=()
if [ "$mode" != failover-short ]; then
  echo "== building etcd and etcdload (chaos/etcdpeer; the first build fetches etcd from the module proxy)" >&2
  (cd chaos/etcdpeer && GOFLAGS="-mod=mod -buildvcs=false" go build -o "$cache/etcd" ./cmd/etcd \
    && GOFLAGS="-mod=mod -buildvcs=false" go build -o "$cache/etcdload" ./cmd/etcdload)
  etcd_args=(-etcd "$cache/etcd" -etcdload "$cache/etcdload")
fi

case "$mode" in
  full)
    exec "$cache/grapnel-bench" -grapnel-server "$cache/grapnel-server" "${etcd_args[@]}" \
      -out "$root/.bench/results/latest.txt" ${args[@]+"${args[@]}"} ;;
  quick)
    exec "$cache/grapnel-bench" -grapnel-server "$cache/grapnel-server" "${etcd_args[@]}" \
      -duration 2s -warmup 300ms -kills 3 -freezes 3 -out "$cache/quick.txt" ${args[@]+"${args[@]}"} ;;
  failover-short)
    exec "$cache/grapnel-bench" -grapnel-server "$cache/grapnel-server" -skip-throughput -kills 3 -freezes 3 \
      -out "$cache/failover-short.txt" ${args[@]+"${args[@]}"} ;;
esac
