package client

import (
	"context"
	"fmt"

	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// DialHistory connects to the History service of the leader, which holds
// the newest history (a follower's may trail it by a few entries).
func DialHistory(ctx context.Context, o Options) (grapnelpb.HistoryClient, string, func() error, error) {
	r, err := NewResolver(o)
	if err != nil {
		return nil, "", nil, err
	}
	octx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	addr, err := r.Leader(octx)
	if err == nil && r.isLegacy(addr) {
		err = fmt.Errorf("%w: %s does not offer Grapnel's history service (an Ankaios server?)", ErrRejected, addr)
	}
	if err != nil {
		r.Close()
		if ctx.Err() != nil {
			return nil, "", nil, ctx.Err()
		}
		return nil, "", nil, err
	}
	cc, err := r.conn(addr)
	if err != nil {
		r.Close()
		return nil, "", nil, err
	}
	return grapnelpb.NewHistoryClient(cc), addr, r.Close, nil
}
