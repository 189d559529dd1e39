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
// manifest says and cannot change what the next instance sees.
const (
	fileMode = 0o444
	dirMode  = 0o755
)

// writeFiles writes a workload's files under dir, each at its mount point
// path, and returns the mounts. Every file is checked before the first one
// is written, so that a bad entry leaves nothing behind; what an earlier
// attempt left in dir is replaced.
//
// swdd~workload-files-creator-writes-files-at-mount-point-dependent-path~1
// swdd~workload-files-creator-decodes-base64-to-binary~2
func writeFiles(dir string, files []state.File) ([]runtime.Mount, error) {
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
	mounts := make([]runtime.Mount, len(files))
	for i, f := range files {
		host := filepath.Join(dir, filepath.FromSlash(f.MountPoint))
		if err := os.MkdirAll(filepath.Dir(host), dirMode); err != nil {
			return nil, fmt.Errorf("files[%d]: %w", i, err)
		}
		if err := os.WriteFile(host, contents[i], fileMode); err != nil {
			return nil, fmt.Errorf("files[%d]: %w", i, err)
		}
		// WriteFile's mode is filtered by the umask; the file must be 0444.
		if err := os.Chmod(host, fileMode); err != nil {
			return nil, fmt.Errorf("files[%d]: %w", i, err)
		}
		mounts[i] = runtime.Mount{HostPath: host, MountPoint: f.MountPoint}
	}
	return mounts, nil
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
