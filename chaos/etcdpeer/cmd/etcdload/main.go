// Command etcdload drives puts against an etcd cluster the way the Grapnel
// benchmark drives UpdateState against Grapnel: a number of closed-loop
// clients, each with its own connection, each rewriting its own key with a
// value of fixed size, bounded in count and in time. It prints one JSON
// object on stdout with every latency, so that one piece of code
// (chaos/bench) turns both systems' samples into figures.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// sample is the wire form chaos/bench reads (its Sample type has the same
// JSON fields).
type sample struct {
	System      string  `json:"system"`
	Clients     int     `json:"clients"`
	Ops         int     `json:"ops"`
	Errors      int     `json:"errors"`
	FirstError  string  `json:"firstError,omitempty"`
	ElapsedNs   int64   `json:"elapsedNs"`
	LatenciesNs []int64 `json:"latenciesNs"`
	// AllOps counts every put, the warm-up's included.
	AllOps int `json:"allOps"`
}

type options struct {
	endpoints []string
	clients   int
	count     int
	duration  time.Duration
	warmup    time.Duration
	payload   int
	timeout   time.Duration
}

var errUsage = errors.New("usage")

func parse(args []string) (options, error) {
	fs := flag.NewFlagSet("etcdload", flag.ContinueOnError)
	eps := fs.String("endpoints", "", "comma-separated client URLs of the members (required)")
	var o options
	fs.IntVar(&o.clients, "clients", 1, "concurrent clients, each with its own connection")
	fs.IntVar(&o.count, "count", 100000, "stop after this many measured puts in total")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "stop after this long")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured puts before the measurement")
	fs.IntVar(&o.payload, "payload", 256, "value size in bytes")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Second, "bound of one put")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for _, e := range strings.Split(*eps, ",") {
		if e = strings.TrimSpace(e); e != "" {
			o.endpoints = append(o.endpoints, e)
		}
	}
	switch {
	case len(o.endpoints) == 0:
		return o, fmt.Errorf("%w: --endpoints: no endpoint given", errUsage)
	case o.clients < 1:
		return o, fmt.Errorf("%w: --clients %d: need at least 1", errUsage, o.clients)
	case o.count < 1:
		return o, fmt.Errorf("%w: --count %d: need at least 1", errUsage, o.count)
	case o.duration <= 0:
		return o, fmt.Errorf("%w: --duration %v: must be positive", errUsage, o.duration)
	case o.payload < 16:
		return o, fmt.Errorf("%w: --payload %d: need at least 16 bytes", errUsage, o.payload)
	}
	return o, nil
}

func main() {
	o, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcdload: %v\n", err)
		os.Exit(2)
	}
	s, err := run(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcdload: %v\n", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(s); err != nil {
		fmt.Fprintf(os.Stderr, "etcdload: %v\n", err)
		os.Exit(1)
	}
}

// value is a payload of exactly n bytes that differs per put.
func value(n, client, seq int) string {
	head := fmt.Sprintf("c%d-s%d-", client, seq)
	if len(head) >= n {
		return head[:n]
	}
	return head + strings.Repeat("x", n-len(head))
}

func run(o options) (sample, error) {
	conns := make([]*clientv3.Client, o.clients)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range conns {
		c, err := clientv3.New(clientv3.Config{Endpoints: o.endpoints, DialTimeout: 5 * time.Second})
		if err != nil {
			return sample{}, fmt.Errorf("client %d: %w", i, err)
		}
		conns[i] = c
	}
	var all atomic.Int64
	put := func(i, seq int) error {
		all.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
		defer cancel()
		_, err := conns[i].Put(ctx, fmt.Sprintf("bench/c%03d", i), value(o.payload, i, seq))
		return err
	}
	// Warm-up: every client's connection is up and the leader has seen
	// each key once before anything is measured.
	warmEnd := time.Now().Add(o.warmup)
	for i := range conns {
		if err := put(i, 0); err != nil {
			return sample{}, fmt.Errorf("warm-up put of client %d: %w", i, err)
		}
	}
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 1; time.Now().Before(warmEnd); seq++ {
				_ = put(i, seq)
			}
		}()
	}
	wg.Wait()

	var issued atomic.Int64
	lat := make([][]int64, o.clients)
	errs := make([]int, o.clients)
	firstErr := make([]error, o.clients)
	start := time.Now()
	end := start.Add(o.duration)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 1; issued.Add(1) <= int64(o.count) && time.Now().Before(end); seq++ {
				t0 := time.Now()
				if err := put(i, seq); err != nil {
					errs[i]++
					if firstErr[i] == nil {
						firstErr[i] = err
					}
					continue
				}
				lat[i] = append(lat[i], int64(time.Since(t0)))
			}
		}()
	}
	wg.Wait()
	s := sample{System: "etcd", Clients: o.clients, ElapsedNs: int64(time.Since(start)), LatenciesNs: []int64{}}
	for i := range lat {
		s.LatenciesNs = append(s.LatenciesNs, lat[i]...)
		s.Errors += errs[i]
		if s.FirstError == "" && firstErr[i] != nil {
			s.FirstError = firstErr[i].Error()
		}
	}
	s.Ops = len(s.LatenciesNs)
	s.AllOps = int(all.Load())
	return s, nil
}
