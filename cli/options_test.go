package cli

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/rpc"
)

func TestParseServerURLs(t *testing.T) {
	// swdd~cli-supports-server-url-cli-argument~1
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"127.0.0.1:25551", []string{"127.0.0.1:25551"}, ""},
		{"https://127.0.0.1:25551", []string{"127.0.0.1:25551"}, ""},
		{"HTTP://a:1/", []string{"a:1"}, ""},
		{"a:1, http://b:2 ,c:3", []string{"a:1", "b:2", "c:3"}, ""},
		{"[::1]:25551", []string{"[::1]:25551"}, ""},
		{"a:1,,", []string{"a:1"}, ""},
		{"", nil, "no server url given"},
		{"localhost", nil, "server url 'localhost' is not of the form host:port"},
		{"a:1,http://b", nil, "server url 'http://b'"},
		{":25551", nil, "not of the form host:port"},
	}
	for _, tt := range tests {
		got, err := ParseServerURLs(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: err = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: got %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestClientOptions(t *testing.T) {
	// swdd~cli-fails-on-missing-file-paths-and-insecure-cli-arguments~1
	// swdd~cli-supports-pem-file-paths-as-cli-arguments~1
	// swdd~cli-supports-cli-argument-for-insecure-communication~1
	base := GlobalOptions{ServerURL: "a:1"}
	tests := []struct {
		name     string
		mod      func(*GlobalOptions)
		insecure bool
		tls      rpc.TLSFiles
		warning  bool
		wantErr  string
	}{
		{name: "neither PEMs nor insecure", mod: func(*GlobalOptions) {}, wantErr: "missing certificate files: pass --ca_pem, --crt_pem and --key_pem"},
		{name: "insecure", mod: func(g *GlobalOptions) { g.Insecure = true }, insecure: true},
		{name: "all PEMs", mod: func(g *GlobalOptions) { g.CAPem, g.CrtPem, g.KeyPem = "ca", "crt", "key" }, tls: rpc.TLSFiles{CA: "ca", Cert: "crt", Key: "key"}},
		{name: "some PEMs", mod: func(g *GlobalOptions) { g.CAPem = "ca" }, wantErr: "--crt_pem, --key_pem not given"},
		{name: "insecure wins over PEMs with a warning", mod: func(g *GlobalOptions) { g.Insecure, g.CAPem = true, "ca" }, insecure: true, warning: true},
		{name: "bad url", mod: func(g *GlobalOptions) { g.Insecure, g.ServerURL = true, "nope" }, wantErr: "host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := base
			tt.mod(&g)
			o, warning, err := g.ClientOptions()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(tt.wantErr, "certificate") && !errors.Is(err, ErrMissingCredentials) {
					t.Fatalf("err = %v, want ErrMissingCredentials", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Insecure != tt.insecure || o.TLS != tt.tls || (warning != "") != tt.warning {
				t.Fatalf("got insecure=%v tls=%+v warning=%q", o.Insecure, o.TLS, warning)
			}
			if !reflect.DeepEqual(o.Addrs, []string{"a:1"}) {
				t.Fatalf("addrs = %v", o.Addrs)
			}
		})
	}
}
