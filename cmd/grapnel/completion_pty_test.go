//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// openPTY opens a pseudo-terminal pair.
func openPTY() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlock: %w", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("pty number: %w", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}

// The completion as a user gets it: an interactive bash on a terminal
// sources `COMPLETE=bash grapnel`, and readline completes what is typed
// before a TAB. This is what the COMP_WORDS emulation cannot show:
// readline replaces only the text after a word break ('=', ':'), a
// command after ';' is completed alone, and no space follows a mask that
// goes on.
func TestCompleteEnvBashOnATerminal(t *testing.T) {
	if _, err := os.Stat("/dev/ptmx"); err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("the completion test needs bash: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(self, filepath.Join(dir, "grapnel")); err != nil {
		t.Fatal(err)
	}
	master, slave, err := openPTY()
	if err != nil {
		t.Fatalf("pty: %v", err)
	}
	defer master.Close()
	cmd := exec.Command(bash, "--norc", "--noprofile", "-i")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), envTestAsCLI+"=1",
		"HOME="+dir, envInsecure+"=true", envServerURL+"=127.0.0.1:1", "TERM=dumb", "INPUTRC=/dev/null", "PS1=$ ", "HISTFILE=/dev/null")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var out syncbuf.Buffer
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			out.Write(b[:n])
			if err != nil {
				return
			}
		}
	}()
	write := func(s string) {
		if _, err := master.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	// The echo of the typed line shows READ""Y, the output READY.
	write(`source <(COMPLETE=bash grapnel); echo READ""Y` + "\n")
	testwait.For(t, 20*time.Second, func() bool { return strings.Contains(out.String(), "READY") }, "bash to source the completion")
	for _, tc := range []struct {
		typed string // TAB is \t; what follows it is typed after the completion
		want  string
	}{
		{"grapnel get wo\t", "grapnel get workloads "},
		{"grapnel get state -o=j\t", "grapnel get state -o=json "},
		{"echo x; grapnel get ag\t", "echo x; grapnel get agents "},
		{"grapnel get state desiredState.w\t.\t", "grapnel get state desiredState.workloads."},
		{"grapnel --server-url=127.0.0.1:2 get sta\t", "grapnel --server-url=127.0.0.1:2 get state "},
		{"grapnel get workloads --state Ru\t", "grapnel get workloads --state Running "},
		{"grapnel cluster up\t", "grapnel cluster upgrade "},
	} {
		start := len(out.String())
		write(tc.typed)
		testwait.For(t, 10*time.Second, func() bool { return strings.Contains(out.String()[start:], tc.want) },
			"%q to complete to %q", tc.typed, tc.want)
		// Ctrl-U drops the line for the next case.
		write("\x15")
	}
	if t.Failed() {
		t.Logf("terminal:\n%q", out.String())
	}
}
