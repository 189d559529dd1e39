// Package testwait is how tests wait for something to happen: For polls a
// condition until it holds and fails the test once a bound has passed;
// Holds polls a condition for a while and fails the test as soon as it
// stops holding (a "nothing happens" check: no second leader, no restart);
// Until is For for a goroutine that may not fail the test (a fake
// server's). Bounds are generous (the machine is shared and tests run
// with -race): they catch hangs, not slowness. Tests wait on events this
// way, never with a bare sleep (scripts/check-clock.sh).
//
// It is a leaf package, so that every package's tests, and test-support
// packages such as cluster/clustertest, may import it. Non-test code must
// not.
package testwait

import (
	"fmt"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// poll is the wait between two looks at the condition.
const poll = 5 * time.Millisecond

// For polls cond until it holds. If bound passes first it fails t with
// "timed out after <bound> waiting for <what>", what formatted from format
// and args at that moment (wrap a description that must be taken late in
// Lazy).
func For(t testing.TB, bound time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	wall := clock.Real() // tests wait in real time, whatever clock the code under test runs on
	deadline := wall.Now().Add(bound)
	for !cond() {
		if wall.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", bound, fmt.Sprintf(format, args...))
		}
		clock.Sleep(wall, poll)
	}
}

// Until polls cond until it holds, or until bound passes, and says
// which. It fails no test: it is For for goroutines other than the
// test's (a fake server's), which may not stop it; the test then checks
// what came of the wait.
func Until(bound time.Duration, cond func() bool) bool {
	wall := clock.Real()
	deadline := wall.Now().Add(bound)
	for !cond() {
		if wall.Now().After(deadline) {
			return false
		}
		clock.Sleep(wall, poll)
	}
	return true
}

// Holds polls cond for d and fails t as soon as it is false, with "<what>
// stopped holding after <elapsed>", what formatted from format and args.
// It is the one wait in tests whose length is the point: it asserts that
// something stays true, or that something does not happen, for d.
func Holds(t testing.TB, d time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	wall := clock.Real()
	start := wall.Now()
	for {
		if !cond() {
			t.Fatalf("%s stopped holding after %v", fmt.Sprintf(format, args...), clock.Since(wall, start).Round(time.Millisecond))
			return
		}
		if clock.Since(wall, start) >= d {
			return
		}
		clock.Sleep(wall, poll)
	}
}

// Lazy is a description computed when it is printed: as an argument of
// For, when the wait fails.
type Lazy func() string

// String calls the function.
func (l Lazy) String() string { return l() }
