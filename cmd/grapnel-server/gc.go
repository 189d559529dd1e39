package main

import (
	"log/slog"
	"runtime/debug"
)

// defaultGCPercent lets the heap grow to five times its live data between
// collections instead of Go's twice. A replica's live heap is small (the
// desired state and the leader's queues: a few MiB), so this costs tens
// of MiB, and under a steady stream of updates it saved about a tenth of
// the CPU per update (docs/replication.md, "Where the time goes").
const defaultGCPercent = 400

// setGC applies the GC target unless the GOGC variable is set: Go has
// already read it, and an operator who sets it means it.
func setGC(percent int, lookup func(string) (string, bool), log *slog.Logger) {
	if v, ok := lookup("GOGC"); ok {
		log.Info("GOGC is set; --gc-percent is not applied", "GOGC", v)
		return
	}
	debug.SetGCPercent(percent)
}
