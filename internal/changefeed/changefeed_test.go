package changefeed

import "testing"

func TestSignalsCoalesceAndEndWithTheSubscription(t *testing.T) {
	f := New()
	f.Notify() // nobody listens: nothing to do, nothing blocks
	ch, cancel := f.Subscribe()
	other, cancelOther := f.Subscribe()
	defer cancelOther()
	for range 3 {
		f.Notify()
	}
	select {
	case <-ch:
	default:
		t.Fatal("no signal after Notify")
	}
	select {
	case <-ch:
		t.Fatal("three notifies gave more than one pending signal")
	default:
	}
	if f.Subscribers() != 2 {
		t.Fatalf("%d subscribers, want 2", f.Subscribers())
	}
	cancel()
	f.Notify()
	select {
	case <-ch:
		t.Fatal("a cancelled subscription was signalled")
	default:
	}
	select {
	case <-other:
	default:
		t.Fatal("the other subscriber missed the signal")
	}
}
