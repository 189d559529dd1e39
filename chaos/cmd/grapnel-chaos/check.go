package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/grapnel-io/grapnel/chaos/check"
	"github.com/grapnel-io/grapnel/chaos/history"
)

// checkCmd checks a saved history again, e.g. after a fix of the checker
// or when a run was interrupted before its checks: linearizability, with
// the visualization written next to the history on a failure.
func checkCmd(args []string) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	path := fs.String("history", "", "history.json of a run (required)")
	timeout := fs.Duration("timeout", 10*time.Minute, "bound of the linearizability check")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" {
		fmt.Fprintln(os.Stderr, "check: --history is required")
		return 2
	}
	ops, err := history.Load(*path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "check:", err)
		return 2
	}
	start := time.Now()
	res := check.Linearizable(ops, filepath.Dir(*path), *timeout)
	verdict := "pass"
	if !res.OK {
		verdict = "FAIL"
	}
	fmt.Printf("%s %s: %s (%d ops, %v)\n", verdict, res.Name, res.Detail, len(ops), time.Since(start).Round(time.Millisecond))
	for _, op := range res.Window {
		fmt.Println("  ", op.String())
	}
	if !res.OK {
		return 1
	}
	return 0
}
