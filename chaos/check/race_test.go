//go:build race

package check

// raceEnabled: the race detector slows the checker about twentyfold.
const raceEnabled = true
