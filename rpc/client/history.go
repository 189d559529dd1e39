package client

import (
	"context"
	"fmt"
	"strings"

	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// DialHistory connects to the History service of the leader, which holds
// the newest history. When no leader is known or it does not answer (a
// lost quorum), it connects to the first replica in o.Addrs that serves
// the history instead: its copy may trail the last commits, but it is
// what an operator needs to see what happened before the outage. addr
// is the replica it connected to.
func DialHistory(ctx context.Context, o Options) (hc grapnelpb.HistoryClient, addr string, closeFn func() error, err error) {
	r, err := NewResolver(o)
	if err != nil {
		return nil, "", nil, err
	}
	octx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	var candidates []string
	leader, lerr := r.Leader(octx)
	switch {
	case lerr == nil && r.isLegacy(leader):
		r.Close()
		return nil, "", nil, fmt.Errorf("%w: %s does not offer Grapnel's history service (an Ankaios server?)", ErrRejected, leader)
	case lerr == nil:
		candidates = append(candidates, leader)
	}
	candidates = append(candidates, o.Addrs...)
	tried := []string{}
	for _, a := range candidates {
		if ctx.Err() != nil {
			break
		}
		cc, cerr := r.conn(a)
		if cerr == nil {
			hc := grapnelpb.NewHistoryClient(cc)
			qctx, qcancel := context.WithTimeout(ctx, o.probeTimeout())
			_, cerr = hc.List(qctx, &grapnelpb.HistoryListRequest{Limit: 1})
			qcancel()
			if cerr == nil {
				return hc, a, r.Close, nil
			}
		}
		tried = append(tried, fmt.Sprintf("%s (%s)", a, statusText(cerr)))
	}
	r.Close()
	if ctx.Err() != nil {
		return nil, "", nil, ctx.Err()
	}
	if lerr != nil {
		return nil, "", nil, fmt.Errorf("%w; no replica served the history: tried %s", lerr, strings.Join(tried, ", "))
	}
	return nil, "", nil, fmt.Errorf("%w: no replica served the history: tried %s", ErrNoServer, strings.Join(tried, ", "))
}
