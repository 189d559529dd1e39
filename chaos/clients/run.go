package clients

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/grapnel-io/grapnel/chaos/history"
	"github.com/grapnel-io/grapnel/rpc/client"
)

// Run runs cfg.Clients clients against the cluster until ctx ends and
// records every operation in rec. It returns once every client has
// recorded the end of its last operation; an error means the Config was
// unusable and nothing ran.
func Run(ctx context.Context, cfg Config, rec *history.Recorder) error {
	if err := cfg.check(); err != nil {
		return err
	}
	if rec == nil {
		return fmt.Errorf("%w: recorder: nil", ErrBadConfig)
	}
	workers := make([]*worker, cfg.Clients)
	for i := range workers {
		id := cfg.FirstID + i
		w := &worker{id: id, cfg: cfg, rec: rec, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(id)))}
		var err error
		if cfg.Direct {
			w.direct, err = newDirect(cfg, cfg.Addrs[i%len(cfg.Addrs)])
		} else {
			w.res, err = client.NewResolver(cfg.options())
		}
		if err != nil {
			for _, w := range workers[:i] {
				w.close()
			}
			return fmt.Errorf("%w: client %d: %w", ErrBadConfig, id, err)
		}
		workers[i] = w
	}
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			defer w.close()
			w.run(ctx)
		})
	}
	wg.Wait()
	return nil
}

// options are those of a long-lived client, as a vehicle application
// or an agent is: with a lookout at a second replica
// (client.Options.Lookout), which names a new leader the moment it is
// elected. Without one, a client whose leader froze learns of it only
// when its heartbeat times out (1 s).
func (c Config) options() client.Options {
	o := client.Options{Addrs: c.Addrs, ResponseTimeout: c.timeout(), Commander: true, Lookout: true}
	if c.TLS != nil {
		o.TLS = *c.TLS
	} else {
		o.Insecure = true
	}
	return o
}
