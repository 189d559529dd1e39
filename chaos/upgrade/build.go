package upgrade

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// PreviousReleaseFile is the tracked file naming the commit of the
// previous release, relative to the top of the tree.
const PreviousReleaseFile = ".ci/previous-release"

// Programs are the commands a build holds, as files or (grapnel-server,
// grapnel-agent) as links to the multi-call binary grapnel; grapnel-agent starts its process workloads
// through the grapnel-process-shim next to it.
var Programs = []string{"grapnel-server", "grapnel-agent", "grapnel-process-shim", "grapnel"}

// Build is one built release.
type Build struct {
	Release Release
	// Commit is the full commit the build was made from (for the new
	// build HEAD, with "+dirty" when the tree has changes).
	Commit string
	// Bins maps every program to its binary.
	Bins map[string]string
	// SnapshotTypes and EntryTypes are the snapshot record types and
	// Raft command types the build's fsm/ declares, read from its
	// source: a replica of the build can read exactly those.
	SnapshotTypes []int
	EntryTypes    []int
}

// Server, Agent and CLI are the build's binaries.
func (b *Build) Server() string { return b.Bins["grapnel-server"] }
func (b *Build) Agent() string  { return b.Bins["grapnel-agent"] }
func (b *Build) CLI() string    { return b.Bins["grapnel"] }

var hexCommit = regexp.MustCompile(`^[0-9a-f]{7,40}$`)

// ReadPreviousRelease reads the commit of the previous release from the
// tracked file under top: one line, an abbreviated or full commit hash,
// lines starting with # ignored.
func ReadPreviousRelease(top string) (string, error) {
	path := filepath.Join(top, PreviousReleaseFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return ParsePreviousRelease(path, data)
}

// ParsePreviousRelease is ReadPreviousRelease on the file's content.
func ParsePreviousRelease(path string, data []byte) (string, error) {
	var commit string
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if commit != "" {
			return "", fmt.Errorf("%s:%d: a second commit %q (one line holds the commit)", path, i+1, line)
		}
		if !hexCommit.MatchString(line) {
			return "", fmt.Errorf("%s:%d: %q is not a commit hash (7 to 40 lower-case hex digits)", path, i+1, line)
		}
		commit = line
	}
	if commit == "" {
		return "", fmt.Errorf("%s: no commit in it", path)
	}
	return commit, nil
}

// run runs a command in dir and returns its combined output; the error
// names the command and carries the output.
func run(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s (in %s): %w\n%s", name, strings.Join(args, " "), dir, err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// buildinfoPkg is where a build's commit is stamped, as the Makefile does.
const buildinfoPkg = "github.com/grapnel-io/grapnel/internal/buildinfo"

// multiCallMarker is the file of a tree whose install is one multi-call
// binary, grapnel, with the other programs links to it.
const multiCallMarker = "cmd/grapnel/multicall.go"

// buildTree builds the tree at src into out as `make build` installs it,
// static, with the commit stamped when the tree has internal/buildinfo:
// the multi-call binary grapnel, links to it named grapnel-server and
// grapnel-agent, and the small grapnel-process-shim when the tree has one
// (multiCallMarker), else ./cmd/..., one binary per program, as releases
// before it were built.
func buildTree(ctx context.Context, src, out, commit string) (map[string]string, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	_, err := os.Stat(filepath.Join(src, multiCallMarker))
	multiCall := err == nil
	args := []string{"build"}
	ldflags := ""
	if multiCall {
		args = append(args, "-trimpath", "-tags", "grpcnotrace")
		ldflags = "-s -w"
	}
	if _, err := os.Stat(filepath.Join(src, "internal", "buildinfo")); err == nil {
		ldflags = strings.TrimSpace(ldflags + " -X " + buildinfoPkg + ".Commit=" + commit[:min(12, len(commit))])
	}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	args = append(args, "-o", out+string(filepath.Separator))
	if multiCall {
		args = append(args, "./cmd/grapnel", "./cmd/grapnel-process-shim")
	} else {
		args = append(args, "./cmd/...")
	}
	if _, err := run(ctx, src, []string{"CGO_ENABLED=0"}, "go", args...); err != nil {
		return nil, err
	}
	bins := map[string]string{}
	for _, p := range Programs {
		bin := filepath.Join(out, p)
		if multiCall && (p == "grapnel-server" || p == "grapnel-agent") {
			if err := os.Remove(bin); err != nil && !os.IsNotExist(err) {
				return nil, err
			}
			if err := os.Symlink("grapnel", bin); err != nil {
				return nil, err
			}
		}
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("the build of %s has no %s: %w", commit, p, err)
		}
		bins[p] = bin
	}
	return bins, nil
}

// BuildPrevious builds the release at commit from the repository at top:
// a detached `git worktree` under work, `go build ./cmd/...` into
// work/bin-old, and the worktree removed again (also on failure).
func BuildPrevious(ctx context.Context, top, commit, work string) (*Build, error) {
	full, err := run(ctx, top, nil, "git", "rev-parse", "--verify", commit+"^{commit}")
	if err != nil {
		return nil, fmt.Errorf("previous release %s: %w", commit, err)
	}
	full = strings.TrimSpace(full)
	tree := filepath.Join(work, "src-old")
	_ = os.RemoveAll(tree)
	_, _ = run(ctx, top, nil, "git", "worktree", "prune")
	if _, err := run(ctx, top, nil, "git", "worktree", "add", "--detach", tree, full); err != nil {
		return nil, err
	}
	defer func() {
		if _, err := run(context.Background(), top, nil, "git", "worktree", "remove", "--force", tree); err != nil {
			_ = os.RemoveAll(tree)
			_, _ = run(context.Background(), top, nil, "git", "worktree", "prune")
		}
	}()
	b := &Build{Release: Old, Commit: full}
	if b.Bins, err = buildTree(ctx, tree, filepath.Join(work, "bin-old"), full); err != nil {
		return nil, err
	}
	b.SnapshotTypes, b.EntryTypes, err = fsmTypes(tree)
	return b, err
}

// BuildCurrent builds the tree at top into work/bin-new.
func BuildCurrent(ctx context.Context, top, work string) (*Build, error) {
	head, err := run(ctx, top, nil, "git", "rev-parse", "HEAD")
	if err != nil {
		return nil, err
	}
	commit := strings.TrimSpace(head)
	if st, err := run(ctx, top, nil, "git", "status", "--porcelain", "--untracked-files=no"); err == nil && strings.TrimSpace(st) != "" {
		commit += "+dirty"
	}
	b := &Build{Release: New, Commit: commit}
	if b.Bins, err = buildTree(ctx, top, filepath.Join(work, "bin-new"), commit); err != nil {
		return nil, err
	}
	b.SnapshotTypes, b.EntryTypes, err = fsmTypes(top)
	return b, err
}

var (
	snapTypeRe  = regexp.MustCompile(`(?m)^\s*Snap\w+\s+SnapshotType\s*=\s*(\d+)\s*$`)
	entryTypeRe = regexp.MustCompile(`(?m)^\s*\w+Type\s+MessageType\s*=\s*(\d+)(\s*\|\s*IgnoreUnknownTypeFlag)?\s*$`)
)

// fsmTypes reads the snapshot record and command types a tree declares
// from its fsm/snapshot.go and fsm/commands.go (a command with the skip
// flag counts with it: 16|128 = 144).
func fsmTypes(tree string) (snaps, entries []int, err error) {
	snapSrc, err := os.ReadFile(filepath.Join(tree, "fsm", "snapshot.go"))
	if err != nil {
		return nil, nil, err
	}
	cmdSrc, err := os.ReadFile(filepath.Join(tree, "fsm", "commands.go"))
	if err != nil {
		return nil, nil, err
	}
	return ParseFSMTypes(snapSrc, cmdSrc)
}

// ParseFSMTypes is fsmTypes on the two files' contents.
func ParseFSMTypes(snapSrc, cmdSrc []byte) (snaps, entries []int, err error) {
	for _, m := range snapTypeRe.FindAllSubmatch(snapSrc, -1) {
		n, _ := strconv.Atoi(string(m[1]))
		snaps = append(snaps, n)
	}
	for _, m := range entryTypeRe.FindAllSubmatch(cmdSrc, -1) {
		n, _ := strconv.Atoi(string(m[1]))
		if len(m[2]) > 0 {
			n |= 128
		}
		entries = append(entries, n)
	}
	if len(snaps) == 0 || len(entries) == 0 {
		return nil, nil, fmt.Errorf("fsm sources: found %d snapshot record types and %d command types: the declarations changed shape", len(snaps), len(entries))
	}
	slices.Sort(snaps)
	slices.Sort(entries)
	return slices.Compact(snaps), slices.Compact(entries), nil
}

// Prebuilt describes binaries built earlier from commit (bin holds the
// Programs), reading the fsm types of commit from the repository at top.
func Prebuilt(ctx context.Context, top string, rel Release, commit, bin string) (*Build, error) {
	full, err := run(ctx, top, nil, "git", "rev-parse", "--verify", commit+"^{commit}")
	if err != nil {
		return nil, err
	}
	b := &Build{Release: rel, Commit: strings.TrimSpace(full), Bins: map[string]string{}}
	for _, p := range Programs {
		path := filepath.Join(bin, p)
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("prebuilt %s: %w", rel, err)
		}
		b.Bins[p] = path
	}
	snap, err := run(ctx, top, nil, "git", "show", b.Commit+":fsm/snapshot.go")
	if err != nil {
		return nil, err
	}
	cmds, err := run(ctx, top, nil, "git", "show", b.Commit+":fsm/commands.go")
	if err != nil {
		return nil, err
	}
	b.SnapshotTypes, b.EntryTypes, err = ParseFSMTypes([]byte(snap), []byte(cmds))
	return b, err
}
