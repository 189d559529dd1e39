package history

import (
	"maps"
	"sort"
	"sync"
	"time"
)

// Recorder collects the operations of many concurrent clients.
type Recorder struct {
	now func() time.Time

	mu sync.Mutex // guards the following fields
	// ops holds every op in Begin order; index = id-1.
	ops []Op
}

// NewRecorder returns an empty recorder using the wall clock (with its
// monotonic reading, so that ops of one process order correctly).
func NewRecorder() *Recorder { return &Recorder{now: time.Now} }

// Begin records the call of an operation and returns its id. The time is
// taken under the lock, so ids and call times increase together.
func (r *Recorder) Begin(client int, kind Kind, key, value string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := int64(len(r.ops)) + 1
	r.ops = append(r.ops, Op{ID: id, Client: client, Kind: kind, Key: key, Value: value, Call: r.now()})
	return id
}

// End records the completion of operation id. read is copied. An unknown
// id or a second End of the same op is ignored: the first answer stands.
func (r *Recorder) End(id int64, outcome Outcome, read map[string]string, replica, err string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id < 1 || id > int64(len(r.ops)) {
		return
	}
	op := &r.ops[id-1]
	if op.Outcome != "" {
		return
	}
	op.Return = r.now()
	op.Outcome = outcome
	op.Read = maps.Clone(read)
	op.Replica = replica
	op.Err = err
}

// Ops returns a copy of the history ordered by call time (then id).
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	out := make([]Op, len(r.ops))
	for i, op := range r.ops {
		op.Read = maps.Clone(op.Read)
		out[i] = op
	}
	r.mu.Unlock()
	Sort(out)
	return out
}

// Sort orders ops by call time, then id.
func Sort(ops []Op) {
	sort.SliceStable(ops, func(i, j int) bool {
		if !ops[i].Call.Equal(ops[j].Call) {
			return ops[i].Call.Before(ops[j].Call)
		}
		return ops[i].ID < ops[j].ID
	})
}
