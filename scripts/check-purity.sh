#!/usr/bin/env bash
# state/, fsm/, graph/ and placement/ must stay pure and deterministic: no clock, randomness,
# network, goroutines or gRPC in their non-test code.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=$(grep -rnE 'time\.Now\(|time\.Since\(|time\.After\(|time\.NewTimer|time\.NewTicker|math/rand|crypto/rand|"net"|net\.Dial|"google.golang.org/grpc"|"os"|go func|^\s*go [a-zA-Z]' \
  --include='*.go' state fsm graph placement | grep -v '_test\.go:' || true)
if [ -n "$bad" ]; then
  echo "state/, fsm/, graph/ and placement/ must be pure (no clock, randomness, network, I/O or goroutines):"
  echo "$bad"
  exit 1
fi
echo "purity: state/, fsm/, graph/ and placement/ clean"
