// Package containerdtest starts a containerd of its own for tests of the
// containerd runtime: a private socket, root and state directory under a
// temporary directory, so that the host's containerd (if any) and its
// containers are never touched, with the offline test image that
// scripts/containerd-setup.sh builds imported into it. nerdctl's data
// root and CNI configuration directory are there too, with a default
// network of the daemon's own (a bridge of its own on a free subnet), so
// that the host's nerdctl0 is left alone; the bridge, its iptables rules
// and the IP leases of CNI's host-local plugin (under
// /var/lib/cni/networks/bridge) are on the host while containers run,
// and removed by Stop.
package containerdtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// clk is the wall clock; a test daemon runs in real time.
var clk = clock.Real()

// Image is the offline test image (busybox).
const Image = "localhost/grapnel-busybox:latest"

// DefaultArchive is where scripts/containerd-setup.sh leaves the image;
// GRAPNEL_CONTAINERD_IMAGE_TAR overrides it.
const DefaultArchive = "/var/lib/grapnel/containerd-test-image.tar"

// RequireEnv, set to 1 (as .ci/run does), turns a missing containerd into
// a test failure instead of a skip.
const RequireEnv = "GRAPNEL_REQUIRE_CONTAINERD"

// Daemon is one running test containerd.
type Daemon struct {
	Dir     string // the temporary directory holding everything
	Address string // its socket
	Root    string
	State   string
	// NerdctlRoot and NetConf are nerdctl's --data-root and
	// --cni-netconfpath for this daemon.
	NerdctlRoot string
	NetConf     string
	cmd         *exec.Cmd
	exited      chan struct{}
}

// Missing says why containerd cannot be started here ("" when it can).
func Missing() string {
	for _, bin := range []string{"containerd", "ctr", "runc", "nerdctl"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " is not installed: run scripts/containerd-setup.sh"
		}
	}
	if os.Geteuid() != 0 {
		return "containerd needs root"
	}
	if _, err := os.Stat(archive()); err != nil {
		return "the test image archive " + archive() + " is missing: run scripts/containerd-setup.sh"
	}
	return ""
}

func archive() string {
	if a := os.Getenv("GRAPNEL_CONTAINERD_IMAGE_TAR"); a != "" {
		return a
	}
	return DefaultArchive
}

// Start starts a containerd in a new temporary directory and imports the
// test image into it.
func Start() (*Daemon, error) {
	dir, err := os.MkdirTemp("", "gctd")
	if err != nil {
		return nil, err
	}
	d := &Daemon{Dir: dir, Address: filepath.Join(dir, "c.sock"), Root: filepath.Join(dir, "root"), State: filepath.Join(dir, "state"),
		NerdctlRoot: filepath.Join(dir, "nerdctl"), NetConf: filepath.Join(dir, "net.d")}
	if err := d.start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if out, err := d.Ctr("images", "import", archive()); err != nil {
		d.Stop()
		return nil, fmt.Errorf("importing the test image: %w: %s", err, out)
	}
	if err := d.defaultNetwork(); err != nil {
		d.Stop()
		return nil, err
	}
	return d, nil
}

// defaultNetwork creates the daemon's default network, named "bridge" as
// nerdctl's (its network hooks look the default up by that name), with a
// bridge and subnet of its own: nerdctl's (nerdctl0, 10.4.0.0/24) would
// clash with a host that has one. nerdctl names the bridge of a network
// called "bridge" nerdctl0 and has no option to change it: the
// configuration it wrote is edited. nerdctl refuses a subnet that
// overlaps a host route: try others.
func (d *Daemon) defaultNetwork() error {
	var last error
	for i := 0; i < 16; i++ {
		b := make([]byte, 1)
		_, _ = rand.Read(b)
		subnet := fmt.Sprintf("10.213.%d.0/24", b[0])
		out, err := d.Nerdctl("network", "create", "--subnet", subnet, "--label", "nerdctl/default-network=true", "bridge")
		if err == nil {
			name := make([]byte, 4)
			_, _ = rand.Read(name)
			path := filepath.Join(d.NetConf, "nerdctl-bridge.conflist")
			conf, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			edited := bytes.Replace(conf, []byte(`"bridge": "nerdctl0"`), []byte(fmt.Sprintf(`"bridge": "gctd%x"`, name)), 1)
			if bytes.Equal(edited, conf) {
				return fmt.Errorf("%s does not name the bridge nerdctl0: %s", path, conf)
			}
			return os.WriteFile(path, edited, 0o644)
		}
		last = fmt.Errorf("creating the default network: %w: %s", err, out)
		if !strings.Contains(out, "overlaps") {
			break
		}
	}
	return last
}

// Nerdctl runs nerdctl against the daemon, with its data root and CNI
// configuration, and returns its combined output.
func (d *Daemon) Nerdctl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "nerdctl", append([]string{"--address", d.Address, "--data-root", d.NerdctlRoot, "--cni-netconfpath", d.NetConf}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// removeNetwork removes the default network's bridge, which is on the
// host (the IP leases went with the containers).
func (d *Daemon) removeNetwork() {
	b, err := os.ReadFile(filepath.Join(d.NetConf, "nerdctl-bridge.conflist"))
	if err == nil {
		var conf struct {
			Plugins []struct {
				Bridge string `json:"bridge"`
			} `json:"plugins"`
		}
		if json.Unmarshal(b, &conf) == nil {
			for _, p := range conf.Plugins {
				if p.Bridge != "" {
					_ = exec.Command("ip", "link", "delete", p.Bridge).Run()
				}
			}
		}
	}
}

// start runs containerd with its built-in defaults (no config file) and
// waits until it answers.
func (d *Daemon) start() error {
	logf, err := os.OpenFile(filepath.Join(d.Dir, "containerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command("containerd", "--config", os.DevNull, "--root", d.Root, "--state", d.State, "--address", d.Address)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	logf.Close()
	d.cmd, d.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(d.exited) }()
	deadline := clk.Now().Add(30 * time.Second)
	for {
		if _, err := d.Ctr("version"); err == nil {
			return nil
		}
		select {
		case <-d.exited:
			return fmt.Errorf("containerd exited at start; see %s", filepath.Join(d.Dir, "containerd.log"))
		case <-clock.After(clk, 50*time.Millisecond):
		}
		if clk.Now().After(deadline) {
			return errors.New("containerd did not answer within 30s")
		}
	}
}

// Ctr runs ctr against the daemon and returns its combined output.
func (d *Daemon) Ctr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", d.Address}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// PowerCut ends the daemon, its shims and every container task at once
// and forgets the state directory, as a power cut does to a containerd
// whose state is on a tmpfs (/run/containerd); the root (containers,
// images, writable layers) survives. Restart brings the daemon back.
func (d *Daemon) PowerCut() error {
	pids := d.processes()
	d.cmd.Process.Kill()
	<-d.exited
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range pids {
		waitGone(pid)
	}
	unmountUnder(d.State)
	return os.RemoveAll(d.State)
}

// Restart starts the daemon again on the same directories.
func (d *Daemon) Restart() error { return d.start() }

// Stop removes every container, ends the daemon and its shims and
// removes the temporary directory.
func (d *Daemon) Stop() {
	if out, err := d.Ctr("namespaces", "ls", "-q"); err == nil {
		for _, ns := range strings.Fields(out) {
			tasks, _ := d.Ctr("-n", ns, "tasks", "ls", "-q")
			for _, id := range strings.Fields(tasks) {
				_, _ = d.Ctr("-n", ns, "tasks", "kill", "-s", "SIGKILL", id)
			}
			cs, _ := d.Ctr("-n", ns, "containers", "ls", "-q")
			for _, id := range strings.Fields(cs) {
				_, _ = d.Ctr("-n", ns, "tasks", "delete", "-f", id)
				_, _ = d.Ctr("-n", ns, "containers", "delete", id)
			}
		}
	}
	_ = d.PowerCut()
	d.removeNetwork()
	unmountUnder(d.Root)
	_ = os.RemoveAll(d.Dir)
}

// processes are the pids of this daemon's shims and of the container
// processes they started: the shims name the daemon's socket in their
// command line, the containers are their children.
func (d *Daemon) processes() []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Field 4 is the parent pid, after the command in parentheses.
		rest := string(stat[bytes.LastIndexByte(stat, ')')+1:])
		var state string
		var ppid int
		fmt.Sscanf(rest, " %s %d", &state, &ppid)
		parent[pid] = ppid
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmdline), "containerd-shim") && strings.Contains(string(cmdline), d.Address) {
			pids = append(pids, pid)
		}
	}
	shims := map[int]bool{}
	for _, p := range pids {
		shims[p] = true
	}
	for pid, ppid := range parent {
		if shims[ppid] {
			pids = append(pids, pid)
		}
	}
	return pids
}

func waitGone(pid int) {
	deadline := clk.Now().Add(10 * time.Second)
	for clk.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		clock.Sleep(clk, 20*time.Millisecond)
	}
}

// unmountUnder unmounts every mount below dir, deepest first.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		_ = unix.Unmount(points[i], unix.MNT_DETACH)
	}
}
