#!/usr/bin/env bash
# state/ (with the renderer, state/render), fsm/, graph/, placement/, access/, workloadpolicy/
# and the planner, server/plan/, must stay pure and deterministic: no clock, randomness,
# network, goroutines or gRPC in their non-test code.
set -euo pipefail
cd "$(dirname "$0")/.."
# "net" and "os" are matched as imports only: an option table may say
# "net" or "os" (podman's --net, --os).
bad=$(grep -rnE 'time\.Now\(|time\.Since\(|time\.After\(|time\.NewTimer|time\.NewTicker|math/rand|crypto/rand|^\s*(import\s+)?([A-Za-z_.]+\s+)?"(net|os)"\s*$|net\.Dial|"google.golang.org/grpc"|go func|^\s*go [a-zA-Z]' \
  --include='*.go' state fsm graph placement access workloadpolicy server/plan | grep -v '_test\.go:' || true)
if [ -n "$bad" ]; then
  echo "state/, fsm/, graph/, placement/, access/, workloadpolicy/ and server/plan/ must be pure (no clock, randomness, network, I/O or goroutines):"
  echo "$bad"
  exit 1
fi
echo "purity: state/, fsm/, graph/, placement/, access/, workloadpolicy/ and server/plan/ clean"
