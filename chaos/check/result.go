package check

import "github.com/grapnel-io/grapnel/chaos/history"

// Result is the verdict of one checker.
type Result struct {
	Name     string
	OK       bool
	Detail   string       // what was checked, or what went wrong, readable
	Window   []history.Op // the smallest run of ops that shows the failure
	Artifact string       // a file written for the failure (porcupine's HTML)
}
