package netns

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Host is one network namespace on the bridge.
type Host struct {
	Name string // namespace name, e.g. gch-h1
	NS   string // /run/netns/<Name>, for nsenter --net
	Addr string // IPv4 address only
}

// Net is a running test network. Its methods are safe for concurrent use.
type Net struct {
	plan   plan
	hosts  []*Host
	client *Host

	mu          sync.Mutex
	proxies     map[*proxy]struct{}
	closed      bool
	stopSignals func()
	alias       string // the client's second address, once added
}

// Chains Setup creates in every namespace. The chaos chains hold the
// faults and are flushed by Heal; the guard chain stays until Close.
const (
	chainIn    = "GRAPNEL-CHAOS-IN"
	chainOut   = "GRAPNEL-CHAOS-OUT"
	chainNAT   = "GRAPNEL-CHAOS-NAT"
	chainGuard = "GRAPNEL-GUARD"
)

// Setup removes leftovers of cfg.Prefix, then builds the bridge and the
// namespaces and checks that every host is routed via the bridge and
// answers a ping from the client namespace. On error it removes whatever
// it had created.
func Setup(cfg Config) (*Net, error) {
	p, err := cfg.plan()
	if err != nil {
		return nil, err
	}
	if missing := MissingTools(); len(missing) > 0 {
		return nil, fmt.Errorf("%w: missing %s (run scripts/chaos-setup.sh)", ErrCommand, strings.Join(missing, ", "))
	}
	if err := CleanLeftovers(p.prefix); err != nil {
		return nil, err
	}
	if err := checkSubnetFree(p.subnet); err != nil {
		return nil, err
	}
	n := &Net{plan: p, proxies: map[*proxy]struct{}{}}
	for i, a := range p.hosts {
		n.hosts = append(n.hosts, n.newHost(hostSuffix(i+1), a))
	}
	n.client = n.newHost("cl", p.client)
	if err := n.build(); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	return n, nil
}

func (n *Net) newHost(suffix string, a netip.Addr) *Host {
	name := nsName(n.plan.prefix, suffix)
	return &Host{Name: name, NS: "/run/netns/" + name, Addr: a.String()}
}

// checkSubnetFree refuses a subnet that already has an address on some
// interface: the test network would shadow or join a real one.
func checkSubnetFree(subnet netip.Prefix) error {
	out, err := run("ip", "-o", "-4", "addr", "show")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] != "inet" {
				continue
			}
			pre, err := netip.ParsePrefix(f[i+1])
			if err == nil && pre.Overlaps(subnet) {
				return fmt.Errorf("%w: %s overlaps %s on %s", ErrSubnetInUse, subnet, pre, strings.TrimSuffix(f[1], ":"))
			}
		}
	}
	return nil
}

func (n *Net) build() error {
	br := n.Bridge()
	bits := fmt.Sprint(n.plan.subnet.Bits())
	steps := [][]string{
		{"link", "add", br, "type", "bridge"},
		{"addr", "add", n.plan.bridge.String() + "/" + bits, "dev", br},
		{"link", "set", br, "up"},
	}
	for _, s := range steps {
		if _, err := run("ip", s...); err != nil {
			return err
		}
	}
	for _, h := range n.all() {
		if err := n.buildHost(h, bits); err != nil {
			return err
		}
	}
	if err := n.allowForward(); err != nil {
		return err
	}
	return n.verify()
}

// all is the hosts followed by the client.
func (n *Net) all() []*Host {
	return append(append([]*Host(nil), n.hosts...), n.client)
}

func (n *Net) buildHost(h *Host, bits string) error {
	suffix := vethSuffix(strings.TrimPrefix(h.Name, n.plan.prefix+"-"))
	veth, peer := vethName(n.plan.prefix, suffix), peerName(n.plan.prefix, suffix)
	steps := [][]string{
		{"netns", "add", h.Name},
		{"link", "add", veth, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", h.Name},
		{"link", "set", veth, "master", n.Bridge(), "up"},
		{"-n", h.Name, "link", "set", "lo", "up"},
		{"-n", h.Name, "addr", "add", h.Addr + "/" + bits, "dev", peer},
		{"-n", h.Name, "link", "set", peer, "up"},
		{"-n", h.Name, "route", "add", "default", "via", n.plan.bridge.String()},
	}
	for _, s := range steps {
		if _, err := run("ip", s...); err != nil {
			return err
		}
	}
	return restore(h, n.chainsScript())
}

// chainsScript creates the chaos chains and the guard: the namespaces
// have a default route (the root namespace forwards), so the guard is
// what keeps their traffic inside the subnet.
func (n *Net) chainsScript() string {
	return strings.Join([]string{
		"*filter",
		":" + chainIn + " - [0:0]",
		":" + chainOut + " - [0:0]",
		":" + chainGuard + " - [0:0]",
		"-A INPUT -j " + chainIn,
		"-A OUTPUT -j " + chainGuard,
		"-A OUTPUT -j " + chainOut,
		"-A " + chainGuard + " -o lo -j RETURN",
		"-A " + chainGuard + " -d " + n.plan.subnet.String() + " -j RETURN",
		"-A " + chainGuard + " -j REJECT --reject-with icmp-net-prohibited",
		"COMMIT",
		"*nat",
		":" + chainNAT + " - [0:0]",
		"-A OUTPUT -j " + chainNAT,
		"COMMIT",
		"",
	}, "\n")
}

// restore feeds an iptables-restore script to a namespace without
// flushing what is there.
func restore(h *Host, script string) error {
	_, err := runInput(script, "ip", "netns", "exec", h.Name, "iptables-restore", "--noflush")
	return err
}

// allowForward accepts bridge-to-bridge traffic in the root FORWARD chain
// when its policy is DROP: with br_netfilter bridged frames traverse it.
// This is the only rule Setup puts in the root namespace.
func (n *Net) allowForward() error {
	out, err := run("iptables", "-S", "FORWARD")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "-P FORWARD DROP") {
		return nil
	}
	br := n.Bridge()
	_, err = run("iptables", "-w", "-I", "FORWARD", "1", "-i", br, "-o", br,
		"-m", "comment", "--comment", n.plan.comment, "-j", "ACCEPT")
	return err
}

// verify checks routes and reachability before anyone sends traffic.
// Each ping is bounded (one packet, one second) and retried a few times
// while the bridge ports come up.
func (n *Net) verify() error {
	for _, h := range n.all() {
		if err := n.CheckRoute(h.Addr); err != nil {
			return err
		}
	}
	for _, h := range n.hosts {
		var err error
		for try := 0; try < 5; try++ {
			if _, err = run("ip", "netns", "exec", n.client.Name, "ping", "-c", "1", "-W", "1", "-q", h.Addr); err == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("host %s (%s) unreachable from the client namespace: %w", h.Name, h.Addr, err)
		}
	}
	return nil
}

// Hosts returns the host namespaces, h1 first.
func (n *Net) Hosts() []*Host { return append([]*Host(nil), n.hosts...) }

// Client returns the namespace the chaos clients run in.
func (n *Net) Client() *Host { return n.client }

// ClientAlias gives the client namespace a second address on the
// subnet (the one after the client's) and returns it, adding it on the
// first call only: a source of its own for traffic that must not share
// the per-source caps of the processes running there.
func (n *Net) ClientAlias() (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return "", ErrClosed
	}
	if n.alias != "" {
		return n.alias, nil
	}
	a := offset(n.plan.subnet, clientOffset+1)
	dev := peerName(n.plan.prefix, vethSuffix(strings.TrimPrefix(n.client.Name, n.plan.prefix+"-")))
	if _, err := run("ip", "-n", n.client.Name, "addr", "add", a.String()+"/"+fmt.Sprint(n.plan.subnet.Bits()), "dev", dev); err != nil {
		return "", err
	}
	n.alias = a.String()
	return n.alias, nil
}

// Bridge returns the bridge's interface name.
func (n *Net) Bridge() string { return bridgeName(n.plan.prefix) }

// BridgeAddr returns the bridge's address, the root namespace's address on
// the test network.
func (n *Net) BridgeAddr() string { return n.plan.bridge.String() }

// Command returns a command that runs bin with args inside h's network
// namespace. It uses nsenter rather than `ip netns exec` so the process
// stays in the caller's cgroups (podman needs that); nsenter execs bin, so
// the command's pid is bin's.
func (n *Net) Command(h *Host, bin string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=" + h.NS, "--", bin}, args...)...)
}

// CheckRoute refuses ip unless it lies in the test subnet and the root
// namespace routes it through the bridge, so nothing is ever sent to a
// real network.
func (n *Net) CheckRoute(ip string) error {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return fmt.Errorf("%w: address %q: %v", ErrUnsafeRoute, ip, err)
	}
	if !n.plan.subnet.Contains(a) {
		return fmt.Errorf("%w: address %s: outside the test subnet %s", ErrUnsafeRoute, a, n.plan.subnet)
	}
	out, err := run("ip", "route", "get", a.String())
	if err != nil {
		return err
	}
	f := strings.Fields(out)
	dev := ""
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "dev" {
			dev = f[i+1]
			break
		}
	}
	if dev != n.Bridge() {
		return fmt.Errorf("%w: address %s: routed via dev %q, not the bridge %q", ErrUnsafeRoute, a, dev, n.Bridge())
	}
	return nil
}

// host checks that h belongs to this network.
func (n *Net) host(h *Host) error {
	if h == nil {
		return fmt.Errorf("%w: nil host", ErrHost)
	}
	for _, x := range n.all() {
		if x == h {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is not part of network %s", ErrHost, h.Name, n.plan.prefix)
}

// Close stops every proxy and removes the namespaces (killing processes
// still in them), veths, bridge and root rule. It is idempotent.
func (n *Net) Close() error {
	n.mu.Lock()
	n.closed = true
	stop := n.stopSignals
	n.stopSignals = nil
	proxies := n.proxies
	n.proxies = map[*proxy]struct{}{}
	n.mu.Unlock()
	if stop != nil {
		stop()
	}
	for p := range proxies {
		p.stop()
	}
	return CleanLeftovers(n.plan.prefix)
}

// CloseOnSignal makes SIGINT or SIGTERM close the network and then exit
// the process with 128+signal, so an interrupted campaign leaves nothing
// behind. Close uninstalls the handler.
func (n *Net) CloseOnSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	var once sync.Once
	n.mu.Lock()
	n.stopSignals = func() { once.Do(func() { signal.Stop(ch); close(done) }) }
	n.mu.Unlock()
	go func() {
		select {
		case s := <-ch:
			if err := n.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "netns: close on signal:", err)
			}
			code := 1
			if sig, ok := s.(syscall.Signal); ok {
				code = 128 + int(sig)
			}
			os.Exit(code)
		case <-done:
		}
	}()
}
