package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
)

// installLinks are the programs of the multi-call binary grapnel that an
// install holds as links to it (cmd/grapnel/multicall.go, `make build`).
var installLinks = []string{"grapnel-server", "grapnel-agent"}

// shimCommand is the process workloads' shim, installed as a small
// binary of its own next to grapnel (`make build`).
const shimCommand = "grapnel-process-shim"

// BuildCommands builds this module's programs into dir as `make build`
// installs them: the one binary grapnel, a link to it for each named
// program (grapnel-server, grapnel-agent) that is not grapnel itself,
// and grapnel-process-shim, the small shim grapnel-agent starts its
// process workloads through when it finds it next to itself, whenever
// grapnel-agent is named. It returns the paths by name. The binaries are
// static (CGO_ENABLED=0) and stripped, as `make build` builds them.
func BuildCommands(dir string, cmds ...string) (map[string]string, error) {
	return BuildCommandsFor(dir, "", cmds...)
}

// BuildCommandsFor is BuildCommands for the architecture goarch (GOARCH,
// Linux; "" for this machine's), as `make build-arm64` builds for arm64.
func BuildCommandsFor(dir, goarch string, cmds ...string) (map[string]string, error) {
	if slices.Contains(cmds, "grapnel-agent") && !slices.Contains(cmds, "grapnel-process-shim") {
		cmds = append(slices.Clip(cmds), "grapnel-process-shim")
	}
	if err := goBuild(goarch, filepath.Join(dir, "grapnel"), "grapnel"); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, c := range cmds {
		switch {
		case c == "grapnel":
		case c == shimCommand:
			if err := goBuild(goarch, filepath.Join(dir, c), c); err != nil {
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
