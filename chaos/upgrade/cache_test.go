package upgrade

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// topAndPrevious is the top of this tree and the previous release's full
// commit; the test is skipped when the history does not hold it (a
// shallow clone) unless GRAPNEL_REQUIRE_UPGRADE=1.
func topAndPrevious(t *testing.T) (string, string) {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git tree: %v", err)
	}
	top := strings.TrimSpace(string(out))
	commit, err := ReadPreviousRelease(top)
	if err != nil {
		t.Fatal(err)
	}
	full, err := exec.Command("git", "-C", top, "rev-parse", "--verify", commit+"^{commit}").Output()
	if err != nil {
		if os.Getenv("GRAPNEL_REQUIRE_UPGRADE") == "1" {
			t.Fatalf("the previous release %s is not in the history: %v", commit, err)
		}
		t.Skipf("the previous release %s is not in the history: %v", commit, err)
	}
	return top, strings.TrimSpace(string(full))
}

// A complete cache is used as it is, without a build: its binaries, and
// the fsm types of the commit read from git.
func TestCachedPreviousUsesTheCache(t *testing.T) {
	top, full := topAndPrevious(t)
	cache := t.TempDir()
	dir := filepath.Join(cache, CacheDirName(full))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range Programs {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, built, err := CachedPrevious(context.Background(), top, full[:7], cache)
	if err != nil {
		t.Fatal(err)
	}
	if built || b.Commit != full || b.Server() != filepath.Join(dir, "grapnel-server") || len(b.EntryTypes) == 0 {
		t.Fatalf("built %v, commit %s, server %s, entry types %v", built, b.Commit, b.Server(), b.EntryTypes)
	}
}

// A commit the history does not hold fails before anything is built or
// cached.
func TestCachedPreviousUnknownCommit(t *testing.T) {
	top, _ := topAndPrevious(t)
	cache := filepath.Join(t.TempDir(), "bin")
	_, built, err := CachedPrevious(context.Background(), top, "0000000000000000000000000000000000000001", cache)
	if err == nil || built || !strings.Contains(err.Error(), "not in this repository's history") {
		t.Fatalf("built %v, err %v", built, err)
	}
	if _, err := os.Stat(cache); !os.IsNotExist(err) {
		t.Fatalf("the cache was made: %v", err)
	}
}
