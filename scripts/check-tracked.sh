#!/usr/bin/env bash
# check-tracked.sh fails when git tracks what a build, test or benchmark
# writes: binaries, test binaries, benchmark and chaos outputs (.bench/,
# .chaos/, chaos/out/), screenshots. Only sources are committed.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=$(git ls-files | grep -E '(^|/)\.bench/|(^|/)\.chaos/|^chaos/out/|\.test$|\.out$|\.png$|\.prof$' || true)
# Executables other than scripts (a script starts with #!).
while IFS= read -r f; do
  [ -f "$f" ] && [ -x "$f" ] || continue
  head -c2 "$f" | grep -q '#!' || bad+=$'\n'"$f"
done < <(git ls-files)
bad=$(echo "$bad" | sed '/^$/d')
if [ -n "$bad" ]; then
  echo "check-tracked: build or benchmark outputs are tracked (commit sources only):" >&2
  echo "$bad" >&2
  exit 1
fi
echo "check-tracked: only sources tracked"
