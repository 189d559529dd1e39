package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/server"
	"github.com/grapnel-io/grapnel/server/secrets"
	"github.com/grapnel-io/grapnel/server/testcluster"
	"github.com/grapnel-io/grapnel/state"
)

// secretWorkload is a process workload that writes the secret it gets in
// its environment to outFile, then sleeps.
func secretWorkload(outFile, pidFile, secret string) string {
	return fmt.Sprintf(`apiVersion: v1
workloads:
  reader:
    runtime: process
    agent: agent_A
    configs:
      db: secret_db
    runtimeConfig: |
      command: /bin/sh
      args: ["-c", "echo $$ > %s; printf %%s \"$DB_PASSWORD\" > %s.tmp; mv %s.tmp %s; exec sleep 600"]
      env:
        DB_USER: "{{db.user}}"
        DB_PASSWORD: "{{db.password}}"
configs:
  secret_db:
    user: app
    password: %q
`, pidFile, outFile, outFile, outFile, secret)
}

// updateAll replaces workloads and configs, as `grapnel apply` of a whole
// manifest does, and returns the answer.
func updateAll(t *testing.T, c *client.Conn, manifest string) *ankbase.Response {
	t.Helper()
	st, _, err := state.ParseManifest([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Request(ctx, &ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{UpdateStateRequest: &ankbase.UpdateStateRequest{
		NewState:   rpc.CompleteStateToProto(&state.CompleteState{DesiredState: st}),
		UpdateMask: []string{"desiredState.workloads", "desiredState.configs"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetUpdateStateSuccess() == nil {
		t.Fatalf("update refused: %v", prototext.Format(resp))
	}
	return resp
}

// A secret config item used by a process workload's runtime config
// (issue 16 points 6 and 7): the workload gets the value; reads, events,
// the history, dry-run plans, snapshots, the logs of every replica and of
// the agent, and every file under each replica's data directory show
// only the mask or ciphertext; a read-modify-write keeps the value; the
// instance id does not let anyone test a guess.
func TestSecretReachesTheWorkloadAndNothingElse(t *testing.T) {
	keyBytes := make([]byte, secrets.KeySize)
	if _, err := rand.Read(keyBytes); err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.ParseKeyring([]byte("k1 " + base64.StdEncoding.EncodeToString(keyBytes)))
	if err != nil {
		t.Fatal(err)
	}
	random := func() string {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		return "pw-" + hex.EncodeToString(b)
	}
	first, second := random(), random()

	serverLogs := map[string]*syncbuf.Buffer{}
	raftLog := &syncbuf.Buffer{}
	cl := newConfiguredCluster(t, keys, serverLogs, raftLog)
	dir := workDir(t)
	out, pidFile := filepath.Join(dir, "seen"), filepath.Join(dir, "reader.pid")
	killAtEnd(t, pidFile)
	a := startAgent(t, cl, "agent_A", filepath.Join(dir, "run"))
	testwait.For(t, connectWithin, func() bool { return connected(cl, "agent_A") }, "agent_A connected")

	ctx := context.Background()
	c, err := client.Dial(ctx, client.Options{Addrs: cl.Addrs(), Insecure: true, ResponseTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	events, stopEvents, err := c.Subscribe(ctx, &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{SubscribeForEvents: true, FieldMask: []string{"desiredState", "workloadStates"}}}})
	if err != nil {
		t.Fatal(err)
	}
	var seenEvents []string
	collect := func() {
		for {
			select {
			case r, ok := <-events:
				if !ok {
					return
				}
				seenEvents = append(seenEvents, prototext.Format(r))
			default:
				return
			}
		}
	}

	// The workload gets the value.
	updateAll(t, c, secretWorkload(out, pidFile, first))
	waitState(t, cl, "agent_A", "reader", "Running(Ok)")
	testwait.For(t, runWithin, func() bool { b, _ := os.ReadFile(out); return string(b) == first }, "the workload sees the secret")

	// Its instance id hashes ciphertext: the plain rendering's hash,
	// which anyone could compute for a guess, is not it.
	var inst state.InstanceName
	read(cl, func(st *state.Store) { inst = st.Rendered["reader"].Instance })
	plainRC := fmt.Sprintf("command: /bin/sh\nargs: [\"-c\", \"echo $$ > %s; printf %%s \\\"$DB_PASSWORD\\\" > %s.tmp; mv %s.tmp %s; exec sleep 600\"]\nenv:\n  DB_USER: \"app\"\n  DB_PASSWORD: \"%s\"\n", pidFile, out, out, out, first)
	if guess := state.NewInstanceName("reader", "agent_A", plainRC); guess.ID == inst.ID {
		t.Fatal("the instance id is the hash of the plain rendering: a guess of the secret can be tested against it")
	}

	// A read-modify-write with the mask keeps the value: nothing changes,
	// the workload is not restarted.
	masked := strings.Replace(secretWorkload(out, pidFile, first), fmt.Sprintf("  secret_db:\n    user: app\n    password: %q\n", first), "  secret_db: "+secrets.Mask+"\n", 1)
	if masked == secretWorkload(out, pidFile, first) {
		t.Fatal("test bug: the mask was not put into the manifest")
	}
	if r := updateAll(t, c, masked); len(r.GetUpdateStateSuccess().GetAddedWorkloads()) != 0 {
		t.Fatalf("writing the mask back changed the workload: %v", prototext.Format(r))
	}
	// The same value again keeps it too.
	if r := updateAll(t, c, secretWorkload(out, pidFile, first)); len(r.GetUpdateStateSuccess().GetAddedWorkloads()) != 0 {
		t.Fatalf("writing the same secret again changed the workload: %v", prototext.Format(r))
	}

	// A dry-run of a new value shows the mask, not the value.
	leader := cl.LeaderID()
	cc, err := grpc.NewClient(cl.Addr(leader), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	next, _, _ := state.ParseManifest([]byte(secretWorkload(out, pidFile, second)))
	plan, err := grapnelpb.NewPlanClient(cc).DryRun(ctx, &grapnelpb.PlanRequest{Update: &ankbase.UpdateStateRequest{
		NewState: rpc.CompleteStateToProto(&state.CompleteState{DesiredState: next}), UpdateMask: []string{"desiredState.workloads", "desiredState.configs"}}})
	if err != nil {
		t.Fatal(err)
	}
	planText := prototext.Format(plan)
	if !plan.GetChanged() || !strings.Contains(planText, secrets.Mask) {
		t.Fatalf("the dry-run shows no masked change:\n%s", planText)
	}

	// A new value reaches the workload (restarted with it).
	updateAll(t, c, secretWorkload(out, pidFile, second))
	testwait.For(t, runWithin, func() bool { b, _ := os.ReadFile(out); return string(b) == second }, "the workload sees the new secret")
	waitState(t, cl, "agent_A", "reader", "Running(Ok)")

	// Reads: the whole state, the configs alone (`grapnel get configs`).
	var reads []string
	for _, mask := range [][]string{nil, {"desiredState.configs"}, {"desiredState.configs.secret_db"}} {
		cs, err := c.Request(ctx, &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: mask}}})
		if err != nil {
			t.Fatal(err)
		}
		text := prototext.Format(cs)
		if !strings.Contains(text, secrets.Mask) {
			t.Fatalf("read %v shows no mask:\n%s", mask, text)
		}
		reads = append(reads, text)
	}
	// The history.
	hist, err := grapnelpb.NewHistoryClient(cc).List(ctx, &grapnelpb.HistoryListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.GetTransactions()) < 2 {
		t.Fatalf("history has %d transactions", len(hist.GetTransactions()))
	}
	// A snapshot on every replica, then `cluster snapshot save`.
	for _, id := range cl.IDs() {
		if err := cl.Node(id).Raft().Snapshot().Error(); err != nil {
			t.Fatalf("snapshot on %s: %v", id, err)
		}
	}
	var saved bytes.Buffer
	if _, err := cl.Node(leader).SaveSnapshot(&saved); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, runWithin, func() bool { collect(); return len(seenEvents) >= 2 }, "events")
	stopEvents()
	a.stop(t)

	shown := map[string]string{
		"reads":             strings.Join(reads, "\n"),
		"events":            strings.Join(seenEvents, "\n"),
		"history":           prototext.Format(hist),
		"dry-run":           planText,
		"snapshot save":     saved.String(),
		"agent log":         a.logs.String(),
		"raft and node log": raftLog.String(),
	}
	for id, b := range serverLogs {
		shown["server log of "+id] = b.String()
	}
	if !strings.Contains(shown["events"], secrets.Mask) {
		t.Errorf("no event shows the mask:\n%s", shown["events"])
	}
	for what, text := range shown {
		for _, s := range []string{first, second} {
			if strings.Contains(text, s) {
				t.Errorf("the %s shows the secret %s", what, s)
			}
		}
	}
	// Every file under every replica's data directory.
	files, snapshotsSealed := 0, false
	for _, id := range cl.IDs() {
		root := cl.Node(id).DataDir()
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files++
			for _, s := range []string{first, second} {
				if bytes.Contains(b, []byte(s)) {
					t.Errorf("%s holds the secret %s in plain text", p, s)
				}
			}
			if bytes.Contains(b, []byte("gsec:v1:k1:")) && strings.Contains(p, "snapshots") {
				snapshotsSealed = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 3*len(cl.IDs()) || !snapshotsSealed {
		t.Fatalf("grepped %d files; a snapshot with a sealed secret found: %v", files, snapshotsSealed)
	}
}

// newConfiguredCluster is three replicas with the keyring, each server
// logging at debug level into its buffer of logs, the Raft layer into
// raftLog.
func newConfiguredCluster(t *testing.T, keys *secrets.Keyring, logs map[string]*syncbuf.Buffer, raftLog *syncbuf.Buffer) *testcluster.Cluster {
	var mu sync.Mutex
	return testcluster.NewConfigured(t, 3, func(id string, cfg *server.Config) {
		mu.Lock()
		b := logs[id]
		if b == nil {
			b = &syncbuf.Buffer{}
			logs[id] = b
		}
		mu.Unlock()
		cfg.Secrets = keys
		cfg.Logger = slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}, clustertest.WithLog(raftLog, "debug"))
}

// Key rotation as docs/secrets.md describes it, on a replica restarted
// with each new key file: the new key first with the old one behind it
// (the new leader seals every secret again under the new key, and the
// workload, restarted, gets the same value), then the new key alone
// (what is stored still opens, also for a changed workload).
func TestSecretKeyRotation(t *testing.T) {
	newKey := func() string {
		b := make([]byte, secrets.KeySize)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	k1, k2 := "k1 "+newKey(), "k2 "+newKey()
	var mu sync.Mutex
	var keys *secrets.Keyring
	setKeys := func(lines ...string) {
		k, err := secrets.ParseKeyring([]byte(strings.Join(lines, "\n")))
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		keys = k
		mu.Unlock()
	}
	setKeys(k1)
	cl := testcluster.NewConfigured(t, 1, func(_ string, cfg *server.Config) {
		mu.Lock()
		cfg.Secrets = keys
		mu.Unlock()
	})
	dir := workDir(t)
	out, pidFile := filepath.Join(dir, "seen"), filepath.Join(dir, "reader.pid")
	killAtEnd(t, pidFile)
	startAgent(t, cl, "agent_A", filepath.Join(dir, "run"))
	testwait.For(t, connectWithin, func() bool { return connected(cl, "agent_A") }, "agent_A connected")
	dial := func() *client.Conn {
		c, err := client.Dial(context.Background(), client.Options{Addrs: cl.Addrs(), Insecure: true, ResponseTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	const secret = "correct horse battery staple"
	updateAll(t, dial(), secretWorkload(out, pidFile, secret))
	testwait.For(t, runWithin, func() bool { b, _ := os.ReadFile(out); return string(b) == secret }, "the workload sees the secret")
	sealedUnder := func(id string) bool {
		ok := false
		read(cl, func(st *state.Store) {
			db, _ := st.Desired.Configs["secret_db"].(map[string]any)
			pw, _ := db["password"].(string)
			user, _ := db["user"].(string)
			ok = secrets.KeyID(pw) == id && secrets.KeyID(user) == id
		})
		return ok
	}
	if !sealedUnder("k1") {
		t.Fatal("the secret is not sealed under k1")
	}

	// Step 1 and 2 of the procedure: the new key first, the old behind.
	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}
	setKeys(k2, k1)
	cl.Stop("n1")
	cl.Restart("n1")
	cl.WaitLeader(20 * time.Second)
	testwait.For(t, runWithin, func() bool { return sealedUnder("k2") }, "the new leader to seal the secret again under k2")
	testwait.For(t, runWithin, func() bool { b, _ := os.ReadFile(out); return string(b) == secret }, "the restarted workload sees the same secret")

	// Step 3: the old key removed. A change of the item's other leaf
	// renders the workload again with the stored password token.
	setKeys(k2)
	cl.Stop("n1")
	cl.Restart("n1")
	cl.WaitLeader(20 * time.Second)
	testwait.For(t, connectWithin, func() bool { return connected(cl, "agent_A") }, "agent_A connected again")
	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}
	updateAll(t, dial(), strings.Replace(secretWorkload(out, pidFile, secret), "user: app", "user: app2", 1))
	testwait.For(t, runWithin, func() bool { b, _ := os.ReadFile(out); return string(b) == secret }, "the workload sees the secret under the new key alone")
	if !sealedUnder("k2") {
		t.Fatal("the secret left k2")
	}
}
