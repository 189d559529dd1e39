package campaign

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/chaos/clients"
	"github.com/grapnel-io/grapnel/chaos/history"
	"github.com/grapnel-io/grapnel/rpc"
)

// ClientsConfig is what the `grapnel-chaos clients` process runs: the
// chaos clients inside the client namespace, writing their history to Out
// when they end (Duration passed or the process was interrupted).
type ClientsConfig struct {
	Addrs    []string
	Keys     []string
	Clients  int
	Duration time.Duration
	Seed     int64
	// Rate is the most operations per second of one client; it keeps
	// the history small enough to check in seconds.
	Rate float64
	Out  string
	// TLS is the clients' certificate; nil connects insecure.
	TLS *rpc.TLSFiles
}

// Args is the command line ParseClientsArgs reads back.
func (c ClientsConfig) Args() []string {
	args := []string{"--addrs", strings.Join(c.Addrs, ","), "--keys", strings.Join(c.Keys, ","),
		"--clients", fmt.Sprint(c.Clients), "--duration", c.Duration.String(),
		"--seed", fmt.Sprint(c.Seed), "--rate", fmt.Sprint(c.Rate), "--out", c.Out}
	if c.TLS != nil {
		args = append(args, "--ca", c.TLS.CA, "--cert", c.TLS.Cert, "--key", c.TLS.Key)
	}
	return args
}

// ParseClientsArgs reads the flags of `grapnel-chaos clients`.
func ParseClientsArgs(args []string) (ClientsConfig, error) {
	fs := flag.NewFlagSet("clients", flag.ContinueOnError)
	addrs := fs.String("addrs", "", "replica gRPC addresses, comma-separated")
	keys := fs.String("keys", "", "workload names the clients write, comma-separated")
	var c ClientsConfig
	fs.IntVar(&c.Clients, "clients", 8, "concurrent clients")
	fs.DurationVar(&c.Duration, "duration", time.Minute, "longest run; an interrupt ends it earlier")
	fs.Int64Var(&c.Seed, "seed", 1, "seed of the operation mix")
	fs.Float64Var(&c.Rate, "rate", DefaultRate, "most operations per second of one client; 0 is unlimited")
	fs.StringVar(&c.Out, "out", "history.json", "history file written at the end")
	var tlsFiles rpc.TLSFiles
	fs.StringVar(&tlsFiles.CA, "ca", "", "CA certificate (PEM); with --cert and --key, mutual TLS")
	fs.StringVar(&tlsFiles.Cert, "cert", "", "client certificate (PEM)")
	fs.StringVar(&tlsFiles.Key, "key", "", "client key (PEM)")
	if err := fs.Parse(args); err != nil {
		return c, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if !tlsFiles.Empty() {
		c.TLS = &tlsFiles
	}
	c.Addrs, c.Keys = splitList(*addrs), splitList(*keys)
	switch {
	case len(c.Addrs) == 0:
		return c, fmt.Errorf("%w: --addrs: no address given", ErrConfig)
	case len(c.Keys) == 0:
		return c, fmt.Errorf("%w: --keys: no key given", ErrConfig)
	case c.Rate < 0:
		return c, fmt.Errorf("%w: --rate %v: must not be negative", ErrConfig, c.Rate)
	case c.Duration <= 0:
		return c, fmt.Errorf("%w: --duration %v: must be positive", ErrConfig, c.Duration)
	}
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// RunClients runs the clients until Duration passes or ctx ends, then
// saves the history. Keys are written without an agent (NotScheduled), so
// the writes never disturb the agents' workloads.
func RunClients(ctx context.Context, c ClientsConfig) error {
	ctx, cancel := context.WithTimeout(ctx, c.Duration)
	defer cancel()
	rec := history.NewRecorder()
	err := clients.Run(ctx, clients.Config{
		Addrs: c.Addrs, Clients: c.Clients, Keys: c.Keys,
		ReadShare: 0.3, DeleteShare: 0.1, Seed: c.Seed, Rate: c.Rate, Timeout: 2 * time.Second, TLS: c.TLS,
	}, rec)
	return errors.Join(err, rec.Save(c.Out))
}
