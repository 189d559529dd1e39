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
// same broadcasts share one message, marshalled once.
func (l *leader) sendBroadcasts(bs []pendingBroadcast) {
	encoded := map[string]*rpc.Encoded{}
	for _, c := range l.s.conns.broadcastTargets("") {
		var (
			key []byte
			ws  []state.WorkloadState
		)
		g := l.greeted[c.name]
		for i, b := range bs {
			if c.name == b.except || c.kind == wire.KindAgent && (g.conn != c || g.index >= b.index) {
				continue
			}
			key = binary.AppendUvarint(key, uint64(i))
			ws = append(ws, b.states...)
		}
		if len(ws) == 0 {
			continue
		}
		enc, ok := encoded[string(key)]
		if !ok {
			msg := &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_UpdateWorkloadState{
				UpdateWorkloadState: &grpcapi.UpdateWorkloadState{WorkloadStates: rpc.WorkloadStatesToProto(ws)}}}
			var err error
			if enc, err = rpc.Encode(msg); err != nil || enc.Len() > c.limit {
				c.send(msg) // the stream's sender cuts it to size
				continue
			}
			encoded[string(key)] = enc
		}
		c.sendEncoded(enc)
	}
}
