#!/usr/bin/env bash
# One writer to Raft (issue 33 point 4; docs/architecture.md, "The write
# path"): every entry reaches Raft through cluster.Node.proposeAsync, which
# the server's write pipeline (Node.ApplyAsync) and the cluster package's
# own entries (Node.propose: the removal ledger, the cluster version,
# replica certificates) share. Outside tests and that one function, no
# code calls Raft's Apply or ApplyLog, comments aside.
set -euo pipefail
cd "$(dirname "$0")/.."

found=$(git ls-files --cached --others --exclude-standard '*.go' | grep -vE '_test\.go$' |
  xargs awk '
    /^func / { fn = $0 }
    {
      line = $0
      sub(/\/\/.*/, "", line)
      if (line ~ /\.(raft|r)\.(Apply|ApplyLog)\(/ || line ~ /raft\.Raft\)\.(Apply|ApplyLog)/) {
        printf "%s:%d: %s\t[in %s]\n", FILENAME, FNR, $0, fn
      }
    }' || true)
bad=$(printf '%s\n' "$found" | grep -v 'func (n \*Node) proposeAsync(' | grep -v '^$' || true)
count=$(printf '%s\n' "$found" | grep -c 'func (n \*Node) proposeAsync(' || true)
if [ -n "$bad" ] || [ "$count" != 1 ]; then
  echo "raft-apply: entries must reach Raft only through cluster.Node.proposeAsync (found $count there):"
  printf '%s\n' "$bad"
  exit 1
fi
echo "raft-apply: one writer to Raft (cluster.Node.proposeAsync)"
