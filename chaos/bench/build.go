package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
)

// BuildCommands builds the named commands of this module (grapnel-server,
// grapnel-agent, grapnel) into dir and returns their paths by name.
// grapnel-agent comes with grapnel-process-shim, the shim it starts its
// process workloads through when it finds it next to itself, as installed.
// They are built static (CGO_ENABLED=0), as `make build` builds them.
func BuildCommands(dir string, cmds ...string) (map[string]string, error) {
	if slices.Contains(cmds, "grapnel-agent") && !slices.Contains(cmds, "grapnel-process-shim") {
		cmds = append(slices.Clip(cmds), "grapnel-process-shim")
	}
	out := map[string]string{}
	for _, c := range cmds {
		bin := filepath.Join(dir, c)
		build := exec.Command("go", "build", "-o", bin, "github.com/grapnel-io/grapnel/cmd/"+c)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %v\n%s", c, err, msg)
		}
		out[c] = bin
	}
	return out, nil
}
