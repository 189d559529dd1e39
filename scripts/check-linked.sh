#!/usr/bin/env bash
# The install links nothing the vehicle does not run (issue 32): for each
# binary given (`make check-linked` gives bin/grapnel and
# bin/linux-arm64/grapnel), `go version -m` must name no test-only
# module (the browser driver, the linearizability checker, the FUSE
# library of the chaos harness, ...), and the build must be the small one
# (-trimpath, -s -w, -tags grpcnotrace); and `go list -deps` of the
# binary's package for its GOOS/GOARCH and tags must hold none of this
# module's test harness: chaos/, the test clusters and fakes (a package
# named *test), internal/testwait, internal/durable/crashfs; nor gRPC's
# trace pages (golang.org/x/net/trace).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
  echo "usage: $0 BINARY..." >&2
  exit 2
fi
module=github.com/grapnel-io/grapnel
# Modules only tests and the chaos harness use, and what only they bring.
test_modules='^(github\.com/chromedp/|github\.com/gobwas/|github\.com/go-json-experiment/|github\.com/anishathalye/porcupine|github\.com/hanwen/go-fuse|golang\.org/x/tools|golang\.org/x/mod)'
test_packages="^$module/(chaos(/|\$)|internal/testwait\$|internal/durable/crashfs\$|.*test\$)"
fail=0
for bin in "$@"; do
  info=$(go version -m "$bin") || { echo "check-linked: $bin: not a Go binary" >&2; exit 1; }
  bad=$(awk '$1 == "dep" || $1 == "=>" {print $2}' <<<"$info" | grep -E "$test_modules" || true)
  if [ -n "$bad" ]; then
    echo "$bin links test-only modules:"; sed 's/^/  /' <<<"$bad"; fail=1
  fi
  grep -qE '^\s*build\s+-trimpath=true$' <<<"$info" || { echo "$bin: not built with -trimpath"; fail=1; }
  # gRPC's trace pages (golang.org/x/net/trace) are left out by a tag.
  tags=$(awk '$1 == "build" && $2 ~ /^-tags=/ {sub(/^-tags=/, "", $2); print $2}' <<<"$info")
  grep -qE '(^|,)grpcnotrace(,|$)' <<<"$tags" || { echo "$bin: not built with -tags grpcnotrace (links gRPC's trace pages)"; fail=1; }
  # -trimpath leaves -ldflags out of the build record: -s shows as a
  # missing symbol table, -w as missing DWARF sections.
  if go tool nm "$bin" >/dev/null 2>&1; then
    echo "$bin: has its symbol table (build with -ldflags \"-s -w\")"; fail=1
  fi
  if LC_ALL=C grep -qa -m1 '\.debug_info\|\.zdebug_info' "$bin"; then
    echo "$bin: has DWARF (build with -ldflags \"-s -w\")"; fail=1
  fi
  path=$(awk '$1 == "path" {print $2}' <<<"$info")
  goos=$(awk '$1 == "build" && $2 ~ /^GOOS=/ {sub(/^GOOS=/, "", $2); print $2}' <<<"$info")
  goarch=$(awk '$1 == "build" && $2 ~ /^GOARCH=/ {sub(/^GOARCH=/, "", $2); print $2}' <<<"$info")
  bad=$(GOOS=$goos GOARCH=$goarch CGO_ENABLED=0 go list -tags "$tags" -deps "$path" | grep -E "$test_packages|^golang\.org/x/net/trace\$" || true)
  if [ -n "$bad" ]; then
    echo "$bin ($path, $goos/$goarch) links test harness packages:"; sed 's/^/  /' <<<"$bad"; fail=1
  fi
  [ $fail -ne 0 ] || echo "check-linked: $bin ($goos/$goarch, $(stat -Lc %s "$bin") bytes): no test-only module or package"
done
exit $fail
