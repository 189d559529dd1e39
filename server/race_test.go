//go:build race

package server

// raceEnabled: the race detector slows the planner's randomized tests
// about twentyfold (TestPlanPredictsApply: 2 s without it, 41 to 77 s
// with it on two cores), so they run fewer rounds under make test and
// all of them without the detector (make chaos).
const raceEnabled = true
