package clock

import (
	"testing"
	"time"
)

func TestNextSlot(t *testing.T) {
	base := time.Date(2026, 11, 26, 12, 0, 7, 0, time.UTC)
	ms := time.Millisecond
	twelfth := time.Second / 12
	tests := []struct {
		name     string
		now      time.Time
		interval time.Duration
		want     time.Time
	}{
		{"250 ms from a whole second", base, 250 * ms, base.Add(250 * ms)},
		{"250 ms within a slot", base.Add(260 * ms), 250 * ms, base.Add(500 * ms)},
		{"250 ms at the end of a second", base.Add(999 * ms), 250 * ms, base.Add(time.Second)},
		{"a twelfth meets 250 ms within a nanosecond", base.Add(170 * ms), twelfth, base.Add(3 * twelfth)},
		{"a twelfth's last slot ends at the second", base.Add(920 * ms), twelfth, base.Add(time.Second)},
		{"75 ms cut short at the second", base.Add(980 * ms), 75 * ms, base.Add(time.Second)},
		{"one second", base.Add(400 * ms), time.Second, base.Add(time.Second)},
		{"five seconds from the zero time", base.Add(400 * ms), 5 * time.Second, base.Add(3 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NextSlot(tt.now, tt.interval)
			if d := got.Sub(tt.want); d < -time.Nanosecond || d > time.Nanosecond {
				t.Fatalf("NextSlot(%v, %v) = %v, want %v", tt.now.Format(time.StampNano), tt.interval, got.Format(time.StampNano), tt.want.Format(time.StampNano))
			}
			if !got.After(tt.now) {
				t.Fatalf("NextSlot(%v) is not after now", tt.now)
			}
		})
	}
}
