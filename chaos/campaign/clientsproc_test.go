package campaign

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestClientsArgsRoundTrip(t *testing.T) {
	c := ClientsConfig{Addrs: []string{"10.0.0.1:1", "10.0.0.2:1"}, Keys: []string{"k0", "k1"},
		Clients: 4, Duration: 90 * time.Second, Seed: 9, Rate: 12.5, Out: "/tmp/h.json"}
	got, err := ParseClientsArgs(c.Args())
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("got %+v, %v; want %+v", got, err, c)
	}
}

func TestClientsArgsRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no addrs", []string{"--keys", "k"}},
		{"no keys", []string{"--addrs", "a:1"}},
		{"zero duration", []string{"--addrs", "a:1", "--keys", "k", "--duration", "0s"}},
		{"negative rate", []string{"--addrs", "a:1", "--keys", "k", "--rate", "-1"}},
		{"unknown flag", []string{"--addrs", "a:1", "--keys", "k", "--bogus"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseClientsArgs(tc.args); !errors.Is(err, ErrConfig) {
				t.Fatalf("got %v, want ErrConfig", err)
			}
		})
	}
}

func TestConfigDefaultsAndErrors(t *testing.T) {
	bins := map[string]string{"grapnel-server": "s", "grapnel-agent": "a"}
	c, err := Config{Dir: "d", Bins: bins, Self: "x", Short: true}.withDefaults()
	if err != nil || c.Clients != DefaultClients || c.Grace != DefaultGrace || c.ComparisonKills != ShortComparisonKills {
		t.Fatalf("short defaults: %+v, %v", c, err)
	}
	c, err = Config{Dir: "d", Bins: bins, Self: "x", Duration: time.Minute}.withDefaults()
	if err != nil || c.ComparisonKills != LongComparisonKills {
		t.Fatalf("long defaults: %+v, %v", c, err)
	}
	for _, bad := range []Config{
		{Bins: bins, Self: "x", Short: true},
		{Dir: "d", Self: "x", Short: true},
		{Dir: "d", Bins: bins, Short: true},
		{Dir: "d", Bins: bins, Self: "x"},
	} {
		if _, err := bad.withDefaults(); !errors.Is(err, ErrConfig) {
			t.Fatalf("%+v: got %v, want ErrConfig", bad, err)
		}
	}
}
