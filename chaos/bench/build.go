package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// installLinks are the programs of the multi-call binary grapnel that an
// install holds as links to it (cmd/grapnel/multicall.go, `make build`).
var installLinks = []string{"grapnel-server", "grapnel-agent"}

// shimCommand is the process workloads' shim, installed as a small
// binary of its own next to grapnel (`make build`).
const shimCommand = "grapnel-process-shim"

// BinDirEnv names a directory holding this tree's `make build` output
// for this machine (grapnel and grapnel-process-shim). `make test` builds
// bin/ once and sets it, so that the tests of a run take their binaries
// from there instead of each test package linking its own (a link of
// grapnel takes seconds of a CI core). Unset, or for another GOARCH,
// BuildCommands builds each program once per test process. Whoever sets
// it by hand must rebuild bin/ after each change: the tests would run
// the binaries as they are.
const BinDirEnv = "GRAPNEL_TEST_BIN_DIR"

// BuildCommands builds this module's programs into dir as `make build`
// installs them: the one binary grapnel, a link to it for each named
// program (grapnel-server, grapnel-agent) that is not grapnel itself,
// and grapnel-process-shim, the small shim grapnel-agent starts its
// process workloads through when it finds it next to itself, whenever
// grapnel-agent is named. It returns the paths by name. The binaries are
// static (CGO_ENABLED=0) and stripped, as `make build` builds them.
//
// The binaries placed in dir are hard links to (or copies of) the ones
// built once per test process, or of those in $GRAPNEL_TEST_BIN_DIR:
// callers run them and must not change them.
func BuildCommands(dir string, cmds ...string) (map[string]string, error) {
	return BuildCommandsFor(dir, "", cmds...)
}

// BuildCommandsFor is BuildCommands for the architecture goarch (GOARCH,
// Linux; "" for this machine's), as `make build-arm64` builds for arm64.
func BuildCommandsFor(dir, goarch string, cmds ...string) (map[string]string, error) {
	if slices.Contains(cmds, "grapnel-agent") && !slices.Contains(cmds, "grapnel-process-shim") {
		cmds = append(slices.Clip(cmds), "grapnel-process-shim")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := placeBuilt(goarch, "grapnel", filepath.Join(dir, "grapnel")); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, c := range cmds {
		switch {
		case c == "grapnel":
		case c == shimCommand:
			if err := placeBuilt(goarch, c, filepath.Join(dir, c)); err != nil {
				return nil, err
			}
		case slices.Contains(installLinks, c):
			if err := os.Symlink("grapnel", filepath.Join(dir, c)); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("build %s: not a program of grapnel (%v)", c, append([]string{"grapnel", shimCommand}, installLinks...))
		}
		out[c] = filepath.Join(dir, c)
	}
	return out, nil
}

// placeBuilt puts the program cmd for goarch at dst: a hard link to the
// built binary, or a copy where dst is on another file system.
func placeBuilt(goarch, cmd, dst string) error {
	src, err := built(goarch, cmd)
	if err != nil {
		return err
	}
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	return copyFile(src, dst)
}

// builds are the programs built by this test process, by goarch and
// name: each is built once, when a test first asks for it.
var builds struct {
	mu   sync.Mutex
	dir  string
	once map[string]*buildOnce
}

type buildOnce struct {
	once sync.Once
	path string
	err  error
}

// built returns the path of the program cmd for goarch: the one in
// $GRAPNEL_TEST_BIN_DIR when that is set, else this process's build.
func built(goarch, cmd string) (string, error) {
	if d := os.Getenv(BinDirEnv); d != "" && goarch == "" {
		p := filepath.Join(d, cmd)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s is set but holds no %s (make build fills it): %w", BinDirEnv, cmd, err)
		}
		return p, nil
	}
	builds.mu.Lock()
	if builds.once == nil {
		builds.once = map[string]*buildOnce{}
	}
	key := goarch + "/" + cmd
	b := builds.once[key]
	if b == nil {
		b = &buildOnce{}
		builds.once[key] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() {
		dir, err := buildDir()
		if err != nil {
			b.err = err
			return
		}
		name := cmd
		if goarch != "" {
			name += "-linux-" + goarch
		}
		b.path = filepath.Join(dir, name)
		b.err = goBuild(goarch, b.path, cmd)
	})
	return b.path, b.err
}

// buildDirPrefix names the directories of buildDir under os.TempDir.
const buildDirPrefix = "grapnel-testbin-"

// buildDir is this process's directory for its builds, made on first
// use. A test process has no hook at its exit for packages without a
// TestMain, so the directory is named by the process id and each new one
// removes those of processes that have exited.
func buildDir() (string, error) {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir != "" {
		return builds.dir, nil
	}
	removeStaleBuildDirs()
	d, err := os.MkdirTemp("", buildDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", fmt.Errorf("build dir: %w", err)
	}
	builds.dir = d
	return d, nil
}

// removeStaleBuildDirs removes the build directories whose process has
// exited (best effort: what it cannot read or remove stays).
func removeStaleBuildDirs() {
	ents, err := os.ReadDir(os.TempDir())
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), buildDirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		_ = os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
	}
}

// processAlive says whether a process with id pid exists (signal 0; a
// process of another user answers EPERM, and counts as alive).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}

// goBuild builds cmd/<cmd> into bin for goarch ("" for this machine's),
// as `make build` does.
func goBuild(goarch, bin, cmd string) error {
	build := exec.Command("go", "build", "-trimpath", "-tags", "grpcnotrace", "-ldflags", "-s -w", "-o", bin, "github.com/grapnel-io/grapnel/cmd/"+cmd)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if goarch != "" {
		build.Env = append(build.Env, "GOOS=linux", "GOARCH="+goarch)
	}
	if msg, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", cmd, err, msg)
	}
	return nil
}
