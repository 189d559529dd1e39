package workload

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/state"
)

// Workload files are read-only for the workload: it gets a copy of what the
// manifest says and cannot change what the next instance sees. A workload
// with an owner (a process under its own uid) gets them as its own, 0400,
// in directories of the agent its group may enter (0750); without one (a
// container) they stay 0444 for whatever user the container runs, in
// directories no host user but the agent's may enter (0700): podman
// mounts each file by its host path.
const (
	fileMode      = 0o444
	ownedFileMode = 0o400
)

// writeFiles writes a workload's files under dir, each at its mount point
// path, and returns the mounts. Every file is checked before the first one
// is written, so that a bad entry leaves nothing behind; what an earlier
// attempt left in dir is replaced.
//
// swdd~workload-files-creator-writes-files-at-mount-point-dependent-path~1
// swdd~workload-files-creator-decodes-base64-to-binary~2
func writeFiles(dir string, files []state.File, owner *runtime.Owner) ([]runtime.Mount, error) {
	if len(files) == 0 {
		return nil, nil
	}
	contents := make([][]byte, len(files))
	for i, f := range files {
		if err := checkMountPoint(f.MountPoint); err != nil {
			return nil, &state.FieldError{Path: fmt.Sprintf("files[%d].mountPoint", i), Reason: err.Error()}
		}
		if !f.Binary {
			contents[i] = []byte(f.Content)
			continue
		}
		b, err := base64.StdEncoding.DecodeString(stripSpace(f.Content))
		if err != nil {
			return nil, &state.FieldError{Path: fmt.Sprintf("files[%d].binaryData", i), Reason: fmt.Sprintf("not valid base64: %v", err)}
		}
		contents[i] = b
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("clearing workload files: %w", err)
	}
	mode := os.FileMode(fileMode)
	if owner != nil {
		mode = ownedFileMode
	}
	mounts := make([]runtime.Mount, len(files))
	for i, f := range files {
		host := filepath.Join(dir, filepath.FromSlash(f.MountPoint))
		if err := prepareDirs(dir, filepath.Dir(host), owner); err != nil {
			return nil, fmt.Errorf("files[%d]: %w", i, err)
		}
		if err := os.WriteFile(host, contents[i], 0o600); err != nil {
			return nil, fmt.Errorf("files[%d]: %w", i, err)
		}
		// WriteFile's mode is filtered by the umask, and the owner is
		// the agent's until given.
		if err := runtime.GiveFile(host, owner, mode); err != nil {
			return nil, fmt.Errorf("files[%d]: %w", i, err)
		}
		mounts[i] = runtime.Mount{HostPath: host, MountPoint: f.MountPoint}
	}
	return mounts, nil
}

// prepareDirs makes every directory from top down to dir as the files
// directory's modes say (runtime.PrepareGroupDir).
func prepareDirs(top, dir string, owner *runtime.Owner) error {
	rel, err := filepath.Rel(top, dir)
	if err != nil {
		return err
	}
	d := top
	if err := runtime.PrepareGroupDir(d, owner); err != nil {
		return err
	}
	if rel == "." {
		return nil
	}
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		d = filepath.Join(d, part)
		if err := runtime.PrepareGroupDir(d, owner); err != nil {
			return err
		}
	}
	return nil
}

// checkMountPoint accepts an absolute, clean path to a file: no "." or
// ".." segments that could escape the files directory, no trailing slash.
func checkMountPoint(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("required")
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q is relative, expected an absolute path", p)
	case strings.HasSuffix(p, "/"):
		return fmt.Errorf("%q is a directory, expected a file", p)
	case filepath.Clean(p) != p:
		return fmt.Errorf("%q is not a clean path (no '.', '..' or repeated '/')", p)
	}
	return nil
}

// stripSpace drops the line breaks and indentation a YAML block scalar
// leaves in base64 text.
func stripSpace(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\n', '\r':
			return -1
		}
		return r
	}, s)
}
