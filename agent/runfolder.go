package agent

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/durable"
)

// secureRunFolder makes the run folder and <agent>_io, or takes them as
// they are, and sets their modes whatever they were: 0700, or 0711 when
// process workloads run under uids of their own and must pass through
// to their directories (they can list nothing). A folder another user
// owns is refused: the default run folder is under /tmp, where anyone
// could have made it first. A mode that was more open is fixed and said
// once.
func secureRunFolder(cfg Config, log interface{ Warn(string, ...any) }) error {
	mode := runtime.PrivateDirMode
	if !cfg.WorkloadUIDs.IsZero() && os.Geteuid() == 0 && offersProcess(cfg) {
		mode = runtime.TraverseMode
	}
	for _, dir := range []string{cfg.RunFolder, filepath.Join(cfg.RunFolder, cfg.Name+"_io")} {
		if err := secureDir(dir, mode, log); err != nil {
			// The error's own errno stays: a failed storage is no
			// configuration error (agent/storage).
			return fmt.Errorf("%w: run folder: %w", ErrConfig, err)
		}
	}
	if mode == runtime.TraverseMode {
		return passable(cfg.RunFolder)
	}
	return nil
}

// passable checks that every directory above the run folder lets other
// users pass (o+x): a workload under its own uid could not reach its
// directories in the run folder otherwise, and every start would fail.
func passable(runFolder string) error {
	abs, err := filepath.Abs(runFolder)
	if err != nil {
		return fmt.Errorf("%w: run folder: %v", ErrConfig, err)
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("%w: run folder: %v", ErrConfig, err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%w: --run-folder %s: %s (mode %v) does not let other users pass, so workloads under their own uids (--workload-uid-range) could not reach their directories; choose a run folder under a directory they may pass, or give it o+x",
				ErrConfig, runFolder, d, fi.Mode().Perm())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

func offersProcess(cfg Config) bool {
	if len(cfg.Runtimes) == 0 {
		return true
	}
	for _, r := range cfg.Runtimes {
		if r == RuntimeProcess {
			return true
		}
	}
	return false
}

func secureDir(dir string, mode fs.FileMode, log interface{ Warn(string, ...any) }) error {
	if err := durable.MkdirAll(dir, runtime.PrivateDirMode); err != nil {
		return err
	}
	if fi, err := os.Lstat(dir); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if err := ownedByMe(dir, fi); err != nil {
			return fmt.Errorf("the link %w", err)
		}
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if err := ownedByMe(dir, fi); err != nil {
		return err
	}
	if fi.Mode().Perm() == mode {
		return nil
	}
	if err := os.Chmod(dir, mode); err != nil {
		return err
	}
	if fi.Mode().Perm()&^mode != 0 {
		log.Warn("a run folder's mode was too open and was fixed", "dir", dir, "was", fi.Mode().Perm().String(), "now", mode.String())
	}
	return nil
}

// ownedByMe refuses a file another user owns.
func ownedByMe(path string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if me := os.Geteuid(); int(st.Uid) != me {
		return fmt.Errorf("%s is owned by uid %d, not the agent's uid %d: another user could change what the agent keeps there; remove it or choose another --run-folder", path, st.Uid, me)
	}
	return nil
}
