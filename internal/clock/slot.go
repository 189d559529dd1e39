package clock

import "time"

// NextSlot is the first instant after now at which a slot of length
// interval begins. Slots count from the start of each second of the wall
// clock (from the zero time for an interval of a second or more), so
// timers that wait for their next slot fire at the same instants wherever
// their slots meet: 83 ms, 250 ms and 1 s slots all begin at every whole
// second, and every third 83 ms slot begins with a 250 ms one (within
// nanoseconds). An idle process whose periodic work is aligned this way
// wakes once for all of it instead of once for each timer. Within a
// second, the last slot of an interval that does not divide it is cut
// short at the next whole second. It is never now itself, so a timer
// armed at the start of a slot waits for the next one.
func NextSlot(now time.Time, interval time.Duration) time.Time {
	if interval <= 0 {
		return now
	}
	if interval >= time.Second {
		return now.Truncate(interval).Add(interval)
	}
	sec := now.Truncate(time.Second)
	next := sec.Add((now.Sub(sec)/interval + 1) * interval)
	// A slot that would begin within a microsecond of the next second
	// (rounding: twelve 83333333 ns slots) begins with it.
	if end := sec.Add(time.Second); end.Sub(next) < time.Microsecond {
		return end
	}
	return next
}

// UntilSlot is the time from now to NextSlot(now, interval).
func UntilSlot(now time.Time, interval time.Duration) time.Duration {
	return NextSlot(now, interval).Sub(now)
}
