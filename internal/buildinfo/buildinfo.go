// Package buildinfo says which Grapnel a binary is: its version, the
// Ankaios protocol it speaks and the commit it was built from. Every
// program prints the same line for --version.
//
// The version is set at link time, e.g.
//
//	go build -ldflags "-X github.com/grapnel-io/grapnel/internal/buildinfo.Version=0.3.0" ./cmd/...
//
// The commit is the one Go stamps into a binary built in a git work tree
// (vcs.revision, with "-dirty" when the tree had changes); a build without
// it (go run, a source archive, -buildvcs=false) may set Commit with -X.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Version is Grapnel's version.
var Version = "0.3.0-dev"

// Commit is the commit when the build carries no VCS stamp; set with -X.
var Commit = ""

// shortCommit is how many hex digits of a commit are shown.
const shortCommit = 12

// commit returns the commit the binary was built from, or "unknown".
func commit(info *debug.BuildInfo, ok bool) string {
	if ok {
		var rev string
		dirty := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			if len(rev) > shortCommit {
				rev = rev[:shortCommit]
			}
			if dirty {
				rev += "-dirty"
			}
			return rev
		}
	}
	if Commit != "" {
		return Commit
	}
	return "unknown"
}

// protocol shortens a protocol version such as 1.0.0 to v1.0.
func protocol(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) >= 2 {
		return "v" + parts[0] + "." + parts[1]
	}
	return "v" + v
}

// Describe is what follows the program's name in the version line: the
// version, the Ankaios protocol version (MAJOR.MINOR.PATCH) and the
// commit, e.g. "0.3.0 (ankaios protocol v1.0, commit 0123456789ab)".
func Describe(protocolVersion string) string {
	info, ok := debug.ReadBuildInfo()
	return describe(protocolVersion, info, ok)
}

func describe(protocolVersion string, info *debug.BuildInfo, ok bool) string {
	return Version + " (ankaios protocol " + protocol(protocolVersion) + ", commit " + commit(info, ok) + ")"
}

// Line is the --version line of program, e.g.
// "grapnel 0.3.0 (ankaios protocol v1.0, commit 0123456789ab)".
func Line(program, protocolVersion string) string {
	return program + " " + Describe(protocolVersion)
}
