// Command grapnel-server is the replica alone (package servercmd). The
// install is the multi-call binary grapnel with grapnel-server a link to
// it (cmd/grapnel); this command is for `go install` of the one role and
// for scripts that build it by this name.
package main

import (
	"os"

	"github.com/grapnel-io/grapnel/cmd/internal/servercmd"
)

func main() { os.Exit(servercmd.Main(os.Args[1:])) }
