package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrBadConfig means a benchmark setting is out of range.
var ErrBadConfig = errors.New("bad benchmark setting")

// LoadConfig bounds one load run. The measured phase ends after Count
// acknowledged-or-failed operations in total or after Duration, whichever
// comes first.
type LoadConfig struct {
	Clients  int
	Count    int
	Duration time.Duration
	// Warmup is a phase of unmeasured operations before the measurement:
	// connections are up and every client's key or workload exists.
	Warmup time.Duration
}

func (c LoadConfig) check() error {
	switch {
	case c.Clients < 1:
		return fmt.Errorf("%w: clients %d: need at least 1", ErrBadConfig, c.Clients)
	case c.Count < 1:
		return fmt.Errorf("%w: count %d: need at least 1", ErrBadConfig, c.Count)
	case c.Duration <= 0:
		return fmt.Errorf("%w: duration %v: must be positive", ErrBadConfig, c.Duration)
	case c.Warmup < 0:
		return fmt.Errorf("%w: warmup %v: must not be negative", ErrBadConfig, c.Warmup)
	}
	return nil
}

// OpFunc performs operation seq (from 1) of one client and returns once it
// is acknowledged. Calls for one client never overlap; calls for different
// clients do.
type OpFunc func(ctx context.Context, client, seq int) error

// RunLoad runs cfg.Clients closed-loop clients, each calling op in a loop,
// and returns every latency of the measured phase. The first operation of
// each client must succeed (it is the set-up a benchmark cannot do
// without); later failures are counted and the client goes on.
func RunLoad(ctx context.Context, system string, cfg LoadConfig, op OpFunc) (Sample, error) {
	if err := cfg.check(); err != nil {
		return Sample{}, err
	}
	var all atomic.Int64
	counted := func(ctx context.Context, c, seq int) error {
		all.Add(1)
		return op(ctx, c, seq)
	}
	seqs := make([]int, cfg.Clients)
	errc := make(chan error, cfg.Clients)
	var wg sync.WaitGroup
	for c := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seqs[c]++
			if err := counted(ctx, c, seqs[c]); err != nil {
				errc <- fmt.Errorf("%s client %d: first operation: %w", system, c, err)
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return Sample{}, err
	}
	warmEnd := time.Now().Add(cfg.Warmup)
	for c := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(warmEnd) {
				seqs[c]++
				_ = counted(ctx, c, seqs[c])
			}
		}()
	}
	wg.Wait()

	var issued atomic.Int64
	lat := make([][]int64, cfg.Clients)
	fails := make([]int, cfg.Clients)
	first := make([]error, cfg.Clients)
	start := time.Now()
	end := start.Add(cfg.Duration)
	for c := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && issued.Add(1) <= int64(cfg.Count) && time.Now().Before(end) {
				seqs[c]++
				t0 := time.Now()
				if err := counted(ctx, c, seqs[c]); err != nil {
					fails[c]++
					if first[c] == nil {
						first[c] = err
					}
					continue
				}
				lat[c] = append(lat[c], int64(time.Since(t0)))
			}
		}()
	}
	wg.Wait()
	s := Sample{System: system, Clients: cfg.Clients, ElapsedNs: int64(time.Since(start)), LatenciesNs: []int64{}}
	for c := range lat {
		s.LatenciesNs = append(s.LatenciesNs, lat[c]...)
		s.Errors += fails[c]
		if s.FirstError == "" && first[c] != nil {
			s.FirstError = first[c].Error()
		}
	}
	s.Ops = len(s.LatenciesNs)
	s.AllOps = int(all.Load())
	if err := ctx.Err(); err != nil {
		return s, err
	}
	return s, nil
}
