package process

import (
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/testwait"
)

// A workload inherits stdin, stdout and stderr only, not a descriptor
// its agent holds without close-on-exec (here one the test opens so, as
// an agent's parent may leave one open).
func TestWorkloadInheritsOnlyItsStdio(t *testing.T) {
	stray, err := syscall.Dup(int(os.Stdin.Fd())) // dup leaves close-on-exec off
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(stray)
	h := newHarness(t, Config{})
	id := h.create(h.spec("sleeper", "command: sleep\nargs: ['60']"))
	pid, err := h.rt.PID(id)
	if err != nil {
		t.Fatal(err)
	}
	// Waited for: while the dynamic loader starts sleep it holds libc open.
	var held []string
	onlyStdio := func() bool {
		entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Fatal(err)
		}
		var fds []string
		held = held[:0]
		for _, e := range entries {
			to, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
			fds, held = append(fds, e.Name()), append(held, e.Name()+" "+to)
		}
		return slices.Equal(fds, []string{"0", "1", "2"})
	}
	if !testwait.Until(5*time.Second, onlyStdio) {
		t.Errorf("the workload holds the descriptors %v (the agent's stray one is %d), want 0 1 2", held, stray)
	}
}
