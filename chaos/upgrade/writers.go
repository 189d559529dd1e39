package upgrade

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/grapnel-io/grapnel/chaos/clients"
	"github.com/grapnel-io/grapnel/chaos/history"
	"github.com/grapnel-io/grapnel/rpc"
)

// Writers of a step: leader-aware clients (as the grapnel CLI and SDKs
// are) and one Ankaios client per replica that stays there, so a
// follower proxies it to the leader. They write, delete and read the same
// keys, so the history checks linearizability across both paths.
const (
	leaderAwareClients = 4
	leaderAwareRate    = 20 // operations per second per client
	directRate         = 10
	burstClients       = 8
	// RouteLeaderAware and RouteBurst name the routes in the report.
	RouteLeaderAware = "leader-aware"
	RouteBurst       = "burst"
)

// writers run the chaos clients step after step into one history; each
// run gets its own client ids, so every written value stays unique.
type writers struct {
	keys []string
	addr []string // replica gRPC addresses, in replica order
	name []string // replica names
	tls  *rpc.TLSFiles
	seed int64
	rec  *history.Recorder

	mu   sync.Mutex
	via  map[int]string
	next int
}

func newWriters(keys, addrs, names []string, tls *rpc.TLSFiles, seed int64) *writers {
	return &writers{keys: keys, addr: addrs, name: names, tls: tls, seed: seed, rec: history.NewRecorder(), via: map[int]string{}}
}

// route is the route of client id ("" if unknown).
func (w *writers) route(id int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.via[id]
}

// routes are every route in report order.
func (w *writers) routes() []string {
	out := []string{RouteLeaderAware}
	for _, n := range w.name {
		out = append(out, "via "+n)
	}
	return append(out, RouteBurst)
}

// ids reserves n client ids for route via (or one route per id when
// perID is set) and returns the first.
func (w *writers) ids(n int, via func(i int) string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	first := w.next
	for i := range n {
		w.via[first+i] = via(i)
	}
	w.next += n
	return first
}

func (w *writers) config(n int, rate float64, first int) clients.Config {
	return clients.Config{Addrs: w.addr, Clients: n, Keys: w.keys, ReadShare: 0.3, DeleteShare: 0.1,
		Timeout: 2 * time.Second, Seed: w.seed, Rate: rate, TLS: w.tls, FirstID: first}
}

// start runs the step's writers until the returned stop is called; stop
// waits until every client has recorded its last operation and returns
// what kept the clients from running (a bad configuration), if anything.
func (w *writers) start(ctx context.Context) (stop func() error) {
	ctx, cancel := context.WithCancel(ctx)
	la := w.config(leaderAwareClients, leaderAwareRate, w.ids(leaderAwareClients, func(int) string { return RouteLeaderAware }))
	direct := w.config(len(w.addr), directRate, w.ids(len(w.addr), func(i int) string { return "via " + w.name[i] }))
	direct.Direct = true
	var wg sync.WaitGroup
	var errs [2]error
	for k, c := range []clients.Config{la, direct} {
		wg.Go(func() { errs[k] = clients.Run(ctx, c, w.rec) })
	}
	return func() error {
		cancel()
		wg.Wait()
		return errors.Join(errs[:]...)
	}
}

// burst runs burstClients leader-aware clients at full speed until done
// says enough or bound passes; it returns whether done said so.
func (w *writers) burst(ctx context.Context, bound time.Duration, done func() (bool, string)) (bool, string, error) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	c := w.config(burstClients, 0, w.ids(burstClients, func(int) string { return RouteBurst }))
	c.ReadShare, c.DeleteShare = 0, 0.1
	bctx, bcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var runErr error
	wg.Go(func() { runErr = clients.Run(bctx, c, w.rec) })
	defer func() { bcancel(); wg.Wait() }()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	why := "not checked"
	for {
		var ok bool
		if ok, why = done(); ok {
			return true, why, nil
		}
		select {
		case <-ctx.Done():
			return false, fmt.Sprintf("after %v: %s", bound, why), runErr
		case <-tick.C:
		}
	}
}
