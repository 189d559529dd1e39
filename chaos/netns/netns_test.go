package netns

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Each root test uses its own prefix and subnet, so the tests never touch
// a network a campaign on the default ones may be running.
const echoPort = 7000

// needRoot skips with the reason when the machine cannot run the harness.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("chaos/netns needs root to create namespaces")
	}
	if missing := MissingTools(); len(missing) > 0 {
		t.Skipf("chaos/netns needs %s (run scripts/chaos-setup.sh)", strings.Join(missing, ", "))
	}
}

func setup(t *testing.T, cfg Config) *Net {
	t.Helper()
	n, err := Setup(cfg)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return n
}

func mustReach(t *testing.T, n *Net, from, to *Host) time.Duration {
	t.Helper()
	rtt, err := probeTCP(t, n, from, to.Addr, echoPort, 2*time.Second)
	if err != nil {
		t.Fatalf("want reachable: %v", err)
	}
	return rtt
}

func mustNotReach(t *testing.T, n *Net, from, to *Host) {
	t.Helper()
	if _, err := probeTCP(t, n, from, to.Addr, echoPort, 400*time.Millisecond); err == nil {
		t.Fatalf("%s reached %s:%d, want blocked", from.Name, to.Addr, echoPort)
	}
}

func heal(t *testing.T, n *Net) {
	t.Helper()
	if err := n.Heal(); err != nil {
		t.Fatalf("Heal: %v", err)
	}
}

func TestNetFaults(t *testing.T) {
	needRoot(t)
	n := setup(t, Config{Prefix: "gnt", Hosts: 3, Subnet: "10.213.8.0/24"})
	hs := n.Hosts()
	h1, h2, h3, cl := hs[0], hs[1], hs[2], n.Client()
	if len(hs) != 3 || h1.Name != "gnt-h1" || h1.Addr != "10.213.8.11" || cl.Addr != "10.213.8.100" || h1.NS != "/run/netns/gnt-h1" {
		t.Fatalf("hosts %+v %+v %+v client %+v", h1, h2, h3, cl)
	}
	servers := map[*Host]*server{}
	for _, h := range hs {
		servers[h] = startServer(t, n, h, echoPort)
	}

	t.Run("CheckRoute", func(t *testing.T) {
		for _, h := range append(hs, cl) {
			if err := n.CheckRoute(h.Addr); err != nil {
				t.Errorf("CheckRoute(%s): %v", h.Addr, err)
			}
		}
		for _, ip := range []string{"192.0.2.2", "8.8.8.8", "10.213.9.11", "127.0.0.1", n.BridgeAddr(), "nonsense"} {
			if err := n.CheckRoute(ip); !errors.Is(err, ErrUnsafeRoute) {
				t.Errorf("CheckRoute(%s) = %v, want ErrUnsafeRoute", ip, err)
			}
		}
	})

	t.Run("Reach", func(t *testing.T) {
		mustReach(t, n, cl, h1)
		mustReach(t, n, h2, h1)
		mustReach(t, n, h3, h2)
	})

	t.Run("GuardKeepsTrafficInside", func(t *testing.T) {
		// Checked by reading the rules, not by sending to an outside
		// address: a broken guard would let that packet out.
		want := []string{
			"-A " + chainGuard + " -o lo -j RETURN",
			"-A " + chainGuard + " -d 10.213.8.0/24 -j RETURN",
			"-A " + chainGuard + " -j REJECT --reject-with icmp-net-prohibited",
		}
		for _, h := range append(hs, cl) {
			if got := chainRules(t, h, "filter", chainGuard); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("%s guard:\n%s", h.Name, strings.Join(got, "\n"))
			}
			out := strings.Join(chainRules(t, h, "filter", "OUTPUT"), "\n")
			if !strings.Contains(out, "-A OUTPUT -j "+chainGuard) {
				t.Errorf("%s OUTPUT does not jump to the guard:\n%s", h.Name, out)
			}
		}
	})

	t.Run("Partition", func(t *testing.T) {
		if err := n.Partition([]*Host{h1}, []*Host{h2, h3}); err != nil {
			t.Fatal(err)
		}
		mustNotReach(t, n, h2, h1)
		mustNotReach(t, n, h1, h2)
		mustNotReach(t, n, h1, h3)
		mustReach(t, n, h2, h3)
		mustReach(t, n, cl, h1)
		heal(t, n)
		mustReach(t, n, h2, h1)
		mustReach(t, n, h1, h3)
	})

	t.Run("OneWay", func(t *testing.T) {
		if err := n.OneWay([]*Host{h1}, []*Host{h2}); err != nil {
			t.Fatal(err)
		}
		// TCP from h1 to h2 needs h1's SYN to arrive: it cannot.
		mustNotReach(t, n, h1, h2)
		// A datagram from h2 to h1 arrives; one from h1 to h2 does not.
		sendUDP(t, n, h2, h1.Addr, echoPort, "back")
		if !servers[h1].udpFrom(h2.Addr, "back", 2*time.Second) {
			t.Error("datagram h2 -> h1 did not arrive")
		}
		sendUDP(t, n, h1, h2.Addr, echoPort, "fwd")
		if servers[h2].udpFrom(h1.Addr, "fwd", 400*time.Millisecond) {
			t.Error("datagram h1 -> h2 arrived through a one-way cut")
		}
		heal(t, n)
		mustReach(t, n, h1, h2)
		sendUDP(t, n, h1, h2.Addr, echoPort, "healed")
		if !servers[h2].udpFrom(h1.Addr, "healed", 2*time.Second) {
			t.Error("datagram h1 -> h2 lost after Heal")
		}
	})

	t.Run("Isolate", func(t *testing.T) {
		if err := n.Isolate(h3); err != nil {
			t.Fatal(err)
		}
		mustNotReach(t, n, cl, h3)
		mustNotReach(t, n, h3, h1)
		mustReach(t, n, cl, h1)
		heal(t, n)
		mustReach(t, n, cl, h3)
	})

	t.Run("Loss100", func(t *testing.T) {
		if err := n.Loss(h1, h2, 100); err != nil {
			t.Fatal(err)
		}
		mustNotReach(t, n, h1, h2)
		mustNotReach(t, n, h2, h1)
		mustReach(t, n, h3, h1)
		heal(t, n)
		mustReach(t, n, h1, h2)
	})

	t.Run("Delay", func(t *testing.T) {
		const d = 150 * time.Millisecond
		undo, err := n.Delay(h1, h2, echoPort, d)
		if err != nil {
			t.Fatal(err)
		}
		// The request and the echo each wait d in the proxy.
		if rtt := mustReach(t, n, h1, h2); rtt < 2*d {
			t.Errorf("delayed round trip %s, want at least %s", rtt, 2*d)
		}
		if rtt := mustReach(t, n, h3, h2); rtt >= d {
			t.Errorf("undelayed pair h3 -> h2 took %s, want under %s", rtt, d)
		}
		// A partition must also cut the proxied path.
		if err := n.Partition([]*Host{h1}, []*Host{h2}); err != nil {
			t.Fatal(err)
		}
		mustNotReach(t, n, h1, h2)
		if err := n.Heal(); err != nil {
			t.Fatal(err)
		}
		if err := undo(); err != nil {
			t.Errorf("undo after Heal: %v", err)
		}
		if rtt := mustReach(t, n, h1, h2); rtt >= d {
			t.Errorf("round trip after Heal %s, want under %s", rtt, d)
		}

		undo, err = n.Delay(h1, h2, echoPort, d)
		if err != nil {
			t.Fatal(err)
		}
		if rtt := mustReach(t, n, h1, h2); rtt < 2*d {
			t.Errorf("delayed round trip %s, want at least %s", rtt, 2*d)
		}
		if err := undo(); err != nil {
			t.Fatal(err)
		}
		if got := chainRules(t, h1, "nat", chainNAT); len(got) != 0 {
			t.Errorf("undo left nat rules %v", got)
		}
		if rtt := mustReach(t, n, h1, h2); rtt >= d {
			t.Errorf("round trip after undo %s, want under %s", rtt, d)
		}
	})

	t.Run("HealLeavesChainsEmpty", func(t *testing.T) {
		if err := n.Loss(h1, h3, 40); err != nil {
			t.Fatal(err)
		}
		if got := chainRules(t, h3, "filter", chainIn); len(got) == 0 {
			t.Fatal("Loss added no rule")
		}
		heal(t, n)
		for _, h := range append(hs, cl) {
			for _, c := range [][2]string{{"filter", chainIn}, {"filter", chainOut}, {"nat", chainNAT}} {
				if got := chainRules(t, h, c[0], c[1]); len(got) != 0 {
					t.Errorf("%s %s after Heal: %v", h.Name, c[1], got)
				}
			}
		}
	})

	t.Run("BadFaultInput", func(t *testing.T) {
		stranger := &Host{Name: "other-h1", Addr: "10.213.8.11"}
		checks := []struct {
			name string
			err  error
			want error
		}{
			{"same host", n.Partition([]*Host{h1}, []*Host{h1}), ErrHost},
			{"empty side", n.OneWay(nil, []*Host{h1}), ErrHost},
			{"foreign host", n.Isolate(stranger), ErrHost},
			{"loss 0", n.Loss(h1, h2, 0), ErrConfig},
			{"loss 101", n.Loss(h1, h2, 101), ErrConfig},
		}
		_, derr := n.Delay(h1, h2, 0, time.Second)
		checks = append(checks, struct {
			name string
			err  error
			want error
		}{"delay port", derr, ErrConfig})
		for _, c := range checks {
			if !errors.Is(c.err, c.want) {
				t.Errorf("%s: err = %v, want %v", c.name, c.err, c.want)
			}
		}
	})
}

// chainRules lists the rules of a chain inside h's namespace.
func chainRules(t *testing.T, h *Host, table, chain string) []string {
	t.Helper()
	out, err := run("ip", "netns", "exec", h.Name, "iptables", "-w", "-t", table, "-S", chain)
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "-A ") {
			rules = append(rules, l)
		}
	}
	return rules
}

func mustBeGone(t *testing.T, prefix string) {
	t.Helper()
	left, err := Leftovers(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
	// Cross-check with the raw listings, not only our parser.
	for _, args := range [][]string{{"netns", "list"}, {"-o", "link", "show"}} {
		out, err := run("ip", args...)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, prefix+"-") || strings.Contains(out, prefix+"br0") {
			t.Fatalf("ip %s still shows %s:\n%s", strings.Join(args, " "), prefix, out)
		}
	}
}

func TestCloseLeavesNothing(t *testing.T) {
	needRoot(t)
	n, err := Setup(Config{Prefix: "gnc", Hosts: 2, Subnet: "10.213.9.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = CleanLeftovers("gnc") })
	if _, err := n.Delay(n.Hosts()[0], n.Hosts()[1], echoPort, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	mustBeGone(t, "gnc")
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := n.Heal(); !errors.Is(err, ErrClosed) {
		t.Errorf("Heal after Close = %v, want ErrClosed", err)
	}
}

func TestCleanLeftoversAfterCrash(t *testing.T) {
	needRoot(t)
	const prefix = "gnx"
	cfg := Config{Prefix: prefix, Hosts: 2, Subnet: "10.213.10.0/24"}
	t.Cleanup(func() { _ = CleanLeftovers(prefix) })

	// A crashed run: the Net is forgotten with a process still inside.
	crashed, err := Setup(cfg)
	if err != nil {
		t.Fatal(err)
	}
	orphan := crashed.Command(crashed.Hosts()[0], "sleep", "30")
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- orphan.Wait() }()

	// The rerun's Setup cleans first and succeeds on the same names.
	again, err := Setup(cfg)
	if err != nil {
		t.Fatalf("Setup over leftovers: %v", err)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Error("process in a leftover namespace still running")
	}
	if _, err := probeTCP(t, again, again.Client(), again.Hosts()[1].Addr, echoPort, 300*time.Millisecond); err == nil {
		t.Error("nothing listens, want the probe to fail")
	}

	// Forget it as well, then clean explicitly.
	if err := CleanLeftovers(prefix); err != nil {
		t.Fatal(err)
	}
	mustBeGone(t, prefix)
	if err := CleanLeftovers(prefix); err != nil {
		t.Errorf("CleanLeftovers on a clean machine: %v", err)
	}
}

func TestSetupRefusesSubnetInUse(t *testing.T) {
	needRoot(t)
	a := setup(t, Config{Prefix: "gna", Hosts: 1, Subnet: "10.213.11.0/24"})
	_ = a
	_, err := Setup(Config{Prefix: "gnb", Hosts: 1, Subnet: "10.213.11.0/25"})
	if !errors.Is(err, ErrSubnetInUse) {
		t.Fatalf("Setup on a used subnet = %v, want ErrSubnetInUse", err)
	}
	mustBeGone(t, "gnb")
}

func TestCloseOnSignal(t *testing.T) {
	needRoot(t)
	const prefix = "gns"
	t.Cleanup(func() { _ = CleanLeftovers(prefix) })
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := execCommand(exe, "signal", prefix, "10.213.12.0/24")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ready <- sc.Scan() && sc.Text() == "ready"
		for sc.Scan() {
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			_ = cmd.Process.Kill()
			t.Fatal("helper did not set up")
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("helper not ready in 20 s")
	}
	if left, _ := Leftovers(prefix); len(left) == 0 {
		t.Fatal("helper's network not there before the signal")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var exit interface{ ExitCode() int }
	if !errors.As(err, &exit) || exit.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Fatalf("helper exit = %v, want code %d", err, 128+int(syscall.SIGTERM))
	}
	mustBeGone(t, prefix)
}

// The client's alias is an address of its own on the subnet, routed over
// the bridge, that the hosts reach; a second call gives the same one.
func TestClientAlias(t *testing.T) {
	needRoot(t)
	n := setup(t, Config{Prefix: "gna", Hosts: 1, Subnet: "10.213.10.0/24"})
	a, err := n.ClientAlias()
	if err != nil {
		t.Fatal(err)
	}
	if a != "10.213.10.101" {
		t.Fatalf("alias %s, want 10.213.10.101", a)
	}
	if again, err := n.ClientAlias(); err != nil || again != a {
		t.Fatalf("second call: %s, %v", again, err)
	}
	if err := n.CheckRoute(a); err != nil {
		t.Fatal(err)
	}
	if out, err := run("ip", "netns", "exec", n.Hosts()[0].Name, "ping", "-c", "1", "-W", "1", "-q", a); err != nil {
		t.Fatalf("the host does not reach the alias: %v\n%s", err, out)
	}
}
