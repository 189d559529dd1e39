package servercmd

import (
	"errors"
	"fmt"
	"os"
)

// errRestartInPlace is run's answer when the replica's storage works
// again after a fault (cluster.Node.StorageHealed): everything is shut
// down, and main executes the binary again (restartInPlace).
var errRestartInPlace = errors.New("restart in place")

// selfExe is this process's binary as the kernel knows it: the file it
// was started from, even when an update has replaced or removed it
// since, so that the replica restarts on the release it ran.
const selfExe = "/proc/self/exe"

// restartInPlace executes this process's binary again with the same
// arguments and environment, as the same process: systemd sees no
// restart (the main pid stays, Type=notify gets READY=1 again), and the
// new run opens the data directory afresh, reading what the disk holds,
// as a restart would. Its file descriptors are closed by the exec (Go
// opens them close-on-exec) save stdin, stdout and stderr. exec is
// syscall.Exec but in tests; it returns only on failure, and then the
// process exits with an error and systemd restarts it instead.
func restartInPlace(exec func(argv0 string, argv, envv []string) error) error {
	fmt.Fprintf(os.Stderr, "grapnel-server: executing %s %q again\n", selfExe, os.Args)
	if err := exec(selfExe, os.Args, os.Environ()); err != nil {
		return fmt.Errorf("restart in place after the storage came back: exec %s: %w", selfExe, err)
	}
	return nil
}
