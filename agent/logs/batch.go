package logs

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
)

// truncationNotice ends a message cut to fit a batch, as in Ankaios.
const truncationNotice = " [truncated]"

// entrySize is what an entry adds to a LogEntriesResponse: its tag, its
// length and itself.
func entrySize(e *ankbase.LogEntry) int {
	n := proto.Size(e)
	return 1 + protowire.SizeVarint(uint64(n)) + n
}

// truncate cuts an entry too large for a batch so that it and the notice
// entry that follows it fit in one batch of limit bytes.
//
// swdd~agent-checks-size-of-logs~1
func truncate(e *ankbase.LogEntry, limit int) []*ankbase.LogEntry {
	info := &ankbase.LogEntry{
		WorkloadName: e.GetWorkloadName(),
		Message:      fmt.Sprintf("The previous message was truncated due to exceeding the maximum %s size.", sizeText(limit)),
	}
	budget := limit - entrySize(info)
	nameField := 0
	if e.GetWorkloadName() != nil {
		n := proto.Size(e.GetWorkloadName())
		nameField = 1 + protowire.SizeVarint(uint64(n)) + n
	}
	// size is the entry size for a message of m bytes.
	size := func(m int) int {
		inner := nameField
		if m > 0 {
			inner += 1 + protowire.SizeVarint(uint64(m)) + m
		}
		return 1 + protowire.SizeVarint(uint64(inner)) + inner
	}
	m := budget - nameField
	for m > 0 && size(m) > budget {
		m--
	}
	msg := e.GetMessage()
	keep := min(max(m-len(truncationNotice), 0), len(msg))
	for keep > 0 && keep < len(msg) && !utf8.RuneStart(msg[keep]) {
		keep--
	}
	cut := &ankbase.LogEntry{WorkloadName: e.GetWorkloadName(), Message: msg[:keep] + truncationNotice}
	return []*ankbase.LogEntry{cut, info}
}

// sizeText says a batch limit the way Ankaios does ("2 MB").
func sizeText(n int) string {
	if n > 0 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
