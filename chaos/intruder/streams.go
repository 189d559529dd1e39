package intruder

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/grapnel-io/grapnel/rpc/wire"
)

// helloMargin is how long past --hello-timeout a stream without hello
// may stay open before the attempt counts as accepted: the replica's
// timer starts when it takes the stream, a little after it was opened.
const helloMargin = 1500 * time.Millisecond

// streamEnd is how one stream ended: after how long, and why.
type streamEnd struct {
	after time.Duration
	err   error
}

// streamAttempts open, with the wrong-role agent certificate, more agent
// streams than --max-streams-per-agent on the leader and never say
// hello (issue 27, hole 7): those over the cap must be refused with
// TOO_MANY_STREAMS at once, and each held one must end at
// --hello-timeout. The leader only: a follower proxies each stream it
// holds to the leader, where it counts again.
func streamAttempts(ctx context.Context, c Config) []Attempt {
	capN, hello := c.Bounds.StreamsPerAgent, c.Bounds.HelloTimeout
	over := Attempt{Target: c.Leader, Channel: "streams", What: "agent streams past --max-streams-per-agent, with one agent certificate"}
	held := Attempt{Target: c.Leader, Channel: "streams", What: WhatNoHello}
	if capN <= 0 || hello <= 0 {
		over.Skipped, held.Skipped = "no cap or hello timeout configured", "no cap or hello timeout configured"
		return []Attempt{over, held}
	}
	t, _ := c.target(c.Leader)
	cc, err := dial(t.GRPC, c.WrongRole)
	if err != nil {
		over.Accepted, over.Detail = true, "could not try: "+err.Error()
		held.Accepted, held.Detail = true, over.Detail
		return []Attempt{over, held}
	}
	defer cc.Close()
	n := capN + 2
	ends := make([]streamEnd, n)
	var wg sync.WaitGroup
	from := time.Now()
	for i := range n {
		// Opened one after the other, so that the replica counts them
		// in this order; each is read until it ends.
		sctx, cancel := context.WithTimeout(ctx, hello+helloMargin)
		start := time.Now()
		st, err := wire.KindAgent.Open(sctx, cc)
		if err != nil {
			cancel()
			ends[i] = streamEnd{after: time.Since(start), err: err}
			continue
		}
		wg.Go(func() {
			defer cancel()
			_, err := st.Recv()
			ends[i] = streamEnd{after: time.Since(start), err: err}
		})
	}
	wg.Wait()
	held.Window = &Window{From: from, To: time.Now()}
	var refused, noHello, other int
	var refusedMsg, helloMsg, otherMsg string
	var heldMin, heldMax time.Duration
	for _, e := range ends {
		switch {
		case refusedWith(e.err, codes.ResourceExhausted) && reason(e.err) == "TOO_MANY_STREAMS":
			refused++
			refusedMsg = errText(e.err)
		case refusedWith(e.err, codes.InvalidArgument) && strings.Contains(e.err.Error(), "no AgentHello within"):
			if noHello == 0 || e.after < heldMin {
				heldMin = e.after
			}
			heldMax = max(heldMax, e.after)
			noHello++
			helloMsg = errText(e.err)
		default:
			other++
			otherMsg = fmt.Sprintf("after %v: %s", e.after.Round(time.Millisecond), errText(e.err))
		}
	}
	over.Accepted = refused != n-capN
	over.Detail = fmt.Sprintf("%d streams opened, %d refused (cap %d): %s", n, refused, capN, refusedMsg)
	held.Accepted = noHello != capN || heldMax > hello+helloMargin
	held.Detail = fmt.Sprintf("%d of %d held streams ended after %v–%v (--hello-timeout %v): %s", noHello, capN,
		heldMin.Round(time.Millisecond), heldMax.Round(time.Millisecond), hello, helloMsg)
	if other > 0 {
		msg := fmt.Sprintf("; %d ended otherwise, e.g. %s", other, otherMsg)
		over.Detail += msg
		held.Detail += msg
	}
	return []Attempt{over, held}
}
