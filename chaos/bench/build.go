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
var installLinks = []string{"grapnel-server", "grapnel-agent", "grapnel-process-shim"}

// BuildCommands builds this module's one binary, grapnel, into dir as
// `make build` installs it, with a link to it for each named program
// (grapnel-server, grapnel-agent, grapnel) that is not grapnel itself,
// and returns the paths by name. grapnel-agent comes with
// grapnel-process-shim, the shim it starts its process workloads
// through when it finds it next to itself, as installed. The binary is
// static (CGO_ENABLED=0) and stripped, as `make build` builds it.
func BuildCommands(dir string, cmds ...string) (map[string]string, error) {
	return BuildCommandsFor(dir, "", cmds...)
}

// BuildCommandsFor is BuildCommands for the architecture goarch (GOARCH,
// Linux; "" for this machine's), as `make build-arm64` builds for arm64.
func BuildCommandsFor(dir, goarch string, cmds ...string) (map[string]string, error) {
	if slices.Contains(cmds, "grapnel-agent") && !slices.Contains(cmds, "grapnel-process-shim") {
		cmds = append(slices.Clip(cmds), "grapnel-process-shim")
	}
	bin := filepath.Join(dir, "grapnel")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "github.com/grapnel-io/grapnel/cmd/grapnel")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if goarch != "" {
		build.Env = append(build.Env, "GOOS=linux", "GOARCH="+goarch)
	}
	if msg, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build grapnel: %v\n%s", err, msg)
	}
	out := map[string]string{}
	for _, c := range cmds {
		switch {
		case c == "grapnel":
		case slices.Contains(installLinks, c):
			if err := os.Symlink("grapnel", filepath.Join(dir, c)); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("build %s: not a program of grapnel (%v)", c, append([]string{"grapnel"}, installLinks...))
		}
		out[c] = filepath.Join(dir, c)
	}
	return out, nil
}
