#!/usr/bin/env bash
# Regenerates the Go code of rpc/proto/*.proto and fsm/proto/*.proto. The
# Ankaios protos carry no go_package option (as upstream), so the Go import
# paths are given here.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
export PATH="$(go env GOPATH)/bin:$PATH"
declare -A pkg=(
  [ank_base.proto]=rpc/ankbase
  [grpc_api.proto]=rpc/grpcapi
  [control_api.proto]=rpc/controlapi
  [grapnel.proto]=rpc/grapnelpb
)
maps=()
for f in "${!pkg[@]}"; do maps+=("M$f=$mod/${pkg[$f]}"); done
goopt=$(IFS=,; echo "${maps[*]}")
for f in "${!pkg[@]}"; do
  out=${pkg[$f]}
  mkdir -p "$out"
  rm -f "$out"/*.pb.go
  protoc -I rpc/proto \
    --go_out=. --go_opt=module="$mod",$goopt \
    --go-grpc_out=. --go-grpc_opt=module="$mod",$goopt \
    "rpc/proto/$f"
done
# The FSM's command bodies: messages only, no service, so no gRPC code
# (fsm/ must not import gRPC).
rm -f fsm/fsmpb/*.pb.go
protoc -I fsm/proto \
  --go_out=. --go_opt=module="$mod",Mcommands.proto="$mod/fsm/fsmpb" \
  fsm/proto/commands.proto
