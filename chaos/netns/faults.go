package netns

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// rule is one iptables rule for a namespace's chaos chain.
type rule struct {
	host  *Host
	chain string
	spec  []string
}

// dropFlow drops packets travelling from one host to another, with
// probability prob ("" means always). The receiver's INPUT drops them by
// source. Two conntrack rules cover connections a Delay proxy relays, whose
// packets carry the bridge address instead of the peer's: the receiver
// drops replies of its own proxied connections to the sender, and the
// sender drops requests of its proxied connections to the receiver. The
// "! -s" / "! -d" keep a direct packet from meeting two random draws.
func dropFlow(from, to *Host, prob string) []rule {
	stat := []string{}
	if prob != "" {
		stat = []string{"-m", "statistic", "--mode", "random", "--probability", prob}
	}
	drop := func(parts ...string) []string {
		return append(append(parts, stat...), "-j", "DROP")
	}
	return []rule{
		{to, chainIn, drop("-s", from.Addr)},
		{to, chainIn, drop("!", "-s", from.Addr, "-m", "conntrack", "--ctorigdst", from.Addr, "--ctdir", "REPLY")},
		{from, chainOut, drop("!", "-d", to.Addr, "-m", "conntrack", "--ctorigdst", to.Addr, "--ctdir", "ORIGINAL")},
	}
}

// isolate drops everything h sends or receives except on loopback.
func isolate(h *Host) []rule {
	return []rule{
		{h, chainIn, []string{"!", "-i", "lo", "-j", "DROP"}},
		{h, chainOut, []string{"!", "-o", "lo", "-j", "DROP"}},
	}
}

// probability renders a loss percentage for the statistic match; 100
// needs no match at all.
func probability(percent int) string {
	if percent >= 100 {
		return ""
	}
	return fmt.Sprintf("%.2f", float64(percent)/100)
}

// Partition cuts every host of a from every host of b, both ways.
func (n *Net) Partition(a, b []*Host) error {
	rules, err := n.pairs("Partition", a, b, func(x, y *Host) []rule {
		return append(dropFlow(x, y, ""), dropFlow(y, x, "")...)
	})
	if err != nil {
		return err
	}
	return n.apply(rules)
}

// OneWay drops packets from every host of from to every host of to; the
// other direction passes (a TCP connection needs both, so only datagrams
// really get through).
func (n *Net) OneWay(from, to []*Host) error {
	rules, err := n.pairs("OneWay", from, to, func(x, y *Host) []rule {
		return dropFlow(x, y, "")
	})
	if err != nil {
		return err
	}
	return n.apply(rules)
}

// Isolate cuts h from every other namespace and the root namespace.
func (n *Net) Isolate(h *Host) error {
	if err := n.host(h); err != nil {
		return fmt.Errorf("Isolate: %w", err)
	}
	return n.apply(isolate(h))
}

// Loss drops percent of the packets between a and b, each direction
// drawn independently.
func (n *Net) Loss(a, b *Host, percent int) error {
	if percent < 1 || percent > 100 {
		return fmt.Errorf("%w: Loss percent %d: want 1 to 100", ErrConfig, percent)
	}
	rules, err := n.pairs("Loss", []*Host{a}, []*Host{b}, func(x, y *Host) []rule {
		p := probability(percent)
		return append(dropFlow(x, y, p), dropFlow(y, x, p)...)
	})
	if err != nil {
		return err
	}
	return n.apply(rules)
}

// pairs validates two host lists and builds rules for every pair.
func (n *Net) pairs(op string, a, b []*Host, mk func(x, y *Host) []rule) ([]rule, error) {
	if len(a) == 0 || len(b) == 0 {
		return nil, fmt.Errorf("%w: %s: both host lists must be non-empty", ErrHost, op)
	}
	var rules []rule
	for _, x := range a {
		if err := n.host(x); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		for _, y := range b {
			if err := n.host(y); err != nil {
				return nil, fmt.Errorf("%s: %w", op, err)
			}
			if x == y {
				return nil, fmt.Errorf("%w: %s: host %s is on both sides", ErrHost, op, x.Name)
			}
			rules = append(rules, mk(x, y)...)
		}
	}
	return rules, nil
}

// apply appends rules, one iptables-restore per namespace so each
// namespace changes atomically.
func (n *Net) apply(rules []rule) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	scripts := map[*Host][]string{}
	var order []*Host
	for _, r := range rules {
		if _, ok := scripts[r.host]; !ok {
			order = append(order, r.host)
		}
		scripts[r.host] = append(scripts[r.host], "-A "+r.chain+" "+strings.Join(r.spec, " "))
	}
	for _, h := range order {
		script := "*filter\n" + strings.Join(scripts[h], "\n") + "\nCOMMIT\n"
		if err := restore(h, script); err != nil {
			return err
		}
	}
	return nil
}

// Heal flushes the chaos chains in every namespace and stops every delay
// proxy; the guard and the chain jumps stay.
func (n *Net) Heal() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return ErrClosed
	}
	proxies := n.proxies
	n.proxies = map[*proxy]struct{}{}
	var errs []error
	flush := "*filter\n-F " + chainIn + "\n-F " + chainOut + "\nCOMMIT\n*nat\n-F " + chainNAT + "\nCOMMIT\n"
	for _, h := range n.all() {
		errs = append(errs, restore(h, flush))
	}
	n.mu.Unlock()
	for p := range proxies {
		p.stop()
	}
	return errors.Join(errs...)
}

// Delay adds d to every chunk, both ways, of new TCP connections from a to
// b:port. A DNAT rule in a's namespace sends them to a proxy listening on
// the bridge address, which dials b:port. Undo removes the rule and stops
// the proxy, cutting the connections it carries; Heal does the same for
// every delay.
func (n *Net) Delay(a, b *Host, port int, d time.Duration) (undo func() error, err error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("%w: Delay port %d: want 1 to 65535", ErrConfig, port)
	}
	if d < 0 {
		return nil, fmt.Errorf("%w: Delay duration %s: negative", ErrConfig, d)
	}
	if _, err := n.pairs("Delay", []*Host{a}, []*Host{b}, func(_, _ *Host) []rule { return nil }); err != nil {
		return nil, err
	}
	if err := n.CheckRoute(b.Addr); err != nil {
		return nil, err
	}
	p, err := startProxy(n.BridgeAddr(), fmt.Sprintf("%s:%d", b.Addr, port), d)
	if err != nil {
		return nil, err
	}
	spec := []string{"-p", "tcp", "-d", b.Addr, "--dport", fmt.Sprint(port),
		"-j", "DNAT", "--to-destination", p.addr()}

	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		p.stop()
		return nil, ErrClosed
	}
	script := "*nat\n-A " + chainNAT + " " + strings.Join(spec, " ") + "\nCOMMIT\n"
	if err := restore(a, script); err != nil {
		p.stop()
		return nil, err
	}
	n.proxies[p] = struct{}{}
	return func() error { return n.undoDelay(a, p, spec) }, nil
}

// undoDelay is a no-op once Heal or Close has taken the proxy.
func (n *Net) undoDelay(a *Host, p *proxy, spec []string) error {
	n.mu.Lock()
	_, live := n.proxies[p]
	delete(n.proxies, p)
	var err error
	if live {
		_, err = run("ip", append([]string{"netns", "exec", a.Name, "iptables", "-w", "-t", "nat", "-D", chainNAT}, spec...)...)
	}
	n.mu.Unlock()
	if live {
		p.stop()
	}
	return err
}
