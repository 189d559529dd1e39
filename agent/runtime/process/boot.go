package process

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/grapnel-io/grapnel/agent/runtime/process/shim"
)

// DefaultBootIDFile is where Linux gives every boot a random id of its
// own.
const DefaultBootIDFile = "/proc/sys/kernel/random/boot_id"

// readBootID reads the id of the running boot from path. The run folder
// may be on a disk that outlives a power cycle, and after one a recorded
// pid may belong to any process, even one whose start time happens to
// match: only the boot id tells the two boots apart.
func readBootID(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(data))
	if id == "" {
		return "", errors.New("empty")
	}
	if len(id) > 128 || strings.ContainsAny(id, "\n\x00") {
		return "", fmt.Errorf("%.40q is not a boot id", id)
	}
	return id, nil
}

// sameBoot reports whether a process recorded in boot recorded can be
// one of the running boot now. An empty side is unknown (a record from
// before boot ids were kept, a kernel without the file): the start time
// alone then decides.
func sameBoot(recorded, now string) bool { return shim.SameBoot(recorded, now) }
