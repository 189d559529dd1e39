// Package buildinfo says which Grapnel a binary is: its release (a
// semantic version), the Ankaios protocol it speaks and the commit it was
// built from. Every program prints the same line for --version.
//
// The release is the file VERSION at the repository's root. `make build`
// passes it at link time, e.g.
//
//	go build -ldflags "-X github.com/grapnel-io/grapnel/internal/buildinfo.Version=0.4.0" ./cmd/...
//
// and Version's default is the same text (a test keeps the two equal), so
// a plain `go build` or `go test` build carries it too.
//
// The commit is the one Go stamps into a binary built in a git work tree
// (vcs.revision, with "-dirty" when the tree had changes); a build without
// it (go run, a source archive, -buildvcs=false) may set Commit with -X.
package buildinfo

import (
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"
)

// Version is Grapnel's release, a semantic version (semver.org 2.0.0).
var Version = "0.4.0-dev"

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

// CommitID is the commit the running binary was built from, as the
// version line shows it, or "unknown".
func CommitID() string {
	info, ok := debug.ReadBuildInfo()
	return commit(info, ok)
}

// MaxReleaseBytes bounds a release text: one an agent announces is kept
// in the leader's memory and shown as a metric label.
const MaxReleaseBytes = 64

// semver is the regular expression semver.org 2.0.0 gives for a version.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// ErrBadRelease marks a release text that is not a semantic version.
var ErrBadRelease = errors.New("not a release")

// CheckRelease tells whether s is a release: a semantic version of at
// most MaxReleaseBytes bytes, e.g. 0.4.0, 1.2.3-rc.1 or 0.4.0-dev+abc.
func CheckRelease(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty", ErrBadRelease)
	case len(s) > MaxReleaseBytes:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrBadRelease, len(s), MaxReleaseBytes)
	case !semver.MatchString(s):
		return fmt.Errorf("%w: %q is not a semantic version (MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], semver.org)", ErrBadRelease, s)
	}
	return nil
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
