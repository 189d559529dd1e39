#!/usr/bin/env bash
# make demo: one grapnel-server replica and one grapnel-agent on loopback.
# Applies deploy/examples/demo-manifest.yaml (two dependent `process`
# workloads) and shows them go Pending -> Running, their logs, then
# deletes them and stops everything. DEMO_KEEP=1 leaves it all running
# until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/grapnel-demo.XXXXXX)
# Workloads run under their own uids and must pass through to their
# directories in the run folder below (docs/agent.md, workload isolation).
chmod 0711 "$work"
port=${DEMO_PORT:-25551}
raft=${DEMO_RAFT_PORT:-25561}
addr=127.0.0.1:$port
cli() { ./bin/grapnel -k -s "$addr" "$@"; }
cleanup() {
  # Workloads outlive their agent by design: delete them first.
  if [ -n "${apid:-}" ] && kill -0 "$apid" 2>/dev/null; then
    cli delete workload greeter clock >/dev/null 2>&1 || true
  fi
  [ -n "${apid:-}" ] && kill "$apid" 2>/dev/null && wait "$apid" 2>/dev/null || true
  [ -n "${spid:-}" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "== starting grapnel-server (one replica) on $addr, data in $work"
./bin/grapnel-server -k --name demo-1 --data-dir "$work/data" -a "$addr" --raft-address "127.0.0.1:$raft" \
  >"$work/server.log" 2>&1 &
spid=$!
for _ in $(seq 1 100); do
  if cli get workloads >/dev/null 2>&1; then break; fi
  if ! kill -0 "$spid" 2>/dev/null; then cat "$work/server.log"; echo "grapnel-server exited"; exit 1; fi
  sleep 0.1
done

echo "== starting grapnel-agent agent_A (process runtime), run folder $work/run"
./bin/grapnel-agent -k --name agent_A -s "$addr" --run-folder "$work/run" --runtimes process \
  >"$work/agent.log" 2>&1 &
apid=$!
for _ in $(seq 1 100); do
  if cli get agents 2>/dev/null | grep -q agent_A; then break; fi
  if ! kill -0 "$apid" 2>/dev/null; then cat "$work/agent.log"; echo "grapnel-agent exited"; exit 1; fi
  sleep 0.1
done
cli get agents
echo
echo "== grapnel apply deploy/examples/demo-manifest.yaml (greeter waits for clock to run)"
cli apply deploy/examples/demo-manifest.yaml
echo
echo "== grapnel get workloads"
cli get workloads
echo
sleep 2
echo "== grapnel logs --tail 3 clock greeter"
cli logs --tail 3 clock greeter
echo
if [ "${DEMO_KEEP:-}" = 1 ]; then
  echo "replica on $addr and agent_A running; try: ./bin/grapnel -k -s $addr get workloads --watch"
  echo "Ctrl-C deletes the workloads and stops both"
  wait "$spid"
fi
echo "== deleting the workloads and stopping"
