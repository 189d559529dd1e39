package netns

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
)

// Sentinel errors; every returned error wraps one of them.
var (
	ErrConfig      = errors.New("netns: invalid config")
	ErrCommand     = errors.New("netns: command failed")
	ErrUnsafeRoute = errors.New("netns: unsafe route")
	ErrSubnetInUse = errors.New("netns: subnet already in use")
	ErrHost        = errors.New("netns: invalid host")
	ErrClosed      = errors.New("netns: network closed")
)

// Defaults for the zero Config fields.
const (
	DefaultPrefix = "gch"
	DefaultSubnet = "10.213.7.0/24"
	// MaxHosts keeps host addresses (.11 upwards) below the client's .100
	// (and its alias .101, Net.ClientAlias).
	MaxHosts = 89
)

// Address offsets inside the subnet.
const (
	bridgeOffset = 1
	hostOffset   = 10 // host i (1-based) gets .10+i
	clientOffset = 100
)

// Config describes the test network.
type Config struct {
	Prefix string // names of everything created start with it; default DefaultPrefix
	Hosts  int    // number of host namespaces, 1..MaxHosts
	Subnet string // RFC 1918 IPv4 network of at least /25; default DefaultSubnet
}

// prefixRE keeps names short (Linux interface names have at most 15
// bytes) and free of characters ip or iptables would read differently.
var prefixRE = regexp.MustCompile(`^[a-z][a-z0-9]{1,7}$`)

// private are the RFC 1918 ranges.
var private = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
}

// plan is a validated Config with every name and address worked out.
type plan struct {
	prefix  string
	subnet  netip.Prefix
	bridge  netip.Addr
	hosts   []netip.Addr
	client  netip.Addr
	nHosts  int
	comment string // marks the root FORWARD rule as ours
}

func validPrefix(prefix string) error {
	if !prefixRE.MatchString(prefix) {
		return fmt.Errorf("%w: Prefix %q: want 2 to 8 lowercase letters or digits starting with a letter", ErrConfig, prefix)
	}
	return nil
}

func (c Config) plan() (plan, error) {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Subnet == "" {
		c.Subnet = DefaultSubnet
	}
	if err := validPrefix(c.Prefix); err != nil {
		return plan{}, err
	}
	if c.Hosts < 1 || c.Hosts > MaxHosts {
		return plan{}, fmt.Errorf("%w: Hosts %d: want 1 to %d", ErrConfig, c.Hosts, MaxHosts)
	}
	subnet, err := parseSubnet(c.Subnet)
	if err != nil {
		return plan{}, err
	}
	p := plan{
		prefix:  c.Prefix,
		subnet:  subnet,
		bridge:  offset(subnet, bridgeOffset),
		client:  offset(subnet, clientOffset),
		nHosts:  c.Hosts,
		comment: c.Prefix + "-chaos",
	}
	for i := 1; i <= c.Hosts; i++ {
		p.hosts = append(p.hosts, offset(subnet, hostOffset+i))
	}
	return p, nil
}

func parseSubnet(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%w: Subnet %q: %v", ErrConfig, s, err)
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%w: Subnet %q: not IPv4", ErrConfig, s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%w: Subnet %q: host bits set, want %s", ErrConfig, s, p.Masked())
	}
	if p.Bits() > 25 {
		return netip.Prefix{}, fmt.Errorf("%w: Subnet %q: too small, want /25 or larger for the .100 client", ErrConfig, s)
	}
	for _, r := range private {
		if p.Bits() >= r.Bits() && r.Contains(p.Addr()) {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("%w: Subnet %q: not inside an RFC 1918 range (10/8, 172.16/12, 192.168/16)", ErrConfig, s)
}

// offset is the address n above the subnet's network address.
func offset(p netip.Prefix, n int) netip.Addr {
	b := p.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Names of what Setup creates. Host i is 1-based; the client uses "cl".
func bridgeName(prefix string) string       { return prefix + "br0" }
func nsName(prefix, suffix string) string   { return prefix + "-" + suffix }
func vethName(prefix, suffix string) string { return prefix + "-v" + suffix }
func peerName(prefix, suffix string) string { return prefix + "-p" + suffix }
func hostSuffix(i int) string               { return "h" + strconv.Itoa(i) }

// vethSuffix drops the "h" of a host suffix so veth names stay short.
func vethSuffix(suffix string) string {
	if suffix[0] == 'h' {
		return suffix[1:]
	}
	return suffix
}

// leftoverRE matches exactly the names Setup creates under prefix; a
// looser "starts with" match could take an unrelated interface with it.
func leftoverRE(prefix string) *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `(br0|-cl|-h[0-9]+|-[vp]([0-9]+|cl))$`)
}
