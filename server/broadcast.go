package server

import (
	"encoding/binary"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// pendingBroadcast is the workload states one committed entry sends to
// every stream but except.
type pendingBroadcast struct {
	except string
	states []state.WorkloadState
	index  uint64
}

// broadcastStates sends the workload states committed at index to every
// CLI stream and to every agent but the one named that was greeted before
// the entry (a later hello already showed them). While a burst of entries
// settles, the broadcasts are collected and sent together by
// flushBroadcasts: with 16 clients updating, one message per stream per
// burst instead of one per entry.
//
// swdd~server-forwards-workload-state~1
func (l *leader) broadcastStates(except string, ws []state.WorkloadState, index uint64) {
	b := pendingBroadcast{except: except, states: ws, index: index}
	if l.holdBroadcasts {
		l.bcast = append(l.bcast, b)
		return
	}
	l.sendBroadcasts([]pendingBroadcast{b})
}

// flushBroadcasts sends what a settled burst collected.
func (l *leader) flushBroadcasts() {
	if len(l.bcast) == 0 {
		return
	}
	bs := l.bcast
	l.bcast = nil
	l.sendBroadcasts(bs)
}

// sendBroadcasts gives each stream the states of the broadcasts meant for
// it, in commit order, as one UpdateWorkloadState. Streams that get the
// same broadcasts share one message, marshalled once; the states are
// gathered only for the first of them, so that a commit costs the loop
// its states once plus a little per stream, not its states per stream.
func (l *leader) sendBroadcasts(bs []pendingBroadcast) {
	type built struct {
		msg *grpcapi.FromServer
		enc *rpc.Encoded // nil if it does not encode
	}
	cache := map[string]built{}
	var key []byte
	for _, c := range l.s.conns.broadcastTargets("") {
		key = key[:0]
		n := 0
		g := l.greeted[c.name]
		for i, b := range bs {
			if c.name == b.except || c.kind == wire.KindAgent && (g.conn != c || g.index >= b.index) {
				continue
			}
			key = binary.AppendUvarint(key, uint64(i))
			n += len(b.states)
		}
		if n == 0 {
			continue
		}
		m, ok := cache[string(key)]
		if !ok {
			ws := make([]state.WorkloadState, 0, n)
			for _, i := range decodeKey(key) {
				ws = append(ws, bs[i].states...)
			}
			m.msg = &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_UpdateWorkloadState{
				UpdateWorkloadState: &grpcapi.UpdateWorkloadState{WorkloadStates: rpc.WorkloadStatesToProto(ws)}}}
			if enc, err := rpc.Encode(m.msg); err == nil {
				m.enc = enc
			}
			cache[string(key)] = m
		}
		if m.enc == nil || m.enc.Len() > c.limit {
			// The stream's sender cuts it to size; the streams share
			// the message, which nothing changes once it is queued.
			c.send(m.msg)
			continue
		}
		c.sendEncoded(m.enc)
	}
}

// decodeKey lists the broadcast positions a key of sendBroadcasts names.
func decodeKey(key []byte) []int {
	var out []int
	for len(key) > 0 {
		i, n := binary.Uvarint(key)
		out = append(out, int(i))
		key = key[n:]
	}
	return out
}
