package intruder

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// Bounds of the flood's judgement.
const (
	// acceptWindow is how soon after it was opened a connection over
	// the cap must be closed (or half the handshake deadline, if less):
	// the replica closes it when it accepts it, before reading anything.
	acceptWindow = time.Second
	// deadlineMargin is how long past --grpc-handshake-timeout a held
	// connection may stay open before the attempt counts as accepted.
	deadlineMargin = 2 * time.Second
)

// floodConn is one connection of the flood: how long it stayed open,
// and whether it was still open when the intruder stopped waiting.
type floodConn struct {
	open      time.Duration
	stillOpen bool
	dialErr   error
}

// floodAttempts open twice --grpc-max-conns-per-source idle TCP
// connections from FloodSource to the leader's gRPC port and send
// nothing (issue 27, hole 4): those over the cap must be closed as soon
// as they are accepted, the held ones at --grpc-handshake-timeout. The
// campaign checks that the cluster committed meanwhile (Window).
func floodAttempts(ctx context.Context, c Config) []Attempt {
	capN, hs := c.Bounds.ConnsPerSource, c.Bounds.HandshakeTimeout
	over := Attempt{Target: c.Leader, Channel: "connections", What: WhatFlood}
	held := Attempt{Target: c.Leader, Channel: "connections", What: WhatHeld}
	if capN <= 0 || hs <= 0 {
		over.Skipped, held.Skipped = "no cap or handshake timeout configured", "no cap or handshake timeout configured"
		return []Attempt{over, held}
	}
	t, _ := c.target(c.Leader)
	d := net.Dialer{Timeout: attemptTimeout}
	if c.FloodSource != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(c.FloodSource)}
	}
	conns := flood(ctx, d, t.GRPC, 2*capN, hs+deadlineMargin)
	over.Window = &Window{From: conns.from, To: conns.to}
	held.Window = over.Window
	over.Accepted, over.Detail, held.Accepted, held.Detail = judgeFlood(conns.conns, capN, hs)
	src := c.FloodSource
	if src == "" {
		src = "the intruder's address"
	}
	over.Detail = fmt.Sprintf("from %s: %s", src, over.Detail)
	return []Attempt{over, held}
}

// floodResult is every connection of a flood and when it ran.
type floodResult struct {
	conns    []floodConn
	from, to time.Time
}

// flood opens n connections to addr one after the other and waits on
// each, at most wait, until the peer closes it.
func flood(ctx context.Context, d net.Dialer, addr string, n int, wait time.Duration) floodResult {
	res := floodResult{conns: make([]floodConn, n), from: time.Now()}
	var wg sync.WaitGroup
	for i := range n {
		start := time.Now()
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			res.conns[i] = floodConn{dialErr: err}
			continue
		}
		wg.Go(func() {
			defer conn.Close()
			_ = conn.SetReadDeadline(start.Add(wait))
			var b [1]byte
			_, err := conn.Read(b[:])
			res.conns[i] = floodConn{open: time.Since(start), stillOpen: errors.Is(err, os.ErrDeadlineExceeded)}
		})
	}
	wg.Wait()
	res.to = time.Now()
	return res
}

// judgeFlood says whether more than capN connections were held (not
// closed within the accept window), and whether any stayed open past hs
// and the margin.
func judgeFlood(conns []floodConn, capN int, hs time.Duration) (overAccepted bool, overDetail string, heldAccepted bool, heldDetail string) {
	window := min(acceptWindow, hs/2)
	var atAccept, heldN, stillOpen, dialFailed int
	var acceptMax, heldMin, heldMax time.Duration
	var dialErr error
	for _, fc := range conns {
		switch {
		case fc.dialErr != nil:
			dialFailed++
			dialErr = fc.dialErr
		case fc.stillOpen:
			stillOpen++
		case fc.open <= window:
			atAccept++
			acceptMax = max(acceptMax, fc.open)
		default:
			if heldN == 0 || fc.open < heldMin {
				heldMin = fc.open
			}
			heldMax = max(heldMax, fc.open)
			heldN++
		}
	}
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	overAccepted = heldN+stillOpen > capN
	overDetail = fmt.Sprintf("%d connections (cap %d): %d closed at accept (within %v), %d held", len(conns), capN, atAccept, r(acceptMax), heldN+stillOpen)
	if dialFailed > 0 {
		overDetail += fmt.Sprintf(", %d not connected (%v)", dialFailed, dialErr)
	}
	heldAccepted = stillOpen > 0 || heldN == 0
	heldDetail = fmt.Sprintf("%d held connections closed %v–%v after they opened (--grpc-handshake-timeout %v), %d open after %v",
		heldN, r(heldMin), r(heldMax), hs, stillOpen, hs+deadlineMargin)
	return overAccepted, overDetail, heldAccepted, heldDetail
}
