package cli

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/client"
)

// DefaultServerURL is where the CLI looks for a server unless told.
const DefaultServerURL = "127.0.0.1:25551"

// ErrMissingCredentials is returned when neither PEM files nor insecure
// mode are given: the CLI never falls back to plain text on its own.
var ErrMissingCredentials = errors.New("missing certificate files")

// GlobalOptions are the options every command shares.
type GlobalOptions struct {
	// ServerURL is a comma-separated list of replica addresses.
	ServerURL string
	Insecure  bool
	CAPem     string
	CrtPem    string
	KeyPem    string
	// The PEM contents an Ankaios CLI config file may give instead of
	// the files (ca_pem_content, ...); a path wins over its content.
	CAPemContent    string
	CrtPemContent   string
	KeyPemContent   string
	ResponseTimeout time.Duration
	NoWait          bool
	Verbose         bool
	Quiet           bool
	// Owner is the lock owner this client declares (docs/locks.md); a
	// client certificate's name takes precedence on the server.
	Owner string
}

// ParseServerURLs splits a comma-separated address list. Each entry may
// carry an http:// or https:// prefix, as ank's --server-url does, and a
// trailing slash; what remains must be host:port.
// swdd~cli-supports-server-url-cli-argument~1
func ParseServerURLs(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		a := strings.TrimSpace(part)
		if a == "" {
			continue
		}
		orig := a
		for _, p := range []string{"https://", "http://"} {
			if len(a) >= len(p) && strings.EqualFold(a[:len(p)], p) {
				a = a[len(p):]
				break
			}
		}
		a = strings.TrimSuffix(a, "/")
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("server url '%s' is not of the form host:port", orig)
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, errors.New("no server url given")
	}
	return out, nil
}

// LooksLikeServerAddress reports whether s reads as a server list for
// -s: every entry host:port (as ParseServerURLs takes them), the host a
// name or an IP address and the port a number from 1 to 65535 without a
// leading zero. Neither an execution state ("running") nor an RFC 3339
// time ("2026-01-01T10:00:00+01:00") does.
func LooksLikeServerAddress(s string) bool {
	addrs, err := ParseServerURLs(s)
	if err != nil {
		return false
	}
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return false
		}
		if net.ParseIP(host) == nil && !isHostName(host) {
			return false
		}
	}
	return true
}

// isHostName reports whether h is a DNS name: labels of letters, digits
// and inner hyphens, not all digits.
func isHostName(h string) bool {
	if len(h) > 253 {
		return false
	}
	letter := false
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			switch {
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
				letter = true
			case r >= '0' && r <= '9', r == '-':
			default:
				return false
			}
		}
	}
	return letter
}

// ClientOptions checks the options and turns them into connection
// options. Without --insecure all three PEM files are needed. Both at once
// is a conflict the user should hear about; insecure wins, as in ank. The
// warning is empty when there is nothing to say.
// swdd~cli-fails-on-missing-file-paths-and-insecure-cli-arguments~1
// swdd~cli-supports-pem-file-paths-as-cli-arguments~1
// swdd~cli-supports-cli-argument-for-insecure-communication~1
func (g GlobalOptions) ClientOptions() (client.Options, string, error) {
	addrs, err := ParseServerURLs(g.ServerURL)
	if err != nil {
		return client.Options{}, "", err
	}
	o := client.Options{Addrs: addrs, ResponseTimeout: g.ResponseTimeout, Owner: g.Owner}
	anyPem := g.CAPem != "" || g.CrtPem != "" || g.KeyPem != "" || g.CAPemContent != "" || g.CrtPemContent != "" || g.KeyPemContent != ""
	if g.Insecure {
		o.Insecure = true
		if anyPem {
			return o, "--insecure is set, so the PEM files are not used", nil
		}
		return o, "", nil
	}
	var missing []string
	for _, p := range []struct{ flag, val, content string }{
		{"--ca_pem", g.CAPem, g.CAPemContent}, {"--crt_pem", g.CrtPem, g.CrtPemContent}, {"--key_pem", g.KeyPem, g.KeyPemContent},
	} {
		if p.val == "" && p.content == "" {
			missing = append(missing, p.flag)
		}
	}
	if len(missing) > 0 {
		if !anyPem {
			return o, "", fmt.Errorf("%w: pass --ca_pem, --crt_pem and --key_pem (or set GRAPNEL_CA_PEM, GRAPNEL_CRT_PEM, GRAPNEL_KEY_PEM) for mutual TLS, or --insecure (-k) to connect without TLS", ErrMissingCredentials)
		}
		return o, "", fmt.Errorf("%w: %s not given", ErrMissingCredentials, strings.Join(missing, ", "))
	}
	o.TLS = rpc.TLSFiles{CA: g.CAPem, Cert: g.CrtPem, Key: g.KeyPem,
		CAPEM: g.CAPemContent, CertPEM: g.CrtPemContent, KeyPEM: g.KeyPemContent}
	return o, "", nil
}
