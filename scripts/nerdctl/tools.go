//go:build tools

// Package nerdctl pins the nerdctl that the containerd runtime
// (agent/runtime/containerd) drives and that CI installs: this module's
// go.sum is the checksum of every module of its build, so
// scripts/containerd-setup.sh builds exactly this nerdctl, verified.
//
// nerdctl is not a Debian package on the machines Grapnel is built on,
// but the Go module proxy serves it. The public checksum database has no
// entry for github.com/containerd/nerdctl v1.7.7, though, so go.sum was
// made once with GOSUMDB=off (go mod tidy); every later build checks the
// downloads against the go.sum committed here and needs no checksum
// database. Only the v1 module path is usable: the proxy refuses the v2
// versions or lacks their dependencies.
package nerdctl

import _ "github.com/containerd/nerdctl/cmd/nerdctl"
