package shim

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// SDKControlInterface is where the Ankaios SDKs (Python, Rust) open the
// control interface, and where a podman workload has it mounted.
const SDKControlInterface = "/run/ankaios/control_interface"

// sdkRoot is the directory mounted over in the workload's namespace.
const sdkRoot = "/run/ankaios"

// startWithSDKPath starts the workload in a mount namespace of its own
// in which SDKControlInterface is its control interface directory, so
// that an unmodified SDK application finds it there; the directory in
// ANKAIOS_CONTROL_INTERFACE works too. Namespaces belong to threads: the
// namespace is made on a thread locked for the purpose, the workload is
// forked from that thread, and the thread ends with its goroutine,
// never unlocked, so the shim's other threads keep the host's mounts.
func startWithSDKPath(sp *Spec) (*exec.Cmd, []outPipe, error) {
	type started struct {
		cmd   *exec.Cmd
		pipes []outPipe
		err   error
	}
	ch := make(chan started, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		if err := enterSDKNamespace(sp.ControlInterface); err != nil {
			if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EROFS) {
				ch <- started{err: fmt.Errorf("%w: %w", errNoSDKPath, err)}
				return
			}
			ch <- started{err: fmt.Errorf("mounting the control interface at %s: %w", SDKControlInterface, err)}
			return
		}
		cmd, pipes, err := startChild(sp)
		ch <- started{cmd, pipes, err}
	}()
	s := <-ch
	if s.cmd == nil && errors.Is(s.err, errNoSDKPath) {
		// Without the rights for a mount namespace (a unit without
		// CAP_SYS_ADMIN, a read-only /run) the workload still starts,
		// from this thread in the host's namespace, with its control
		// interface in ANKAIOS_CONTROL_INTERFACE only. The namespace's
		// thread has ended with its goroutine.
		fmt.Fprintf(os.Stderr, "grapnel process shim: %v; the control interface is only in %s\n", s.err, ControlInterfaceEnv)
		return startChild(sp)
	}
	return s.cmd, s.pipes, s.err
}

// errNoSDKPath marks a namespace the shim may not make; the workload
// starts without the fixed path.
var errNoSDKPath = errors.New("no mount namespace for " + SDKControlInterface)

// enterSDKNamespace moves the calling thread into a new mount namespace
// whose mounts do not propagate back to the host, puts a small tmpfs
// over /run/ankaios (created empty on the host when missing), and binds
// dir at SDKControlInterface. dir is opened before the tmpfs hides a run
// folder under /run/ankaios, but inside the new namespace: a bind mount
// takes its source only from the caller's own namespace.
func enterSDKNamespace(dir string) error {
	if err := os.MkdirAll(sdkRoot, 0o755); err != nil {
		return err
	}
	if err := syscall.Unshare(syscall.CLONE_NEWNS); err != nil {
		return fmt.Errorf("a mount namespace: %w", err)
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("keeping the mounts private: %w", err)
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	if err := syscall.Mount("tmpfs", sdkRoot, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "mode=0755,size=16k"); err != nil {
		return fmt.Errorf("a tmpfs at %s: %w", sdkRoot, err)
	}
	if err := os.Mkdir(SDKControlInterface, 0o755); err != nil {
		return err
	}
	src := fmt.Sprintf("/proc/self/fd/%d", fd)
	if err := syscall.Mount(src, SDKControlInterface, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding %s: %w", dir, err)
	}
	return nil
}

// wantsSDKPath says whether the workload gets SDKControlInterface: it
// has a control interface, and the shim may make mount namespaces (it
// runs as root, as the agent does on a vehicle). An agent run by another
// user gives only ANKAIOS_CONTROL_INTERFACE (docs/agent.md).
func wantsSDKPath(sp *Spec) bool {
	return sp.ControlInterface != "" && os.Geteuid() == 0
}
