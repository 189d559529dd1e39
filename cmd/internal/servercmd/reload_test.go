package servercmd

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/rpctest"
)

// Requirement (issue 17, point 1): SIGHUP re-reads the certificates
// without a restart; a reload that fails keeps the ones in use.
func TestSIGHUPReloadsCertificates(t *testing.T) {
	ca := rpctest.NewCA(t)
	files := ca.IssueIdentity(t, "r1", identity.Replica, "r1", identity.ServerSAN)
	certs, err := rpc.NewTLSStore(files)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var logged syncbuf.Buffer
	done := reloadOnHangup(ctx, config{}, certs, nil, slog.New(slog.NewTextHandler(&logged, nil)))
	defer func() { cancel(); <-done }()
	hup := func() {
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	hup()
	testwait.For(t, 5*time.Second, func() bool { return certs.Current().Generation == 2 }, "SIGHUP reloaded the certificates")
	if err := os.Chmod(files.Key, 0o644); err != nil {
		t.Fatal(err)
	}
	hup()
	testwait.For(t, 5*time.Second, func() bool { return strings.Contains(logged.String(), "certificate reload failed") },
		"the failed reload logged")
	if !strings.Contains(logged.String(), files.Key) {
		t.Fatalf("the failed reload's log does not name %s:\n%s", files.Key, logged.String())
	}
	if g := certs.Current().Generation; g != 2 {
		t.Fatalf("a reload of a key with loose permissions replaced the certificates (generation %d)", g)
	}
	if err := os.Chmod(files.Key, 0o600); err != nil {
		t.Fatal(err)
	}
	hup()
	testwait.For(t, 5*time.Second, func() bool { return certs.Current().Generation == 3 }, "SIGHUP reloaded the certificates again")
}
