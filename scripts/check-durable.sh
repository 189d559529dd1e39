#!/usr/bin/env bash
# Files Grapnel keeps are written crash-safely, through internal/durable
# (docs/operations.md, "Files Grapnel writes"): outside it, chaos/ and
# tests, no code creates, replaces, renames or links a file with the os
# package directly. The check names every direct use of os.WriteFile,
# Create, CreateTemp, OpenFile, Rename or Link (called or taken as a
# value), comments aside, that the list below does not allow.
set -euo pipefail
cd "$(dirname "$0")/.."

# file|call|why: the exceptions, each with its reason.
allowed='
agent/workload/files.go|os.WriteFile|workload files are written again from the replicated state before every start of the instance, and a power cut ends the workload that reads them
agent/runtime/process/runtime.go|os.OpenFile|shim.log, the shim'"'"'s own stdout and stderr: an append-only diagnostics log whose tail a power cut may take
agent/runtime/process/shim/shim.go|os.OpenFile|output.log, the workload'"'"'s output: append-only, like a journal whose tail a power cut may take
server/restorespool.go|os.CreateTemp|the restore spool: read back within the same call and removed; what a crash leaves is removed at start
cluster/ops.go|os.CreateTemp|the restore spool of a size-less restore: read back within the same call and removed
agent/runtime/containerd/logger.go|os.OpenFile|a containerd workload'"'"'s output log, written by the logger containerd starts: append-only, like a journal whose tail a power cut may take
agent/runtime/containerd/containerdtest/daemon.go|os.OpenFile|test support: the log of a containerd the tests start in a temporary directory
agent/runtime/containerd/containerdtest/daemon.go|os.WriteFile|test support: the CNI configuration of the private test network, in the temporary directory of the test daemon
cluster/segcheck.go|os.OpenFile|raft-wal'"'"'s own segment files, written in place where raft-wal would write them (a rebuilt header, zeros past its end) and synced with f.Sync before anything else happens
rpc/rpctest/ca.go|os.WriteFile|test support: certificates for tests in a temporary directory
'

found=$(git ls-files --cached --others --exclude-standard '*.go' | grep -vE '_test\.go$|^internal/durable/|^chaos/' |
  xargs awk '{
    line = $0
    sub(/\/\/.*/, "", line)
    while (match(line, /(^|[^A-Za-z0-9_.])os\.(WriteFile|Create|CreateTemp|OpenFile|Rename|Link)([^A-Za-z0-9_]|$)/)) {
      call = substr(line, RSTART, RLENGTH)
      sub(/^[^o]*/, "", call)
      sub(/[^A-Za-z0-9_.]$/, "", call)
      printf "%s|%s|%d: %s\n", FILENAME, call, FNR, $0
      line = substr(line, RSTART + RLENGTH)
    }
  }')

keys=$(grep . <<<"$allowed" | cut -d'|' -f1,2)
bad=""
while IFS= read -r hit; do
  [ -z "$hit" ] && continue
  file=${hit%%|*}
  rest=${hit#*|}
  call=${rest%%|*}
  if ! grep -qxF "$file|$call" <<<"$keys"; then
    bad+="$file:${rest#*|}"$'\n'
  fi
done <<<"$found"

# An exception that no longer matches anything is stale.
stale=""
while IFS='|' read -r file call why; do
  [ -z "$file" ] && continue
  if ! grep -qF -- "$file|$call|" <<<"$found"; then
    stale+="$file: $call ($why)"$'\n'
  fi
done <<<"$allowed"

if [ -n "$bad" ]; then
  echo "a file written with the os package directly; use internal/durable (WriteFile, Replace, Create, Rename, Remove, MkdirAll), or add the call to the exceptions of scripts/check-durable.sh with its reason:"
  printf '%s' "$bad"
  exit 1
fi
if [ -n "$stale" ]; then
  echo "exceptions in scripts/check-durable.sh that no longer match a call; remove them:"
  printf '%s' "$stale"
  exit 1
fi
echo "durable: every file outside internal/durable, chaos/ and tests is written through internal/durable, save $(grep -c . <<<"$allowed") listed exceptions"
