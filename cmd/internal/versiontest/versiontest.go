// Package versiontest checks a program's --version output against the
// formats of this build (internal/formats) and the types fsm knows, for
// the programs' tests. It links fsm, which grapnel-agent must not, so it
// is imported by tests only.
package versiontest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/buildinfo"
	"github.com/grapnel-io/grapnel/internal/formats"
)

// VersionOK checks a --version output: the version line of program as
// before, then the formats (internal/formats) with a line for every Raft
// entry type and snapshot record type fsm knows.
func VersionOK(program, out string) error {
	line := regexp.MustCompile(`^` + program + ` ` + regexp.QuoteMeta(buildinfo.Version) + ` \(ankaios protocol v1\.0, commit [^ )]+\)\n`)
	if !line.MatchString(out) {
		return fmt.Errorf("no version line")
	}
	if !strings.HasSuffix(out, "\n"+formats.Text()) {
		return fmt.Errorf("the formats do not follow the version line")
	}
	for _, typ := range fsm.MessageTypes() {
		if !regexp.MustCompile(`(?m)^ +` + strconv.Itoa(int(typ)) + ` ` + typ.String() + `( |$)`).MatchString(out) {
			return fmt.Errorf("no line for entry type %d %s", typ, typ)
		}
	}
	for _, typ := range fsm.AllSnapshotTypes {
		if !regexp.MustCompile(`(?m)^ +` + strconv.Itoa(int(typ)) + ` ` + typ.String() + `$`).MatchString(out) {
			return fmt.Errorf("no line for snapshot record type %d %s", typ, typ)
		}
	}
	if !strings.Contains(out, "grpc_api.AgentHello.grapnelRelease = 1002") {
		return fmt.Errorf("the wire additions lack the agent's release")
	}
	return nil
}
