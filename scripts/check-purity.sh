#!/usr/bin/env bash
# state/, fsm/, graph/, placement/ and access/ must stay pure and deterministic: no clock, randomness,
# network, goroutines or gRPC in their non-test code.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=$(grep -rnE 'time\.Now\(|time\.Since\(|time\.After\(|time\.NewTimer|time\.NewTicker|math/rand|crypto/rand|"net"|net\.Dial|"google.golang.org/grpc"|"os"|go func|^\s*go [a-zA-Z]' \
  --include='*.go' state fsm graph placement access | grep -v '_test\.go:' || true)
if [ -n "$bad" ]; then
  echo "state/, fsm/, graph/, placement/ and access/ must be pure (no clock, randomness, network, I/O or goroutines):"
  echo "$bad"
  exit 1
fi
echo "purity: state/, fsm/, graph/, placement/ and access/ clean"
