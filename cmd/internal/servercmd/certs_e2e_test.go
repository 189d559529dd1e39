package servercmd

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/testwait"
)

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Requirement (issue 17, point 3): `grapnel certs` makes a CA and a
// certificate per role that a real grapnel-server and the grapnel CLI
// use as they are; with them an agent's certificate cannot save a
// snapshot (the attack), a commander changes the desired state
// but cannot remove a replica, and an operator can.
func TestCertsAgainstARealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test: builds grapnel-server and grapnel")
	}
	bins := e2eBuild(t, "grapnel-server", "grapnel")
	cli := bins["grapnel"]
	dir := t.TempDir()
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := exec.Command(cli, args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("grapnel %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	ca := filepath.Join(dir, "ca")
	must("certs", "ca", "--out", ca)
	if _, err := run("certs", "ca", "--out", ca); err == nil {
		t.Fatal("a second `certs ca` into the same directory must refuse to overwrite the CA key")
	}
	ids := map[string][2]string{"r1": {"replica", "r1"}, "agent": {"agent", "agent_A"}, "op": {"operator", "alice"}, "cmd": {"commander", "ota"}}
	for d, id := range ids {
		must("certs", "issue", "--ca", ca, "--role", id[0], "--name", id[1], "--out", filepath.Join(dir, d), "--validity", "24h")
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{"ca/ca-key.pem", 0o600}, {"ca/ca.pem", 0o644}, {"agent/key.pem", 0o600}, {"agent/cert.pem", 0o644}, {"agent/ca.pem", 0o644}} {
		info, err := os.Stat(filepath.Join(dir, f.path))
		if err != nil || info.Mode().Perm() != f.mode {
			t.Fatalf("%s: %v, mode %v; want %v", f.path, err, info.Mode().Perm(), f.mode)
		}
	}

	addr := freeAddr(t)
	r1 := filepath.Join(dir, "r1")
	srv := exec.Command(bins["grapnel-server"], "--name", "r1", "--data-dir", filepath.Join(dir, "data"), "--address", addr,
		"--raft-address", freeAddr(t), "--ca_pem", filepath.Join(r1, "ca.pem"), "--crt_pem", filepath.Join(r1, "cert.pem"),
		"--key_pem", filepath.Join(r1, "key.pem"))
	var log bytes.Buffer
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", log.String())
		}
	})
	as := func(who string, args ...string) (string, error) {
		d := filepath.Join(dir, who)
		return run(append([]string{"--server-url", addr, "--no-wait", "--response-timeout", "5000", "--ca_pem", filepath.Join(d, "ca.pem"),
			"--crt_pem", filepath.Join(d, "cert.pem"), "--key_pem", filepath.Join(d, "key.pem")}, args...)...)
	}
	testwait.For(t, 30*time.Second, func() bool {
		out, err := as("op", "cluster", "members")
		return err == nil && strings.Contains(out, "r1")
	}, "the replica answers the operator")

	if out, err := as("agent", "cluster", "snapshot", "save", filepath.Join(dir, "stolen.bin")); err == nil ||
		!strings.Contains(out, "agent 'agent_A' may not SnapshotSave") {
		t.Fatalf("an agent's snapshot save: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "stolen.bin")); err == nil {
		if data, _ := os.ReadFile(filepath.Join(dir, "stolen.bin")); len(data) > 0 {
			t.Fatal("the agent got a snapshot")
		}
	}
	manifest := filepath.Join(dir, "m.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: v1\nworkloads:\n  web:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: 'image: nginx'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := as("agent", "apply", manifest); err == nil {
		t.Fatalf("an agent applied a manifest through the CLI connection:\n%s", out)
	}
	if out, err := as("cmd", "apply", manifest); err != nil {
		t.Fatalf("the commander's apply: %v\n%s", err, out)
	}
	if out, err := as("cmd", "cluster", "remove", "r9"); err == nil || !strings.Contains(out, "commander 'ota' may not RemoveReplica") {
		t.Fatalf("the commander's cluster remove: %v\n%s", err, out)
	}
	if out, err := as("op", "cluster", "snapshot", "save", filepath.Join(dir, "backup.bin")); err != nil {
		t.Fatalf("the operator's snapshot save: %v\n%s", err, out)
	}
}
