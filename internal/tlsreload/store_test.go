package tlsreload_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/internal/tlsreload"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/rpctest"
)

// echoServer answers each line with the line, over TLS from the store.
func echoServer(t *testing.T, s *tlsreload.Store) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", s.ServerConfig(tls.VersionTLS13, nil))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func echo(t *testing.T, c *tls.Conn) {
	t.Helper()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Fatalf("echo: %q, %v", line, err)
	}
}

// presented is the identity the server showed on c.
func presented(t *testing.T, c *tls.Conn) string {
	t.Helper()
	id, err := identity.FromCert(c.ConnectionState().PeerCertificates[0], identity.None)
	if err != nil {
		t.Fatal(err)
	}
	return id.Name
}

func copyFile(t *testing.T, from, to string, perm os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	// Written aside and renamed over, as rotation tools do.
	tmp := to + ".new"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, to); err != nil {
		t.Fatal(err)
	}
}

// Requirement (issue 17, point 1): certificates are re-read on change
// without a restart; a new connection presents the new certificate, an
// open one keeps working until closed; a reload that fails keeps the old
// certificate and names the file.
func TestRotationOnFileChange(t *testing.T) {
	ca := rpctest.NewCA(t)
	srvFiles := ca.IssueIdentity(t, "srv", identity.Replica, "old", identity.ServerSAN)
	srv, err := rpc.NewTLSStore(srvFiles)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reloadErrs []error
	srv.OnError(func(err error) { mu.Lock(); reloadErrs = append(reloadErrs, err); mu.Unlock() })
	w, err := tlsreload.Watch(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cli, err := rpc.NewTLSStore(ca.IssueIdentity(t, "cli", identity.Operator, "op"))
	if err != nil {
		t.Fatal(err)
	}
	addr := echoServer(t, srv)
	dial := func() *tls.Conn {
		c, err := tls.Dial("tcp", addr, cli.ClientConfig(identity.ServerSAN, tls.VersionTLS13, nil))
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	before := dial()
	echo(t, before)
	if got := presented(t, before); got != "old" {
		t.Fatalf("first connection: server presented %q, want old", got)
	}

	next := ca.IssueIdentity(t, "srv2", identity.Replica, "new", identity.ServerSAN)
	copyFile(t, next.Key, srvFiles.Key, 0o600)
	copyFile(t, next.Cert, srvFiles.Cert, 0o644)
	testwait.For(t, 5*time.Second, func() bool { return presented(t, dialAndClose(t, addr, cli)) == "new" },
		"a new connection presents the rotated certificate")
	after := dial()
	if got := presented(t, after); got != "new" {
		t.Fatalf("after rotation: server presented %q, want new", got)
	}
	echo(t, after)
	echo(t, before) // the old connection still works
	if got := presented(t, before); got != "old" {
		t.Fatalf("old connection changed certificate: %q", got)
	}

	// A key with loose permissions: the reload fails naming the file,
	// the rotated certificate stays in use.
	gen := srv.Current().Generation
	mu.Lock()
	reloadErrs = nil // the key renamed in before its certificate failed once
	mu.Unlock()
	if err := os.Chmod(srvFiles.Key, 0o644); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(reloadErrs) > 0 },
		"the failed reload is reported")
	mu.Lock()
	first := reloadErrs[0]
	mu.Unlock()
	if !errors.Is(first, rpc.ErrPEMPermissions) || !strings.Contains(first.Error(), srvFiles.Key) {
		t.Fatalf("reload error %v: want the permissions error naming %s", first, srvFiles.Key)
	}
	if srv.Current().Generation != gen {
		t.Fatalf("a failed reload replaced the material")
	}
	if got := presented(t, dial()); got != "new" {
		t.Fatalf("after a failed reload: server presented %q, want new", got)
	}
}

func dialAndClose(t *testing.T, addr string, cli *tlsreload.Store) *tls.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", addr, cli.ClientConfig(identity.ServerSAN, tls.VersionTLS13, nil))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.Close()
	return c
}

// Requirement (issue 17, point 1): the client side checks the server's
// chain against the current CA: a server of another CA is refused, also
// after a reload, and Reload on demand (SIGHUP) picks up a new CA.
func TestClientVerifiesAgainstCurrentCA(t *testing.T) {
	ca := rpctest.NewCA(t)
	other := rpctest.NewCA(t)
	srv, err := rpc.NewTLSStore(other.IssueIdentity(t, "srv", identity.Replica, "r1", identity.ServerSAN))
	if err != nil {
		t.Fatal(err)
	}
	addr := echoServer(t, srv)
	cliFiles := ca.IssueIdentity(t, "cli", identity.Operator, "op")
	cli, err := rpc.NewTLSStore(cliFiles)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := tls.Dial("tcp", addr, cli.ClientConfig(identity.ServerSAN, tls.VersionTLS13, nil)); err == nil {
		c.Close()
		t.Fatal("a server of a foreign CA was accepted")
	}
	// Trust the other CA and present a certificate it signed.
	o := other.IssueIdentity(t, "cli2", identity.Operator, "op")
	copyFile(t, o.CA, cliFiles.CA, 0o644)
	copyFile(t, o.Key, cliFiles.Key, 0o600)
	copyFile(t, o.Cert, cliFiles.Cert, 0o644)
	if err := cli.Reload(); err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", addr, cli.ClientConfig(identity.ServerSAN, tls.VersionTLS13, nil))
	if err != nil {
		t.Fatalf("after reload: %v", err)
	}
	echo(t, c)
	c.Close()
}
