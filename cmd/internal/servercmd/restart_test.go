package servercmd

import (
	"errors"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/grapnel-io/grapnel/cluster"
)

// Requirement (issue 29 point 3): once its storage works again the
// replica executes its own binary (the file it runs, /proc/self/exe)
// again with the same arguments and environment; an exec that fails is
// an error, so that the process exits and systemd restarts it instead.
func TestRestartInPlaceExecutesItself(t *testing.T) {
	var argv0 string
	var argv, envv []string
	err := restartInPlace(func(a0 string, a, e []string) error {
		argv0, argv, envv = a0, a, e
		return nil
	})
	if err != nil || argv0 != "/proc/self/exe" || !slices.Equal(argv, os.Args) || !slices.Equal(envv, os.Environ()) {
		t.Fatalf("exec(%q, %q, %d variables) = %v; want /proc/self/exe with os.Args and os.Environ()", argv0, argv, len(envv), err)
	}
	err = restartInPlace(func(string, []string, []string) error { return syscall.ENOEXEC })
	if !errors.Is(err, syscall.ENOEXEC) || !strings.Contains(err.Error(), "restart in place") {
		t.Fatalf("failed exec: %v", err)
	}
}

// The STATUS= line says leader or follower, and the storage fault over
// either.
func TestReplicaStatus(t *testing.T) {
	fault := &cluster.StorageFault{Op: "append log entries", Path: "wal/1.wal", Err: syscall.EROFS}
	for _, tc := range []struct {
		leading bool
		fault   *cluster.StorageFault
		want    string
	}{
		{true, nil, "leader"},
		{false, nil, "follower"},
		{true, fault, "storage failed: append log entries wal/1.wal: read-only file system; stepped down, stores nothing; probing the data directory, restarts itself once it works"},
	} {
		if got := replicaStatus(tc.leading, tc.fault); got != tc.want {
			t.Errorf("replicaStatus(%v, %v) = %q, want %q", tc.leading, tc.fault, got, tc.want)
		}
	}
}
