package server

import (
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// fakeFuture is a Raft future the test resolves by hand.
type fakeFuture struct {
	done chan struct{}
	err  error
	resp any
}

func (f *fakeFuture) Error() error  { <-f.done; return f.err }
func (f *fakeFuture) Index() uint64 { return 0 }
func (f *fakeFuture) Response() any { return f.resp }

// fakeRaft hands out one fakeFuture per proposal, in order.
type fakeRaft struct {
	mu      sync.Mutex
	futures []*fakeFuture
	added   chan struct{}
	// batches counts the batch entries among the proposals.
	batches int
}

func (r *fakeRaft) apply(cmd []byte, _ time.Duration) raft.ApplyFuture {
	if cmds, err := fsm.SplitBatch(cmd); err == nil {
		// A batch entry: one future per command for the test to resolve;
		// the entry settles when all have, and a command whose future
		// failed answers with that error, as the FSM refuses a command.
		b := &batchFuture{}
		r.mu.Lock()
		r.batches++
		r.mu.Unlock()
		for _, c := range cmds {
			b.parts = append(b.parts, r.apply(c, 0).(*fakeFuture))
		}
		return b
	}
	f := &fakeFuture{done: make(chan struct{}), resp: string(cmd)}
	r.mu.Lock()
	r.futures = append(r.futures, f)
	r.mu.Unlock()
	r.added <- struct{}{}
	return f
}

// batchFuture is the future of a batch entry in fakeRaft.
type batchFuture struct{ parts []*fakeFuture }

func (b *batchFuture) Error() error {
	for _, p := range b.parts {
		<-p.done
	}
	return nil
}
func (b *batchFuture) Index() uint64 { return 0 }
func (b *batchFuture) Response() any {
	out := make(fsm.BatchResponse, len(b.parts))
	for i, p := range b.parts {
		out[i] = p.resp
		if p.err != nil {
			out[i] = p.err
		}
	}
	return out
}

func (r *fakeRaft) future(t *testing.T, i int) *fakeFuture {
	t.Helper()
	for {
		r.mu.Lock()
		n := len(r.futures)
		r.mu.Unlock()
		if n > i {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.futures[i]
		}
		select {
		case <-r.added:
		case <-time.After(5 * time.Second):
			t.Fatalf("proposal %d never reached Raft", i)
		}
	}
}

// Proposals settle in the order they were made, whatever order Raft
// resolves them in; a local action waits for the proposals before it; a
// failed proposal runs its fail callback.
func TestPipelineSettlesInOrder(t *testing.T) {
	r := &fakeRaft{added: make(chan struct{}, 16)}
	stop := make(chan struct{})
	p := newPipeline(r.apply, time.Second, 0, 0, clock.Real(), nil, stop)
	var got []string
	record := func(name string) func(any, uint64) {
		return func(resp any, _ uint64) { got = append(got, name+"="+resp.(string)) }
	}
	p.ordered(func() { got = append(got, "first local") }) // nothing queued: runs at once
	p.enqueue(fsm.AgentGoneType, []byte("a"), record("a"), nil)
	p.enqueue(fsm.AgentGoneType, []byte("b"), nil, func(err error) { got = append(got, "b failed: "+err.Error()) })
	p.ordered(func() { got = append(got, "local") })
	p.enqueue(fsm.AgentGoneType, []byte("c"), record("c"), nil)
	if len(got) != 1 || p.inFlight != 3 {
		t.Fatalf("before any commit: %v, in flight %d", got, p.inFlight)
	}
	c, b, a := r.future(t, 2), r.future(t, 1), r.future(t, 0)
	b.err = errors.New("boom")
	close(c.done)
	close(b.done)
	close(a.done)
	var observed []fsm.MessageType
	for n := 0; n < 3; {
		select {
		case batch := <-p.done:
			for _, e := range batch {
				p.settle(e, func(t fsm.MessageType, _ time.Duration, _ uint64) { observed = append(observed, t) })
				n++
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no completion")
		}
	}
	want := []string{"first local", "a=a", "b failed: boom", "local", "c=c"}
	if len(got) != len(want) {
		t.Fatalf("settled %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("settled %v, want %v", got, want)
		}
	}
	if len(observed) != 3 || !p.empty() || p.inFlight != 0 {
		t.Fatalf("observed %v, queue %d, in flight %d", observed, len(p.queue), p.inFlight)
	}
	close(stop)
	p.stopAndWait()
}

// At the end of a term every queued proposal is failed, local actions are
// dropped, and the proposer stops even with futures outstanding.
func TestPipelineAbandon(t *testing.T) {
	r := &fakeRaft{added: make(chan struct{}, 16)}
	stop := make(chan struct{})
	p := newPipeline(r.apply, time.Second, 0, 0, clock.Real(), nil, stop)
	var failed []error
	for i := 0; i < 3; i++ {
		p.enqueue(fsm.AgentGoneType, []byte{byte(i)}, func(any, uint64) { t.Error("committed after the end of the term") },
			func(err error) { failed = append(failed, err) })
	}
	p.ordered(func() { t.Error("a local action ran after the end of the term") })
	r.future(t, 2)
	close(stop)
	p.abandon(errLeadershipTest)
	p.stopAndWait()
	if len(failed) != 3 || !errors.Is(failed[0], errLeadershipTest) || !p.empty() || p.full() {
		t.Fatalf("failed %v", failed)
	}
	r.resolveAll()
}

// resolveAll resolves every future so that their waiters end.
func (r *fakeRaft) resolveAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.futures {
		select {
		case <-f.done:
		default:
			close(f.done)
		}
	}
}

var errLeadershipTest = errors.New("leadership lost")

// While maxInFlight proposals are out the pipeline is full.
func TestPipelineBound(t *testing.T) {
	r := &fakeRaft{added: make(chan struct{}, 2*maxInFlight)}
	stop := make(chan struct{})
	p := newPipeline(r.apply, time.Second, 0, 0, clock.Real(), nil, stop)
	defer func() {
		r.future(t, maxInFlight-1)
		close(stop)
		p.stopAndWait()
		r.resolveAll()
	}()
	for i := 0; i < maxInFlight; i++ {
		if p.full() {
			t.Fatalf("full after %d", i)
		}
		p.enqueue(fsm.AgentGoneType, nil, nil, nil)
	}
	if !p.full() {
		t.Fatal("not full at the bound")
	}
	// Batches may hold several proposals and come back in any order;
	// once the batches come back the pipeline takes work again.
	r.future(t, maxInFlight-1)
	r.resolveAll()
	for p.full() {
		select {
		case batch := <-p.done:
			for _, e := range batch {
				p.settle(e, func(fsm.MessageType, time.Duration, uint64) {})
			}
		case <-time.After(5 * time.Second):
			t.Fatal("still full after the commits")
		}
	}
}

// reached reports how many proposals Raft has been handed.
func (r *fakeRaft) reached() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.futures)
}

// settleOne takes one batch off done and settles it.
func settleOne(t *testing.T, p *pipeline) {
	t.Helper()
	select {
	case batch := <-p.done:
		for _, e := range batch {
			p.settle(e, func(fsm.MessageType, time.Duration, uint64) {})
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no completion")
	}
}

// Group commit: a proposal that finds nothing outstanding goes to Raft at
// once; those made while a batch is out wait for it to settle or for the
// delay, then go together; a full batch goes without waiting.
func TestPipelineGroupsProposalsWhileABatchIsOut(t *testing.T) {
	r := &fakeRaft{added: make(chan struct{}, 4*DefaultGroupCommitMaxBatch)}
	stop := make(chan struct{})
	clk := clock.NewFake(time.Unix(1000, 0))
	var sizesMu sync.Mutex
	var sizes []int
	p := newPipeline(r.apply, time.Second, 10*time.Millisecond, 0, clk, func(n int) {
		sizesMu.Lock()
		sizes = append(sizes, n)
		sizesMu.Unlock()
	}, stop)
	defer func() {
		close(stop)
		p.stopAndWait()
		r.resolveAll()
	}()
	// A lone proposal is not delayed.
	p.enqueue(fsm.AgentGoneType, []byte("a"), nil, nil)
	a := r.future(t, 0)
	p.enqueue(fsm.AgentGoneType, []byte("b"), nil, nil)
	p.enqueue(fsm.AgentGoneType, []byte("c"), nil, nil)
	testwait.For(t, 5*time.Second, func() bool { return clk.Pending() > 0 }, "the delay timer")
	if n := r.reached(); n != 1 {
		t.Fatalf("%d proposals reached Raft while the first batch was out, want 1", n)
	}
	// The first batch settles: b and c go together, as one Raft entry.
	close(a.done)
	settleOne(t, p)
	r.future(t, 2)
	r.mu.Lock()
	batches := r.batches
	r.mu.Unlock()
	if batches != 1 {
		t.Fatalf("%d batch entries for b and c, want 1", batches)
	}
	// d waits behind b and c until the delay has passed.
	p.enqueue(fsm.AgentGoneType, []byte("d"), nil, nil)
	testwait.For(t, 5*time.Second, func() bool { return clk.Pending() > 0 }, "the delay timer")
	if n := r.reached(); n != 3 {
		t.Fatalf("%d proposals reached Raft before the delay, want 3", n)
	}
	clk.Advance(10 * time.Millisecond)
	r.future(t, 3)
	// A full batch goes at once, with batches still out.
	for i := 0; i < DefaultGroupCommitMaxBatch; i++ {
		p.enqueue(fsm.AgentGoneType, []byte{byte(fsm.AgentGoneType)}, nil, nil)
	}
	r.future(t, 3+DefaultGroupCommitMaxBatch)
	testwait.For(t, 5*time.Second, func() bool {
		sizesMu.Lock()
		defer sizesMu.Unlock()
		return len(sizes) == 4
	}, "the batch sizes")
	if want := []int{1, 2, 1, DefaultGroupCommitMaxBatch}; !reflect.DeepEqual(sizes, want) {
		t.Fatalf("batch sizes %v, want %v", sizes, want)
	}
}

// With no delay every proposal goes to Raft at once.
func TestPipelineWithoutDelay(t *testing.T) {
	r := &fakeRaft{added: make(chan struct{}, 16)}
	stop := make(chan struct{})
	p := newPipeline(r.apply, time.Second, -1, 0, clock.NewFake(time.Unix(1000, 0)), nil, stop)
	defer func() {
		close(stop)
		p.stopAndWait()
		r.resolveAll()
	}()
	for i := 0; i < 5; i++ {
		p.enqueue(fsm.AgentGoneType, nil, nil, nil)
	}
	r.future(t, 4)
}

// With a most of 1 per batch, every proposal goes to Raft as its own
// entry at once, even while others are out: Raft alone batches.
func TestPipelineMaxBatchOneLeavesBatchingToRaft(t *testing.T) {
	r := &fakeRaft{added: make(chan struct{}, 16)}
	stop := make(chan struct{})
	// A delay the fake clock never reaches: only the most per batch
	// lets the proposals after the first go while it is out.
	p := newPipeline(r.apply, time.Second, 10*time.Millisecond, 1, clock.NewFake(time.Unix(1000, 0)), nil, stop)
	defer func() {
		close(stop)
		p.stopAndWait()
		r.resolveAll()
	}()
	for i := 0; i < 5; i++ {
		p.enqueue(fsm.AgentGoneType, []byte{byte(fsm.AgentGoneType), byte(i)}, nil, nil)
	}
	r.future(t, 4)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.batches != 0 {
		t.Fatalf("%d batch entries, want none", r.batches)
	}
}
