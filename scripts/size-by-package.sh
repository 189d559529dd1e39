#!/usr/bin/env bash
# The size of the installed binary (cmd/grapnel, as `make build` builds
# it) by package, for each GOARCH given (default amd64 arm64): the
# file's size stripped, then the symbols' sizes from `go tool nm -size`
# of the same build with its symbol table kept, summed by package (the
# module's packages one by one, others by module), largest first. The
# symbols do not add up to the file: the function table, DWARF-free
# headers and padding are the rest; go:func.* is the functions'
# metadata. TOP sets the rows shown (default 30).
set -euo pipefail
cd "$(dirname "$0")/.."
top=${TOP:-30}
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(amd64 arm64)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for arch in "${archs[@]}"; do
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -tags grpcnotrace -ldflags '-s -w' -o "$tmp/stripped" ./cmd/grapnel
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -tags grpcnotrace -o "$tmp/symbols" ./cmd/grapnel
  size=$(stat -c %s "$tmp/stripped")
  echo "linux/$arch: grapnel $size bytes ($(awk -v s="$size" 'BEGIN{printf "%.2f MB", s/1e6}')) stripped"
  go tool nm -size -sort size "$tmp/symbols" | awk -v top="$top" -v file="$size" '
    # A symbol line: address, size, kind, name (the name may hold spaces).
    # Zero-filled data (B) is not in the file, nor is a symbol larger
    # than the file (the 32 MiB buffer of the FIPS DRBG, reported as data).
    NF >= 4 && $3 !~ /^[bBU]$/ && $2 <= file {
      size = $2; name = $4
      for (i = 5; i <= NF; i++) name = name " " $i
      sub(/^type:\.?/, "", name); sub(/^go:(itab|link)\./, "", name); sub(/^\*/, "", name)
      # The package is the path up to the first dot after the last slash.
      slash = 0
      for (i = length(name); i > 0; i--) if (substr(name, i, 1) == "/") { slash = i; break }
      rest = substr(name, slash + 1)
      dot = index(rest, ".")
      pkg = dot ? substr(name, 1, slash + dot - 1) : "(other)"
      if (pkg !~ /^[a-zA-Z0-9_\/.-]+$/ || pkg ~ /^(go|type|runtime\.text)$/) pkg = "(runtime data, type descriptors)"
      # Outside this module, one row per module (its first three path
      # elements for a host with a dot, else the standard library package).
      if (pkg !~ /^github\.com\/grapnel-io\/grapnel/ && pkg ~ /^[^\/]*\./) {
        n = split(pkg, e, "/"); pkg = e[1] "/" e[2]; if (n > 2 && e[1] !~ /^(google\.golang\.org|gopkg\.in)$/) pkg = pkg "/" e[3]
        if (n > 3 && e[4] ~ /^v[0-9]+$/) pkg = pkg "/" e[4]
      }
      sum[pkg] += size; total += size
    }
    END {
      for (p in sum) printf "%10d %5.1f%%  %s\n", sum[p], 100 * sum[p] / total, p | "sort -rn | head -" top
      close("sort -rn | head -" top)
      printf "%10d        symbols in all\n", total
    }'
  echo
done
