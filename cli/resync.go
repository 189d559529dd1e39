package cli

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// resyncPoll is how often ResyncAgent reads the history while it waits.
const resyncPoll = 200 * time.Millisecond

// ResyncAgent asks an agent, through the leader, for a drift repair round
// now (`grapnel agent resync NAME`). With a history client and a wait, it
// then reads the history for wait and prints the repairs the agent
// recorded after the request (Repair transactions, requester NAME). The
// agent reports no end of its round, and a round that finds nothing
// reports nothing (docs/history.md), so wait bounds it: a repair
// recorded later shows in `grapnel history` only.
func (c *Cluster) ResyncAgent(ctx context.Context, agent string, hist grapnelpb.HistoryClient, wait time.Duration) error {
	if !state.ValidName(agent) {
		return fmt.Errorf("%w: agent name %q uses only [a-zA-Z0-9_-]", ErrBadArgument, agent)
	}
	var last uint64
	if hist != nil && wait > 0 {
		resp, err := hist.List(ctx, &grapnelpb.HistoryListRequest{Since: math.MaxUint64, Limit: 1})
		if err != nil {
			return err
		}
		last = resp.GetLastSeq()
	}
	if _, err := c.Client.ResyncAgent(ctx, &grapnelpb.ResyncAgentRequest{Agent: agent}); err != nil {
		return err
	}
	c.info("asked agent %s for a drift repair round", agent)
	if hist == nil || wait <= 0 {
		return nil
	}
	repairs, err := c.repairsAfter(ctx, hist, agent, last, wait)
	if err != nil {
		return err
	}
	if len(repairs) == 0 {
		fmt.Fprintf(c.Out, "agent %s recorded no repair within %v: its round found no drift, or is not done yet (grapnel history --since %d)\n", agent, wait, last)
		return nil
	}
	fmt.Fprintf(c.Out, "agent %s recorded %d repair(s) within %v:\n", agent, len(repairs), wait)
	h := &History{}
	t := Table{Headers: []string{"TXN", "TIME", "REPAIR"}}
	for _, tx := range repairs {
		t.Rows = append(t.Rows, []string{strconv.FormatUint(tx.GetSeq(), 10), h.time(tx.GetTimeMs()), summary(tx)})
	}
	_, err = fmt.Fprintln(c.Out, t.Render(0, FitNone, -1))
	return err
}

// repairsAfter reads the history after seq until wait has passed and
// returns the agent's repairs in it.
func (c *Cluster) repairsAfter(ctx context.Context, hist grapnelpb.HistoryClient, agent string, seq uint64, wait time.Duration) ([]*grapnelpb.Transaction, error) {
	var out []*grapnelpb.Transaction
	deadline := c.clock().Now().Add(wait)
	for {
		for range maxHistoryPages {
			resp, err := hist.List(ctx, &grapnelpb.HistoryListRequest{Since: seq})
			if err != nil {
				return nil, err
			}
			page := resp.GetTransactions()
			for _, tx := range page {
				if tx.GetKind() == string(state.TxRepair) && tx.GetRequester() == agent {
					out = append(out, tx)
				}
			}
			if len(page) == 0 {
				break
			}
			seq = page[len(page)-1].GetSeq()
			if seq >= resp.GetLastSeq() {
				break
			}
		}
		left := clock.Until(c.clock(), deadline)
		if left <= 0 {
			return out, nil
		}
		t := clock.NewTimer(c.clock(), min(left, resyncPoll))
		select {
		case <-ctx.Done():
			t.Stop()
			return out, nil
		case <-t.C:
		}
	}
}
