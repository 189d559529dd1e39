package server

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/state"
)

// A restore that is refused (a damaged or oversized upload) must leave the
// replica exactly as it was: hashicorp/raft stores a user snapshot among
// the replica's snapshots and then panics when the FSM refuses it, and the
// replica then cannot start again. Each test runs against a real replica:
// it is refused with a clear error, the state and the snapshots directory
// do not change, the replica keeps serving, and it restarts with its state.

// refusedRestore is one replica with a saved snapshot (which also puts a
// snapshot into its snapshots directory) to damage.
type refusedRestore struct {
	t      *testing.T
	ts     *testServer
	saved  []byte
	before *stateAndSnapshots
}

type stateAndSnapshots struct {
	desired []byte
	snaps   map[string][32]byte
}

func newRefusedRestore(t *testing.T, mod func(*Config)) *refusedRestore {
	ts := startServerCfg(t, t.TempDir(), mustState(t, nginx), mod)
	r := &refusedRestore{t: t, ts: ts, saved: saveSnapshot(t, clusterClient(t, ts.addr))}
	r.before = r.look()
	if len(r.before.snaps) == 0 {
		t.Fatal("saving left no snapshot in the snapshots directory")
	}
	return r
}

// look reads the desired state through the API and hashes every file of
// the snapshots directory.
func (r *refusedRestore) look() *stateAndSnapshots {
	r.t.Helper()
	desired, err := proto.Marshal(r.ts.cli().get("desiredState"))
	if err != nil {
		r.t.Fatal(err)
	}
	snaps := map[string][32]byte{}
	root := filepath.Join(r.ts.dir, "snapshots")
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		snaps[strings.TrimPrefix(p, root)] = sha256.Sum256(b)
		return err
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return &stateAndSnapshots{desired: desired, snaps: snaps}
}

// refuse uploads data and checks that it is refused with code, a message
// holding want and the sentinel kind, and that nothing changed.
func (r *refusedRestore) refuse(data []byte, code codes.Code, kind error, want string) {
	r.t.Helper()
	_, err := restoreSnapshot(clusterClient(r.t, r.ts.addr), data)
	if status.Code(err) != code || !errors.Is(rpc.FromStatus(err), kind) || !strings.Contains(status.Convert(err).Message(), want) {
		r.t.Fatalf("restore of %d bytes: %v; want %v, %v, saying %q", len(data), err, code, kind, want)
	}
	if !strings.Contains(status.Convert(err).Message(), "nothing was changed") {
		r.t.Errorf("the refusal does not say that nothing was changed: %v", err)
	}
	now := r.look()
	if !bytes.Equal(now.desired, r.before.desired) {
		r.t.Fatal("the refused restore changed the desired state")
	}
	if len(now.snaps) != len(r.before.snaps) {
		r.t.Fatalf("snapshots directory: %v, before %v", keys(now.snaps), keys(r.before.snaps))
	}
	for p, h := range r.before.snaps {
		if now.snaps[p] != h {
			r.t.Fatalf("snapshots directory: %s changed", p)
		}
	}
	if n := r.ts.fsm.Restores(); n != 0 {
		r.t.Fatalf("the FSM counted %d restores", n)
	}
	if left, _ := os.ReadDir(filepath.Join(r.ts.dir, RestoreSpoolDir)); len(left) != 0 {
		r.t.Fatalf("the spool kept %d files", len(left))
	}
}

// servesAndRestarts updates the state, restarts the replica on its data
// directory and checks that it serves the state it had.
func (r *refusedRestore) servesAndRestarts() {
	r.t.Helper()
	later := "apiVersion: v1\nworkloads:\n  later:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: later\n"
	if resp := r.ts.cli().update(manifest(r.t, later), "desiredState.workloads.later"); resp.GetUpdateStateSuccess() == nil {
		r.t.Fatalf("update after the refused restore: %v", resp)
	}
	r.ts.stop()
	again := startServerIn(r.t, r.ts.dir, nil)
	wls := again.cli().get("desiredState.workloads").GetDesiredState().GetWorkloads().GetWorkloads()
	if wls["nginx"] == nil || wls["later"] == nil {
		r.t.Fatalf("after a restart the replica serves workloads %v", keys(wls))
	}
}

func keys[V any](m map[string]V) []string { return state.SortedKeys(m) }

func TestSnapshotRestoreRefusesRandomBytes(t *testing.T) {
	r := newRefusedRestore(t, nil)
	random := make([]byte, 2000)
	rng := rand.New(rand.NewPCG(12, 2))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	r.refuse(random, codes.InvalidArgument, errs.ErrBadSnapshot, "not a valid Grapnel snapshot: bad magic")
	r.servesAndRestarts()
}

func TestSnapshotRestoreRefusesTruncated(t *testing.T) {
	r := newRefusedRestore(t, nil)
	n := len(r.saved)
	for _, cut := range []int{10, 20, n / 3, n / 2, n - 5, n - 4, n - 1} {
		r.refuse(r.saved[:cut], codes.InvalidArgument, errs.ErrBadSnapshot, "truncated")
	}
	r.servesAndRestarts()
}

func TestSnapshotRestoreRefusesFlippedByte(t *testing.T) {
	r := newRefusedRestore(t, nil)
	flipped := bytes.Clone(r.saved)
	flipped[bytes.Index(flipped, []byte("image: nginx"))+7] ^= 0x20 // nginx -> Nginx
	r.refuse(flipped, codes.InvalidArgument, errs.ErrBadSnapshot, "checksum mismatch")
	r.servesAndRestarts()
}

// An upload over the cap is refused as soon as it passes it, even a valid
// snapshot; one exactly at the cap restores.
func TestSnapshotRestoreRefusesOversized(t *testing.T) {
	r := newRefusedRestore(t, func(c *Config) { c.MaxRestoreBytes = 64 << 10 })
	big := make([]byte, 1<<20)
	r.refuse(big, codes.ResourceExhausted, errs.ErrSnapshotTooLarge, "larger than this replica accepts (65536 bytes, --max-restore-bytes)")
	r.servesAndRestarts()

	maxBytes := int64(len(r.saved))
	ts := startServerCfg(t, t.TempDir(), mustState(t, nginx), func(c *Config) { c.MaxRestoreBytes = maxBytes - 1 })
	_, err := restoreSnapshot(clusterClient(t, ts.addr), r.saved)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a valid snapshot one byte over the cap: %v", err)
	}
	ts.stop()
	ts = startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.MaxRestoreBytes = maxBytes })
	if _, err := restoreSnapshot(clusterClient(t, ts.addr), r.saved); err != nil {
		t.Fatalf("a snapshot exactly at the cap: %v", err)
	}
	testwait.For(t, 10*time.Second, func() bool {
		ok := false
		ts.store(func(s *state.Store) { _, ok = s.Desired.Workloads["nginx"] })
		return ok
	}, "the restored workload")
}

// What a restore interrupted by a crash left in the spool is removed when
// the replica starts; a restore that went through leaves nothing either.
func TestRestoreSpoolIsCleaned(t *testing.T) {
	dir := t.TempDir()
	spool := filepath.Join(dir, RestoreSpoolDir)
	if err := os.MkdirAll(spool, 0o700); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(spool, "upload-1234.snap")
	if err := os.WriteFile(stale, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := startServerIn(t, dir, mustState(t, nginx))
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the stale spool file is still there: %v", err)
	}
	c := clusterClient(t, ts.addr)
	if _, err := restoreSnapshot(c, saveSnapshot(t, c)); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(spool); len(left) != 0 {
		t.Fatalf("a restore left %d files in the spool", len(left))
	}
}
