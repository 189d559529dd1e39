package server

import (
	"context"
	"fmt"
	"sort"

	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// maxHistoryPage is the most transactions one List answers; a reader
// pages on with since. A thousand transactions of a few hundred bytes
// stay far below the message limit.
const maxHistoryPage = 1000

// historyService answers Grapnel's History service from this replica's
// FSM: any replica answers, the leader with the newest history, a
// follower with what it has applied (eventually consistent). It reads
// under the FSM's read lock and copies out; the records are immutable.
type historyService struct {
	grapnelpb.UnimplementedHistoryServer
	fsm *fsm.FSM
	id  string
}

// registerHistory adds the History service; RegisterCluster calls it, so
// that every replica serving the Cluster service serves the history too.
func (s *Server) registerHistory(g grpc.ServiceRegistrar) {
	grapnelpb.RegisterHistoryServer(g, &historyService{fsm: s.fsm, id: s.node.ID()})
}

// List returns the transactions after since, oldest first.
func (h *historyService) List(_ context.Context, req *grapnelpb.HistoryListRequest) (*grapnelpb.HistoryListResponse, error) {
	limit := int(req.GetLimit())
	if limit <= 0 || limit > maxHistoryPage {
		limit = maxHistoryPage
	}
	resp := &grapnelpb.HistoryListResponse{ReplicaId: h.id}
	h.fsm.Read(func(st *state.Store, applied uint64) {
		resp.AppliedIndex = applied
		if st.History == nil {
			return
		}
		resp.LastSeq = st.History.LastSeq
		if len(st.History.Txs) > 0 {
			resp.OldestSeq = st.History.Txs[0].Seq
		}
		for _, tx := range st.History.Since(req.GetSince(), req.GetWorkload(), limit) {
			resp.Transactions = append(resp.Transactions, txToProto(tx))
		}
	})
	return resp, nil
}

// Get returns one transaction.
func (h *historyService) Get(_ context.Context, req *grapnelpb.HistoryGetRequest) (*grapnelpb.Transaction, error) {
	var (
		out    *grapnelpb.Transaction
		oldest uint64
	)
	h.fsm.Read(func(st *state.Store, _ uint64) {
		if st.History == nil {
			return
		}
		if tx, ok := st.History.Get(req.GetSeq()); ok {
			out = txToProto(tx)
		} else if len(st.History.Txs) > 0 {
			oldest = st.History.Txs[0].Seq
		}
	})
	if out == nil {
		if oldest > req.GetSeq() {
			return nil, fmt.Errorf("%w: %d was pruned (the oldest kept is %d)", errs.ErrNoSuchTransaction, req.GetSeq(), oldest)
		}
		return nil, fmt.Errorf("%w: %d", errs.ErrNoSuchTransaction, req.GetSeq())
	}
	return out, nil
}

// Timeline merges a workload's transactions and its instances'
// transitions by Raft index; within one entry the transaction comes
// first (it set the state the transitions start from).
func (h *historyService) Timeline(_ context.Context, req *grapnelpb.TimelineRequest) (*grapnelpb.TimelineResponse, error) {
	name := req.GetWorkload()
	if name == "" {
		return nil, fmt.Errorf("%w: workload: a name is required", state.ErrInvalid)
	}
	resp := &grapnelpb.TimelineResponse{ReplicaId: h.id}
	h.fsm.Read(func(st *state.Store, _ uint64) {
		if st.History == nil {
			return
		}
		resp.Events = timeline(st.History, name)
	})
	return resp, nil
}

// timeline is the events of one workload, oldest first.
func timeline(hist *state.History, name string) []*grapnelpb.TimelineEvent {
	var out []*grapnelpb.TimelineEvent
	for _, tx := range hist.Since(0, name, 0) {
		for _, w := range tx.Workloads {
			if w.Name != name {
				continue
			}
			ev := &grapnelpb.TimelineEvent{TimeMs: tx.TimeMs, Index: tx.Index, Seq: tx.Seq, Kind: string(tx.Kind), Op: string(w.Op),
				Requester: tx.Requester, Instance: w.Instance, Reason: tx.Reason}
			if ev.Instance == "" {
				ev.Instance = w.OldInstance
			}
			if in, err := state.ParseInstanceName(ev.Instance); err == nil {
				ev.Agent = in.AgentName
			}
			for _, c := range w.Changes {
				ev.Fields = append(ev.Fields, c.Field)
			}
			if len(w.States) > 0 {
				ev.State = w.States[0]
			}
			out = append(out, ev)
		}
	}
	for _, t := range hist.TransitionsOf(name) {
		out = append(out, &grapnelpb.TimelineEvent{TimeMs: t.TimeMs, Index: t.Index, Kind: "State", Instance: t.Instance.String(),
			Agent: t.Instance.AgentName, State: t.State.String()})
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Index != b.Index {
			return a.Index < b.Index
		}
		return a.Seq != 0 && b.Seq == 0
	})
	return out
}

// txToProto is a transaction on the wire.
func txToProto(tx *state.Tx) *grapnelpb.Transaction {
	p := &grapnelpb.Transaction{Seq: tx.Seq, Index: tx.Index, TimeMs: tx.TimeMs, Kind: string(tx.Kind), Requester: tx.Requester,
		UpdateMask: tx.UpdateMask, Reason: tx.Reason, Count: tx.Count, ApiVersion: tx.APIVersion}
	for _, w := range tx.Workloads {
		pw := &grapnelpb.TxWorkload{Name: w.Name, Op: string(w.Op), Instance: w.Instance, OldInstance: w.OldInstance, States: w.States}
		for _, c := range w.Changes {
			pw.Changes = append(pw.Changes, &grapnelpb.TxFieldChange{Field: c.Field, Old: c.Old, New: c.New})
		}
		p.Workloads = append(p.Workloads, pw)
	}
	for _, c := range tx.Configs {
		p.Configs = append(p.Configs, &grapnelpb.TxConfig{Key: c.Key, Op: string(c.Op)})
	}
	return p
}

// WorkloadTimeline is a workload's timeline as the History service's
// Timeline gives it, for the dashboard (server/ui), which reads the store
// itself.
func WorkloadTimeline(hist *state.History, name string) []*grapnelpb.TimelineEvent {
	return timeline(hist, name)
}
