package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CacheDirName is the directory under a cache root that holds the
// previous release built from commit: bin/previous-<commit>/ in the tree
// (ignored by git), so that repeated runs build it once.
func CacheDirName(commit string) string { return "previous-" + commit }

// CachedPrevious gives the previous release at commit from cache (its
// directory CacheDirName of the full commit), building it there first
// when it is not complete: BuildPrevious in a scratch directory under
// cache, moved into place only once every program is built, so an
// interrupted build never counts. built says whether it built. It fails
// when the commit is not in the repository at top (a shallow clone) or
// the build fails.
func CachedPrevious(ctx context.Context, top, commit, cache string) (b *Build, built bool, err error) {
	full, err := run(ctx, top, nil, "git", "rev-parse", "--verify", commit+"^{commit}")
	if err != nil {
		return nil, false, fmt.Errorf("previous release %s: not in this repository's history: %w", commit, err)
	}
	full = strings.TrimSpace(full)
	dir := filepath.Join(cache, CacheDirName(full))
	if complete(dir) {
		b, err := Prebuilt(ctx, top, Old, full, dir)
		return b, false, err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, false, err
	}
	work, err := os.MkdirTemp(cache, ".previous-build-")
	if err != nil {
		return nil, false, err
	}
	defer os.RemoveAll(work)
	if b, err = BuildPrevious(ctx, top, full, work); err != nil {
		return nil, false, err
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(filepath.Join(work, "bin-old"), dir); err != nil && !complete(dir) {
		// Another run may have put it in place meanwhile: that one counts.
		return nil, false, errors.Join(fmt.Errorf("caching the previous release in %s", dir), err)
	}
	for _, p := range Programs {
		b.Bins[p] = filepath.Join(dir, p)
	}
	return b, true, nil
}

// complete says whether dir holds every program.
func complete(dir string) bool {
	for _, p := range Programs {
		if st, err := os.Stat(filepath.Join(dir, p)); err != nil || !st.Mode().IsRegular() {
			return false
		}
	}
	return true
}
