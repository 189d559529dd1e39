#!/usr/bin/env bash
# Time that drives behaviour comes from an injected clock
# (internal/clock): outside internal/clock, cmd/, chaos/ and tests, no
# code reads the system clock or starts a timer of its own. The check
# names every direct use of time.Now, After, AfterFunc, NewTimer,
# NewTicker, Tick, Sleep, Since or Until (called or taken as a value),
# comments aside.
#
# Tests wait on events (internal/testwait), never with a sleep: outside
# internal/testwait, a _test.go file calls neither time.Sleep
# nor clock.Sleep (nor waits on a bare <-time.After), save where the sleep is itself the thing under test,
# each such place listed below with its reason.
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

# The sleeps tests may take: file, a piece of the line, and why.
allowed=(
  "rpc/client/fake_test.go|statusDelay|the fake replica answers slowly: the delay is what it simulates"
  "cluster/integrity_internal_test.go|ids carry milliseconds|the ids under test are stamped with the wall clock's milliseconds"
  "internal/clock/clock_test.go|for c.Pending() != 2|the clock's own tests cannot import testwait, which imports the clock"
  "chaos/netns/helper_test.go|time.Sleep(30 * time.Second)|a helper process waits to be signalled: the sleep bounds the wait under test"
  "chaos/clients/clients_test.go|time.Sleep(time.Second)|a second of client load before the leader stops: load over time is what is tested"
  "chaos/e2e/continuity_test.go|pacing between reads|pacing between reads, not a wait for an event"
  "chaos/bench/load_test.go|time.Sleep(tt.sleep)|an operation of a given length is what the fake load simulates"
)
sleeps=$(git ls-files --cached --others --exclude-standard '*_test.go' | grep -vE '^internal/testwait/' |
  xargs awk '{
    line = $0
    sub(/\/\/.*/, "", line)
    if (line ~ /(^|[^A-Za-z0-9_.])(time|clock)\.Sleep\(/ || line ~ /^[ \t]*<-[ \t]*(time|clock)\.After\(/)
      printf "%s:%d:%s\n", FILENAME, FNR, $0
  }')
unexplained=""
declare -A used=()
while IFS= read -r hit; do
  [ -z "$hit" ] && continue
  file=${hit%%:*}
  ok=""
  for a in "${allowed[@]}"; do
    IFS='|' read -r afile piece _ <<<"$a"
    if [ "$file" = "$afile" ]; then
      # The piece is on the sleep's line or on the line before it.
      n=$(echo "$hit" | cut -d: -f2)
      if sed -n "$((n > 1 ? n - 1 : 1)),${n}p" "$file" | grep -qF -- "$piece"; then
        ok=1
        used[$a]=1
      fi
    fi
  done
  [ -z "$ok" ] && unexplained+="$hit"$'\n'
done <<<"$sleeps"
if [ -n "$unexplained" ]; then
  echo "a test sleeps; wait for the event with testwait.For, or for something to stay true with testwait.Holds:"
  printf '%s' "$unexplained"
  exit 1
fi
for a in "${allowed[@]}"; do
  if [ -z "${used[$a]:-}" ]; then
    echo "scripts/check-clock.sh allows a sleep that is gone; drop it from the list: ${a%%|*}"
    exit 1
  fi
done
echo "clock: no direct time.Now/After/AfterFunc/NewTimer/NewTicker/Tick/Sleep/Since/Until outside internal/clock, cmd/, chaos/ and tests; no sleep in tests but the ${#allowed[@]} listed"
