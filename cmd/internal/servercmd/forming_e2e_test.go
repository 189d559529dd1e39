package servercmd

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// Issue 31 point 4: a replica that waits for --bootstrap-expect says why
// in its log ("waiting for 2 more replicas (seen: f1)"), and the CLI says
// the cluster is still forming instead of "knows no leader".
func TestFormingClusterSaysWhyItWaits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs grapnel-server and grapnel")
	}
	bins := e2eBuild(t, "grapnel-server", "grapnel")
	ports, err := bench.FreeAddrs(3)
	if err != nil {
		t.Fatal(err)
	}
	_, _, out := runServer(t, bins["grapnel-server"], nil, "-k", "--name", "f1", "-a", ports[0], "--raft-address", ports[1],
		"--gossip-address", ports[2], "--bootstrap-expect", "3", "--data-dir", filepath.Join(t.TempDir(), "data"), "--log-level", "info")
	testwait.For(t, 20*time.Second, func() bool {
		return strings.Contains(out.String(), "waiting for 2 more replicas (seen: f1)")
	}, "the server's log says what it waits for")
	var msg []byte
	testwait.For(t, 20*time.Second, func() bool {
		msg, _ = exec.Command(bins["grapnel"], "-k", "--server-url", ports[0], "--response-timeout", "300", "get", "state").CombinedOutput()
		return strings.Contains(string(msg), "the cluster is still forming (1 of 3 replicas)")
	}, "the CLI says the cluster is still forming")
	if strings.Contains(string(msg), "knows no leader") {
		t.Fatalf("CLI: %s", msg)
	}
}
