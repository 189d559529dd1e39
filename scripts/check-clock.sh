#!/usr/bin/env bash
# Time that drives behaviour comes from an injected clock
# (internal/clock): outside internal/clock, cmd/, chaos/ and tests, no
# code reads the system clock or starts a timer of its own. The check
# names every direct use of time.Now, After, AfterFunc, NewTimer,
# NewTicker, Tick, Sleep, Since or Until (called or taken as a value),
# comments aside.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=$(git ls-files --cached --others --exclude-standard '*.go' | grep -vE '_test\.go$|^internal/clock/|^cmd/|^chaos/' |
  xargs awk '{
    line = $0
    sub(/\/\/.*/, "", line)
    if (line ~ /(^|[^A-Za-z0-9_.])time\.(Now|After|AfterFunc|NewTimer|NewTicker|Tick|Sleep|Since|Until)([^A-Za-z0-9_]|$)/)
      printf "%s:%d: %s\n", FILENAME, FNR, $0
  }')
if [ -n "$bad" ]; then
  echo "direct use of the system clock; take the owner's clock.Clock (internal/clock) instead:"
  echo "$bad"
  exit 1
fi
echo "clock: no direct time.Now/After/AfterFunc/NewTimer/NewTicker/Tick/Sleep/Since/Until outside internal/clock, cmd/, chaos/ and tests"
