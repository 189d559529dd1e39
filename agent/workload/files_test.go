package workload

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/state"
)

// swdd~workload-files-creator-writes-files-at-mount-point-dependent-path~1
// swdd~workload-files-creator-decodes-base64-to-binary~2
func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "files")
	files := []state.File{
		{MountPoint: "/etc/app/config.yaml", Content: "port: 80\n"},
		// A YAML block scalar keeps line breaks and indentation.
		{MountPoint: "/data/blob.bin", Content: "AAEC\n  //8=\n", Binary: true},
	}
	mounts, err := writeFiles(dir, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{
		filepath.Join(dir, "etc", "app", "config.yaml"): []byte("port: 80\n"),
		filepath.Join(dir, "data", "blob.bin"):          {0, 1, 2, 0xff, 0xff},
	}
	if len(mounts) != 2 {
		t.Fatalf("mounts %+v", mounts)
	}
	for i, m := range mounts {
		if m.MountPoint != files[i].MountPoint {
			t.Errorf("mount %d point %q", i, m.MountPoint)
		}
		got, err := os.ReadFile(m.HostPath)
		if err != nil || string(got) != string(want[m.HostPath]) {
			t.Errorf("%s = %v (%v), want %v", m.HostPath, got, err, want[m.HostPath])
		}
		fi, err := os.Stat(m.HostPath)
		if err != nil || fi.Mode().Perm() != 0o444 {
			t.Errorf("%s mode %v (%v), want 0444", m.HostPath, fi.Mode(), err)
		}
	}
	// A second attempt replaces the read-only files.
	files[0].Content = "port: 81\n"
	if _, err := writeFiles(dir, files, nil); err != nil {
		t.Fatalf("rewrite: %v", err)
	}
	if got, _ := os.ReadFile(mounts[0].HostPath); string(got) != "port: 81\n" {
		t.Fatalf("rewrite left %q", got)
	}
}

// TestWriteFilesModes: issue 17, point 5. A workload's files are its own
// (0400) in directories of the agent that only its group enters (0750);
// without an owner (a container) the directories are the agent's alone
// (0700), so no other host user reaches the files.
func TestWriteFilesModes(t *testing.T) {
	files := []state.File{{MountPoint: "/etc/app/secret", Content: "s3cret"}}
	check := func(path string, uid, gid uint32, mode os.FileMode) {
		t.Helper()
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != uid || st.Gid != gid || fi.Mode().Perm() != mode {
			t.Errorf("%s: %d:%d %v, want %d:%d %v", path, st.Uid, st.Gid, fi.Mode().Perm(), uid, gid, mode)
		}
	}
	me, mygid := uint32(os.Geteuid()), uint32(os.Getegid())
	dir := filepath.Join(t.TempDir(), "files")
	if _, err := writeFiles(dir, files, nil); err != nil {
		t.Fatal(err)
	}
	check(dir, me, mygid, 0o700)
	check(filepath.Join(dir, "etc", "app"), me, mygid, 0o700)
	check(filepath.Join(dir, "etc", "app", "secret"), me, mygid, 0o444)
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another uid")
	}
	owner := &runtime.Owner{UID: 61100, GID: 61100}
	dir = filepath.Join(t.TempDir(), "owned")
	if _, err := writeFiles(dir, files, owner); err != nil {
		t.Fatal(err)
	}
	check(dir, 0, owner.GID, 0o750)
	check(filepath.Join(dir, "etc"), 0, owner.GID, 0o750)
	check(filepath.Join(dir, "etc", "app", "secret"), owner.UID, owner.GID, 0o400)
}

func TestWriteFilesRejects(t *testing.T) {
	tests := []struct {
		name  string
		file  state.File
		field string
		why   string
	}{
		{"bad base64", state.File{MountPoint: "/x", Content: "not*base64", Binary: true}, "files[1].binaryData", "not valid base64"},
		{"empty mount point", state.File{Content: "x"}, "files[1].mountPoint", "required"},
		{"relative", state.File{MountPoint: "etc/x", Content: "x"}, "files[1].mountPoint", "relative"},
		{"directory", state.File{MountPoint: "/etc/", Content: "x"}, "files[1].mountPoint", "directory"},
		{"escape", state.File{MountPoint: "/etc/../../x", Content: "x"}, "files[1].mountPoint", "not a clean path"},
		{"dot", state.File{MountPoint: "/etc/./x", Content: "x"}, "files[1].mountPoint", "not a clean path"},
		{"root", state.File{MountPoint: "/", Content: "x"}, "files[1].mountPoint", "directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "files")
			_, err := writeFiles(dir, []state.File{{MountPoint: "/ok", Content: "fine"}, tt.file}, nil)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, state.ErrInvalid) || !strings.HasPrefix(err.Error(), tt.field+": ") || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("error %q, want %s: …%s…", err, tt.field, tt.why)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("files written despite the error: %v", err)
			}
		})
	}
}
