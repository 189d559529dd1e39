package netns

import (
	"errors"
	"strings"
	"testing"
)

func TestConfigRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // the field and reason the error must name
	}{
		{"prefix chars", Config{Prefix: "Bad!", Hosts: 1}, "Prefix"},
		{"prefix long", Config{Prefix: "abcdefghi", Hosts: 1}, "Prefix"},
		{"prefix digit", Config{Prefix: "1ab", Hosts: 1}, "Prefix"},
		{"no hosts", Config{Hosts: 0}, "Hosts 0"},
		{"too many hosts", Config{Hosts: MaxHosts + 1}, "Hosts"},
		{"public subnet", Config{Hosts: 1, Subnet: "8.8.8.0/24"}, "RFC 1918"},
		{"doc subnet", Config{Hosts: 1, Subnet: "192.0.2.0/24"}, "RFC 1918"},
		{"wider than private", Config{Hosts: 1, Subnet: "172.0.0.0/8"}, "RFC 1918"},
		{"host bits", Config{Hosts: 1, Subnet: "10.1.2.5/24"}, "host bits"},
		{"too small", Config{Hosts: 1, Subnet: "10.1.2.0/26"}, "too small"},
		{"ipv6", Config{Hosts: 1, Subnet: "fd00::/64"}, "not IPv4"},
		{"garbage", Config{Hosts: 1, Subnet: "ten"}, "Subnet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cfg.plan()
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %q, want it to name %q", err, tt.want)
			}
		})
	}
}

func TestConfigPlan(t *testing.T) {
	tests := []struct {
		cfg                    Config
		bridge, first, last, c string
	}{
		{Config{Hosts: 3}, "10.213.7.1", "10.213.7.11", "10.213.7.13", "10.213.7.100"},
		{Config{Hosts: MaxHosts, Subnet: "192.168.4.0/25"}, "192.168.4.1", "192.168.4.11", "192.168.4.99", "192.168.4.100"},
		{Config{Hosts: 1, Subnet: "172.20.0.0/16"}, "172.20.0.1", "172.20.0.11", "172.20.0.11", "172.20.0.100"},
	}
	for _, tt := range tests {
		p, err := tt.cfg.plan()
		if err != nil {
			t.Fatalf("%+v: %v", tt.cfg, err)
		}
		got := []string{p.bridge.String(), p.hosts[0].String(), p.hosts[len(p.hosts)-1].String(), p.client.String()}
		want := []string{tt.bridge, tt.first, tt.last, tt.c}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%+v: addresses %v, want %v", tt.cfg, got, want)
		}
		if p.prefix != DefaultPrefix {
			t.Errorf("prefix %q, want default %q", p.prefix, DefaultPrefix)
		}
	}
}

func TestLeftoverPatternIsExact(t *testing.T) {
	re := leftoverRE("gch")
	for _, name := range []string{"gchbr0", "gch-h1", "gch-h12", "gch-cl", "gch-v3", "gch-p3", "gch-vcl", "gch-pcl"} {
		if !re.MatchString(name) {
			t.Errorf("%q should be cleaned", name)
		}
	}
	for _, name := range []string{"gch", "gchbr1", "gch-h", "gch-x1", "gchx-h1", "gch-h1x", "eth0", "agch-h1", "gch-v1@if2"} {
		if re.MatchString(name) {
			t.Errorf("%q must not be cleaned", name)
		}
	}
	// Every name Setup creates must be matched, or Close would leak it.
	for _, s := range []string{hostSuffix(1), hostSuffix(89), "cl"} {
		for _, name := range []string{nsName("gch", s), vethName("gch", vethSuffix(s)), peerName("gch", vethSuffix(s)), bridgeName("gch")} {
			if len(name) > 15 && !strings.HasPrefix(name, "gch-h") {
				t.Errorf("%q longer than an interface name may be", name)
			}
			if !re.MatchString(name) {
				t.Errorf("created name %q not matched", name)
			}
		}
	}
}

func TestDropFlowRules(t *testing.T) {
	a := &Host{Name: "x-h1", Addr: "10.0.0.11"}
	b := &Host{Name: "x-h2", Addr: "10.0.0.12"}
	tests := []struct {
		percent int
		want    []string
	}{
		{100, []string{
			"x-h2 " + chainIn + " -s 10.0.0.11 -j DROP",
			"x-h2 " + chainIn + " ! -s 10.0.0.11 -m conntrack --ctorigdst 10.0.0.11 --ctdir REPLY -j DROP",
			"x-h1 " + chainOut + " ! -d 10.0.0.12 -m conntrack --ctorigdst 10.0.0.12 --ctdir ORIGINAL -j DROP",
		}},
		{30, []string{
			"x-h2 " + chainIn + " -s 10.0.0.11 -m statistic --mode random --probability 0.30 -j DROP",
			"x-h2 " + chainIn + " ! -s 10.0.0.11 -m conntrack --ctorigdst 10.0.0.11 --ctdir REPLY -m statistic --mode random --probability 0.30 -j DROP",
			"x-h1 " + chainOut + " ! -d 10.0.0.12 -m conntrack --ctorigdst 10.0.0.12 --ctdir ORIGINAL -m statistic --mode random --probability 0.30 -j DROP",
		}},
	}
	for _, tt := range tests {
		rules := dropFlow(a, b, probability(tt.percent))
		if len(rules) != len(tt.want) {
			t.Fatalf("%d%%: %d rules, want %d", tt.percent, len(rules), len(tt.want))
		}
		for i, r := range rules {
			got := r.host.Name + " " + r.chain + " " + strings.Join(r.spec, " ")
			if got != tt.want[i] {
				t.Errorf("%d%% rule %d:\n got %s\nwant %s", tt.percent, i, got, tt.want[i])
			}
		}
	}
}

func TestForwardRuleIsOursOnlyByComment(t *testing.T) {
	tests := []struct {
		line string
		want bool
	}{
		{"-A FORWARD -i gchbr0 -o gchbr0 -m comment --comment gch-chaos -j ACCEPT", true},
		{`-A FORWARD -i gchbr0 -o gchbr0 -m comment --comment "gch-chaos" -j ACCEPT`, true},
		{"-A FORWARD -m comment --comment gch-chaosx -j ACCEPT", false},
		{"-A FORWARD -m comment --comment other -j NETAVARK_FORWARD", false},
		{"-A FORWARD -i gchbr0 -j ACCEPT", false},
	}
	for _, tt := range tests {
		if got := hasComment(strings.Fields(tt.line), "gch-chaos"); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.line, got, tt.want)
		}
	}
}
