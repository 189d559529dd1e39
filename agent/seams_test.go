package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/grapnel-io/grapnel/internal/backoff"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/server/secrets"
	"github.com/grapnel-io/grapnel/server/testcluster"
	"github.com/grapnel-io/grapnel/state"
)

// The generative test of the seams (issue 30 point 9): one random
// sequence of operations across the features — plan then apply at the
// plan's revision, deletes, intent locks taken and released, updates at
// a stale revision, a secret changed, agent modes, an agent's clean
// restart (Goodbye), an agent killed (no Goodbye) and started again,
// leader kills, a follower killed and restarted — on 3 replicas and 3
// agents running process workloads, pinned and placed. After every step
// it checks:
//
//   - the history holds every accepted update and every refusal a client
//     was answered, across leader kills (a refusal is answered once an
//     entry holds it);
//   - no instance was restarted unless its rendered config changed (the
//     instance name is the hash of it) — no workload here fails; an
//     agent's restart, clean or killed, restarts none (it adopts them);
//   - no secret value in any read, event, log or replica data file;
//   - every lock holds until unlocked: the other owner is refused, and
//     the lock is listed;
//   - the plan equals the apply: the instances the dry-run's agent steps
//     add and delete are those the agents are then told to run and stop
//     (the update and the placement entry after it).
//
// The seed is printed; GRAPNEL_SEAMS_SEED replays one, GRAPNEL_SEAMS_STEPS
// sets the length (`make chaos` runs it long).
// seamsSeed is the sequence make test runs.
const seamsSeed = 1

func TestSeams(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 replicas and 3 agents")
	}
	steps := 30
	if v := os.Getenv("GRAPNEL_SEAMS_STEPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("GRAPNEL_SEAMS_STEPS=%q: a positive number of steps is required", v)
		}
		steps = n
	}
	// make test runs one fixed sequence, so that CI fails only on a
	// change; make chaos draws one (GRAPNEL_SEAMS_SEED=random), and a
	// failing seed replays.
	seed := uint64(seamsSeed)
	if v := os.Getenv("GRAPNEL_SEAMS_SEED"); v != "" && v != "random" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("GRAPNEL_SEAMS_SEED=%q: a number or \"random\" is required", v)
		}
		seed = n
	} else if v == "random" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		for _, c := range b {
			seed = seed<<8 | uint64(c)
		}
	}
	t.Logf("seams: seed %d, %d steps (replay: GRAPNEL_SEAMS_SEED=%d GRAPNEL_SEAMS_STEPS=%d)", seed, steps, seed, steps)
	w := newSeams(t, seed)
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("GRAPNEL_SEAMS_LOGS") != "" {
			for id, b := range w.serverLogs {
				t.Logf("server %s log:\n%s", id, b.String())
			}
		}
		if t.Failed() {
			t.Logf("seams: FAILED with seed %d (replay: GRAPNEL_SEAMS_SEED=%d GRAPNEL_SEAMS_STEPS=%d go test ./agent/ -run TestSeams)", seed, seed, steps)
		}
	})
	for i := range steps {
		op := w.pick()
		t.Logf("seams: step %d: %s (modes %v)", i+1, op.name, w.modes)
		op.run(w)
		w.settle()
		w.check(fmt.Sprintf("after step %d (%s)", i+1, op.name))
	}
	t.Logf("seams: %d updates and %d refusals, all in the history", w.accepted, w.refused)
}

// seamsWorkloads are the names the test creates and deletes.
var seamsWorkloads = []string{"w0", "w1", "w2", "w3", "w4"}

// seamsAgents are the agents of the test.
var seamsAgents = []string{"a1", "a2", "a3"}

// seamSpec is the model of one desired workload.
type seamSpec struct {
	agent  string // "" for a placed workload
	placed int    // its grapnel.io/instances; 0 for a pinned one
	secret bool   // it renders the secret into its environment
	gen    int    // bumped by a spec change
}

type seamsWorld struct {
	t      *testing.T
	rng    *mrand.Rand
	cl     *testcluster.Cluster
	dir    string
	agents map[string]*running
	alice  *client.Conn
	bob    *client.Conn

	serverLogs map[string]*syncbuf.Buffer
	raftLog    *syncbuf.Buffer
	events     *syncbuf.Buffer

	secret      string   // the value now
	secretsUsed []string // every value the test ever set
	model       map[string]seamSpec
	locked      map[string]bool // workloads alice holds
	runs        map[string]int  // instance → the pid the test saw run it
	modes       map[string]string
	// accepted counts the test's updates through the Plan service that
	// were made, refused the refusals it was answered: the history must
	// hold them all from the answer on (docs/history.md, "Rejected
	// requests").
	accepted, refused int
}

func newSeams(t *testing.T, seed uint64) *seamsWorld {
	keyBytes := make([]byte, secrets.KeySize)
	if _, err := rand.Read(keyBytes); err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.ParseKeyring([]byte("k1 " + base64.StdEncoding.EncodeToString(keyBytes)))
	if err != nil {
		t.Fatal(err)
	}
	w := &seamsWorld{
		t: t, rng: mrand.New(mrand.NewPCG(seed, seed^0x5ea45)),
		serverLogs: map[string]*syncbuf.Buffer{}, raftLog: &syncbuf.Buffer{}, events: &syncbuf.Buffer{},
		agents: map[string]*running{}, model: map[string]seamSpec{}, locked: map[string]bool{},
		runs: map[string]int{}, modes: map[string]string{},
	}
	w.cl = newConfiguredCluster(t, keys, w.serverLogs, w.raftLog)
	w.dir = workDir(t)
	t.Cleanup(func() {
		for _, pid := range w.pids() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	for _, a := range seamsAgents {
		w.startAgent(a)
	}
	w.alice, w.bob = w.dial("alice"), w.dial("bob")
	go w.collectEvents()
	w.newSecret()
	w.apply(w.alice, w.manifest(nil, true), []string{"desiredState.configs.secret_db"}, nil, nil)
	return w
}

func (w *seamsWorld) dial(owner string) *client.Conn {
	c, err := client.Dial(context.Background(), client.Options{Addrs: w.cl.Addrs(), Insecure: true, ResponseTimeout: 10 * time.Second, Owner: owner})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = c.Close() })
	return c
}

func (w *seamsWorld) startAgent(name string) {
	w.agents[name] = startAgent(w.t, w.cl, name, filepath.Join(w.dir, "run", name))
	testwait.For(w.t, connectWithin, func() bool { return connected(w.cl, name) }, "%s connected", name)
}

// collectEvents keeps a subscription to the whole state open, on
// whichever replica leads, and records every event as text.
func (w *seamsWorld) collectEvents() {
	ctx := w.t.Context()
	for ctx.Err() == nil {
		c, err := client.Dial(ctx, client.Options{Addrs: w.cl.Addrs(), Insecure: true, ResponseTimeout: 5 * time.Second})
		if err != nil {
			// No replica answers (a leader kill): retry, not a test wait.
			backoff.Sleep(clock.Real(), 100*time.Millisecond, ctx.Done())
			continue
		}
		ch, stop, err := c.Subscribe(ctx, &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
			CompleteStateRequest: &ankbase.CompleteStateRequest{SubscribeForEvents: true}}})
		if err == nil {
			for r := range ch {
				_, _ = w.events.Write([]byte(prototext.Format(r)))
			}
			stop()
		}
		_ = c.Close()
	}
}

func (w *seamsWorld) newSecret() {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	w.secret = "S3cr3t-" + hex.EncodeToString(b)
	w.secretsUsed = append(w.secretsUsed, w.secret)
}

// seamsPidFile is the file, in its working directory (its instance's
// directory in the agent's run folder), where each workload writes its
// pid.
const seamsPidFile = "seams.pid"

// pids finds every instance's pid file under the agents' run folders:
// instance → pid.
func (w *seamsWorld) pids() map[string]int {
	out := map[string]int{}
	_ = filepath.WalkDir(filepath.Join(w.dir, "run"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != seamsPidFile {
			return nil
		}
		for _, seg := range strings.Split(p, string(filepath.Separator)) {
			if in, err := state.ParseInstanceName(seg); err == nil && in.ID != "" {
				if pid := pidOf(w.t, p); pid > 0 {
					out[seg] = pid
				}
				break
			}
		}
		return nil
	})
	return out
}

// current is every instance the leader's store wants run now. It is
// not complete (false) while a placed workload has fewer agents than it
// asks for and Active agents could give it: the placement that follows
// an update is an entry of its own.
func (w *seamsWorld) current() (map[string]bool, bool) {
	out, read, complete := w.currentParts()
	return out, read && complete
}

// currentParts is current's answer in parts: the instances, whether the
// leader's store could be read, and whether it holds all the model wants.
func (w *seamsWorld) currentParts() (map[string]bool, bool, bool) {
	out := map[string]bool{}
	active := 0
	for _, a := range seamsAgents {
		if m := w.modes[a]; m == "" || m == "Active" {
			active++
		}
	}
	complete := true
	ok := read(w.cl, func(st *state.Store) {
		for name, spec := range w.model {
			r, found := st.Rendered[name]
			if !found {
				complete = false
				continue
			}
			if spec.placed == 0 {
				out[r.Instance.String()] = true
				continue
			}
			if n := len(st.Placement[name]); n < min(spec.placed, active) || n > spec.placed {
				complete = false
			}
			for _, a := range st.Placement[name] {
				in := r.Instance
				in.WorkloadName, in.AgentName = name, a
				out[in.String()] = true
			}
		}
	})
	return out, ok, complete
}

// manifest is the desired state of the named workloads (all in the
// model when names is nil), with the secret item when withSecret.
func (w *seamsWorld) manifest(names []string, withSecret bool) *state.State {
	var b strings.Builder
	if names == nil {
		for _, n := range seamsWorkloads {
			if _, ok := w.model[n]; ok {
				names = append(names, n)
			}
		}
	}
	b.WriteString("apiVersion: v1\nworkloads:")
	if len(names) == 0 {
		b.WriteString(" {}")
	}
	b.WriteString("\n")
	for _, n := range names {
		s, ok := w.model[n]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "  %s:\n    runtime: process\n    agent: %q\n", n, s.agent)
		if s.placed > 0 {
			fmt.Fprintf(&b, "    tags:\n      grapnel.io/instances: \"%d\"\n      grapnel.io/spread: none\n", s.placed)
		}
		if s.secret {
			b.WriteString("    configs: {db: secret_db}\n")
		}
		fmt.Fprintf(&b, "    runtimeConfig: |\n      command: /bin/sh\n      args: [\"-c\", \"echo $$ > %s; exec sleep 600\"]\n      env:\n        GEN: \"%d\"\n", seamsPidFile, s.gen)
		if s.secret {
			b.WriteString("        DB_PASSWORD: \"{{db.password}}\"\n")
		}
	}
	if withSecret {
		fmt.Fprintf(&b, "configs:\n  secret_db:\n    password: %q\n", w.secret)
	}
	st, _, err := state.ParseManifest([]byte(b.String()))
	if err != nil {
		w.t.Fatalf("test bug: %v\n%s", err, b.String())
	}
	return &st
}

// seamOp is one kind of operation.
type seamOp struct {
	name   string
	weight int
	run    func(*seamsWorld)
}

var seamOps = []seamOp{
	{"apply (plan, then apply at its revision)", 6, (*seamsWorld).opApply},
	{"delete", 2, (*seamsWorld).opDelete},
	{"lock", 2, (*seamsWorld).opLock},
	{"unlock", 2, (*seamsWorld).opUnlock},
	{"update at a stale revision", 2, (*seamsWorld).opStale},
	{"change the secret", 2, (*seamsWorld).opSecret},
	{"agent mode", 2, (*seamsWorld).opMode},
	{"agent clean restart (Goodbye)", 1, (*seamsWorld).opGoodbye},
	{"agent kill and restart (no Goodbye)", 1, (*seamsWorld).opAgentKill},
	{"leader kill", 1, (*seamsWorld).opLeaderKill},
	{"follower kill and restart", 1, (*seamsWorld).opFollowerKill},
}

func (w *seamsWorld) pick() seamOp {
	total := 0
	for _, o := range seamOps {
		total += o.weight
	}
	n := w.rng.IntN(total)
	for _, o := range seamOps {
		if n < o.weight {
			return o
		}
		n -= o.weight
	}
	return seamOps[0]
}

func (w *seamsWorld) existing() []string {
	var out []string
	for _, n := range seamsWorkloads {
		if _, ok := w.model[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

// opApply adds a workload or changes one (its spec, its agent, or
// whether it uses the secret), as alice or bob: dry-run, then apply at
// the plan's revision. An update of a workload alice locked from bob
// must be refused.
func (w *seamsWorld) opApply() {
	name := seamsWorkloads[w.rng.IntN(len(seamsWorkloads))]
	before, had := w.model[name]
	next := before
	if !had {
		next = seamSpec{agent: seamsAgents[w.rng.IntN(len(seamsAgents))], secret: w.rng.IntN(2) == 0}
		if w.rng.IntN(2) == 0 {
			next.agent, next.placed = "", 1+w.rng.IntN(2)
		}
	} else {
		switch w.rng.IntN(3) {
		case 0:
			next.gen++
		case 1:
			if next.placed > 0 {
				next.placed = 3 - next.placed
			} else {
				next.agent = seamsAgents[w.rng.IntN(len(seamsAgents))]
			}
		default:
			next.secret = !next.secret
		}
	}
	by, owner := w.alice, "alice"
	if w.rng.IntN(2) == 0 {
		by, owner = w.bob, "bob"
	}
	w.model[name] = next
	st := w.manifest([]string{name}, false)
	mask := []string{"desiredState.workloads." + name}
	if w.locked[name] && owner == "bob" {
		w.model[name] = before
		if !had {
			delete(w.model, name)
		}
		w.refuse(by, st, mask, nil, errs.ErrLocked, "bob's update of "+name+", locked by alice")
		return
	}
	w.apply(by, st, mask, nil, nil)
}

func (w *seamsWorld) opDelete() {
	names := w.existing()
	if len(names) == 0 {
		w.opApply()
		return
	}
	name := names[w.rng.IntN(len(names))]
	mask := []string{"desiredState.workloads." + name}
	empty := &state.State{APIVersion: "v1"}
	if w.locked[name] {
		w.refuse(w.bob, empty, mask, nil, errs.ErrLocked, "bob's delete of "+name+", locked by alice")
		return
	}
	before := w.before()
	delete(w.model, name)
	w.apply(w.alice, empty, mask, nil, before)
}

func (w *seamsWorld) opLock() {
	name := seamsWorkloads[w.rng.IntN(len(seamsWorkloads))]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := retryLeader(ctx, func() (*grapnelpb.LockResponse, error) {
		return w.alice.Locks().Lock(ctx, &grapnelpb.LockRequest{Objects: []string{"workload/" + name}, TtlMs: uint64(time.Hour / time.Millisecond), Reason: "seams"})
	})
	if err != nil {
		w.t.Fatalf("alice's lock of %s: %v", name, err)
	}
	w.locked[name] = true
}

func (w *seamsWorld) opUnlock() {
	var held []string
	for _, n := range seamsWorkloads {
		if w.locked[n] {
			held = append(held, n)
		}
	}
	if len(held) == 0 {
		w.opLock()
		return
	}
	name := held[w.rng.IntN(len(held))]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// bob may not release it.
	if _, err := w.bob.Locks().Unlock(ctx, &grapnelpb.UnlockRequest{Objects: []string{"workload/" + name}}); err == nil {
		w.t.Fatalf("bob released alice's lock of %s without force", name)
	}
	if _, err := retryLeader(ctx, func() (*grapnelpb.UnlockResponse, error) {
		return w.alice.Locks().Unlock(ctx, &grapnelpb.UnlockRequest{Objects: []string{"workload/" + name}})
	}); err != nil {
		w.t.Fatalf("alice's unlock of %s: %v", name, err)
	}
	delete(w.locked, name)
}

// opStale updates a workload at a revision from before its last change:
// refused with a revision conflict, nothing changed.
func (w *seamsWorld) opStale() {
	names := w.existing()
	if len(names) == 0 {
		w.opApply()
		return
	}
	name := names[w.rng.IntN(len(names))]
	rev := w.revisionOf(name)
	if rev == 0 {
		return
	}
	spec := w.model[name]
	spec.gen += 100
	w.model[name] = spec
	st := w.manifest([]string{name}, false)
	spec.gen -= 100
	w.model[name] = spec
	// alice's own lock does not stop her; the stale revision does.
	stale := rev - 1
	w.refuse(w.alice, st, []string{"desiredState.workloads." + name}, &stale, errs.ErrRevisionConflict, "alice's update of "+name+" at revision "+strconv.FormatUint(stale, 10))
}

// revisionOf is the revision a workload last changed at, from the
// leader's store.
func (w *seamsWorld) revisionOf(name string) uint64 {
	var rev uint64
	testwait.For(w.t, runWithin, func() bool {
		return read(w.cl, func(st *state.Store) {
			if st.Revs != nil {
				rev = st.Revs.Mod[state.ObjectWorkloadPrefix+name]
			}
		})
	}, "a leader's store")
	return rev
}

// opSecret gives the secret item a new value: the workloads that use
// it are rendered again (and may restart), the others not.
func (w *seamsWorld) opSecret() {
	locked := false
	for n, s := range w.model {
		if s.secret && w.locked[n] {
			locked = true
		}
	}
	old := w.secret
	w.newSecret()
	st := w.manifest([]string{}, true)
	mask := []string{"desiredState.configs.secret_db"}
	if locked {
		// alice holds a workload it would render again: bob is refused.
		w.refuse(w.bob, st, mask, nil, errs.ErrLocked, "bob's secret change re-rendering a workload alice locked")
		w.secret = old
		return
	}
	w.apply(w.alice, st, mask, nil, nil)
}

func (w *seamsWorld) opMode() {
	agent := seamsAgents[w.rng.IntN(len(seamsAgents))]
	mode := []string{"Active", "Maintenance", "Disabled"}[w.rng.IntN(3)]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := retryLeader(ctx, func() (*grapnelpb.SetAgentModeResponse, error) {
		return w.alice.Cluster().SetAgentMode(ctx, &grapnelpb.SetAgentModeRequest{Agent: agent, Mode: mode})
	})
	if mode == "Disabled" && errors.Is(rpc.FromStatus(err), errs.ErrAvailability) {
		// MAMID's rule: a drain that would leave a placed workload
		// fewer instances is refused; nothing changed.
		w.t.Logf("seams: disabling %s refused: %v", agent, err)
		return
	}
	if err != nil {
		w.t.Fatalf("agent %s %s: %v", agent, mode, err)
	}
	w.modes[agent] = mode
}

// opGoodbye stops an agent on purpose (it says Goodbye) and starts it
// again on the same run folder: its workloads must not restart.
func (w *seamsWorld) opGoodbye() {
	agent := seamsAgents[w.rng.IntN(len(seamsAgents))]
	w.agents[agent].stop(w.t)
	w.startAgent(agent)
}

// opAgentKill kills an agent (it stops without Goodbye, as after
// SIGKILL: the leader sees its stream break) and starts it again on the
// same run folder within its reconnect grace: it adopts its workloads,
// none restarts.
func (w *seamsWorld) opAgentKill() {
	agent := seamsAgents[w.rng.IntN(len(seamsAgents))]
	w.agents[agent].kill(w.t)
	w.startAgent(agent)
}

// opLeaderKill stops the leading replica, waits for another to lead,
// and starts the stopped one again.
func (w *seamsWorld) opLeaderKill() {
	old := w.cl.WaitServing(20 * time.Second)
	w.cl.Stop(old)
	w.cl.WaitServing(20*time.Second, old)
	w.cl.Restart(old)
}

// opFollowerKill stops a replica that does not lead and starts it
// again: it catches up from the leader.
func (w *seamsWorld) opFollowerKill() {
	leader := w.cl.WaitServing(20 * time.Second)
	var others []string
	for _, id := range w.cl.IDs() {
		if id != leader {
			others = append(others, id)
		}
	}
	id := others[w.rng.IntN(len(others))]
	w.cl.Stop(id)
	w.cl.Restart(id)
}

// apply makes an update through the Plan service: a dry-run first, then
// the apply at the plan's revision (or at expectedRevision); the
// instances the plan adds and deletes must be those the apply does.
func (w *seamsWorld) apply(by *client.Conn, st *state.State, mask []string, expectedRevision *uint64, before map[string]bool) {
	w.t.Helper()
	up := &ankbase.UpdateStateRequest{NewState: rpc.CompleteStateToProto(&state.CompleteState{DesiredState: *st}), UpdateMask: mask}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if before == nil {
		before = w.before()
	}
	for attempt := 0; ; attempt++ {
		plan, err := retryLeader(ctx, func() (*grapnelpb.PlanResponse, error) {
			return by.Plan().DryRun(ctx, &grapnelpb.PlanRequest{Update: up})
		})
		if err != nil {
			w.t.Fatalf("dry-run of %v: %v", mask, err)
		}
		if !plan.GetAccepted() {
			w.t.Fatalf("dry-run of %v refused: %v", mask, plan.GetRejections())
		}
		resp, err := retryLeader(ctx, func() (*grapnelpb.ApplyResponse, error) {
			return by.Plan().Apply(ctx, &grapnelpb.ApplyRequest{Update: up, ExpectedSeq: plan.GetSeq(), ExpectedRevision: expectedRevision})
		})
		if errors.Is(err, errs.ErrStateChanged) && attempt < 3 {
			// A server decision between the plan and the apply does not
			// move the revision; only an update does. Plan again.
			continue
		}
		if err != nil {
			w.t.Fatalf("apply of %v at revision %d: %v", mask, plan.GetSeq(), err)
		}
		if !plan.GetChanged() {
			return
		}
		w.accepted++
		// What the plan says each agent will do, against what the
		// agents were then told: the instances wanted after the update
		// (and the placement it causes) settled, against those before.
		var planAdded, planDeleted []string
		for _, ap := range plan.GetAgents() {
			for _, st := range ap.GetSteps() {
				switch st.GetAction() {
				case "add":
					planAdded = append(planAdded, st.GetInstance())
				case "delete":
					planDeleted = append(planDeleted, st.GetInstance())
				}
			}
		}
		slices.Sort(planAdded)
		slices.Sort(planDeleted)
		// The placement entry comes after the update's: wait for what
		// the plan says, bounded, then compare.
		var gotAdded, gotDeleted []string
		var after map[string]bool
		testwait.Until(2*runWithin, func() bool {
			after, _ = w.current()
			gotAdded, gotDeleted = nil, nil
			for inst := range after {
				if !before[inst] {
					gotAdded = append(gotAdded, inst)
				}
			}
			for inst := range before {
				if !after[inst] {
					gotDeleted = append(gotDeleted, inst)
				}
			}
			slices.Sort(gotAdded)
			slices.Sort(gotDeleted)
			return slices.Equal(planAdded, gotAdded) && slices.Equal(planDeleted, gotDeleted)
		})
		w.settle()
		if !slices.Equal(planAdded, gotAdded) || !slices.Equal(planDeleted, gotDeleted) {
			var layout map[string][]string
			read(w.cl, func(st *state.Store) { layout = maps.Clone(st.Placement) })
			w.t.Logf("model %v, layout %v, before %v, after %v", w.model, layout, before, after)
			w.t.Fatalf("the plan is not the apply for %v: the plan adds %v and deletes %v, the apply added %v and deleted %v (answered %v, %v)\nplan: %s",
				mask, planAdded, planDeleted, gotAdded, gotDeleted, resp.GetAddedWorkloads(), resp.GetDeletedWorkloads(), prototext.Format(plan))
		}
		return
	}
}

// refuse makes an update that must be refused with want, and counts it.
func (w *seamsWorld) refuse(by *client.Conn, st *state.State, mask []string, expectedRevision *uint64, want error, what string) {
	w.t.Helper()
	up := &ankbase.UpdateStateRequest{NewState: rpc.CompleteStateToProto(&state.CompleteState{DesiredState: *st}), UpdateMask: mask}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rev, err := retryLeader(ctx, func() (*grapnelpb.RevisionResponse, error) {
		return by.Plan().Revision(ctx, &grapnelpb.RevisionRequest{})
	})
	if err != nil {
		w.t.Fatal(err)
	}
	if errors.Is(want, errs.ErrLocked) {
		// An update that changes nothing changes no locked object, and
		// is accepted (a drawn change may leave the manifest as it was).
		plan, err := retryLeader(ctx, func() (*grapnelpb.PlanResponse, error) {
			return by.Plan().DryRun(ctx, &grapnelpb.PlanRequest{Update: up})
		})
		if err == nil && plan.GetAccepted() && !plan.GetChanged() {
			return
		}
	}
	_, err = retryLeader(ctx, func() (*grapnelpb.ApplyResponse, error) {
		return by.Plan().Apply(ctx, &grapnelpb.ApplyRequest{Update: up, ExpectedSeq: rev.GetRevision(), ExpectedRevision: expectedRevision})
	})
	if !errors.Is(err, want) {
		w.t.Fatalf("%s: want %v, got %v", what, want, err)
	}
	// Answered: the history holds it (checkHistory), whatever becomes
	// of the leader now.
	w.refused++
}

// retryLeader calls f until it gets past a leader change (no leader
// yet, not the leader, unavailable): such a call did nothing.
func retryLeader[R any](ctx context.Context, f func() (R, error)) (R, error) {
	for {
		r, err := f()
		if err == nil || !(errors.Is(err, errs.ErrNoLeader) || errors.Is(err, errs.ErrNotLeader) ||
			errors.Is(err, errs.ErrShuttingDown) || status.Code(err) == codes.Unavailable) {
			return r, err
		}
		select {
		case <-ctx.Done():
			return r, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// settle waits until every desired workload runs its current instance
// and its process has written its pid.
// before is the instances wanted before an update, read once a leader's
// store answers: a read between leaders answers nothing, and an update
// compared with nothing seems to add every instance there is.
func (w *seamsWorld) before() map[string]bool {
	w.t.Helper()
	var out map[string]bool
	testwait.For(w.t, 2*runWithin, func() bool {
		var ok bool
		out, ok, _ = w.currentParts()
		return ok
	}, "a leader's store to read the instances before the update from")
	return out
}

func (w *seamsWorld) settle() {
	w.t.Helper()
	testwait.For(w.t, 2*runWithin, func() bool {
		want, ok := w.current()
		if !ok {
			return false
		}
		all := true
		read(w.cl, func(st *state.Store) {
			for inst := range want {
				in, _ := state.ParseInstanceName(inst)
				s, has := st.States.Get(in)
				if !has || s.Short() != "Running(Ok)" {
					all = false
				}
			}
		})
		if !all {
			return false
		}
		pids := w.pids()
		for inst := range want {
			if !alive(pids[inst]) {
				return false
			}
		}
		return true
	}, "every desired workload Running(Ok) with a live process")
}

// check tests the invariants.
func (w *seamsWorld) check(when string) {
	w.t.Helper()
	w.checkRestarts(when)
	w.checkHistory(when)
	w.checkLocks(when)
	w.checkSecrets(when)
}

// checkRestarts: an instance that stayed wanted runs the same process.
// The instance name hashes the rendered config, so one whose config
// changed is another instance; one moved off an agent and back is a new
// one too (it was not wanted in between).
func (w *seamsWorld) checkRestarts(when string) {
	w.t.Helper()
	want, _ := w.current()
	pids := w.pids()
	for inst, pid := range w.runs {
		if !want[inst] {
			delete(w.runs, inst)
			continue
		}
		if pid > 0 && pids[inst] != pid {
			w.t.Fatalf("%s: instance %s was restarted (pid %d, now %d) although its rendered config did not change", when, inst, pid, pids[inst])
		}
	}
	for inst := range want {
		if w.runs[inst] == 0 {
			w.runs[inst] = pids[inst] // 0 until it has written it
		}
	}
}

// checkHistory: every accepted update through the Plan service is an
// Update transaction, every refusal a Rejected one (or counted in one),
// with the caller's plan-call requester. A refusal was answered only
// once an entry held it, so none may be missing, leader kills or not.
func (w *seamsWorld) checkHistory(when string) {
	w.t.Helper()
	updates, rejected := 0, 0
	testwait.For(w.t, runWithin, func() bool {
		updates, rejected = 0, 0
		id := w.cl.LeaderID()
		if id == "" {
			return false
		}
		f := w.cl.FSM(id)
		if f == nil {
			return false
		}
		f.Read(func(st *state.Store, _ uint64) {
			if st.History == nil {
				return
			}
			for _, tx := range st.History.Since(0, "", 0) {
				if !strings.HasSuffix(tx.Requester, "plan-call") {
					continue
				}
				switch tx.Kind {
				case state.TxUpdate:
					updates++
				case state.TxRejected:
					rejected += max(1, int(tx.Count))
				}
			}
		})
		return updates >= w.accepted && rejected >= w.refused
	}, "%s: the history to hold the test's %d updates and %d refusals through the Plan service (it holds %v)", when, w.accepted, w.refused,
		testwait.Lazy(func() string { return fmt.Sprintf("%d and %d: %s", updates, rejected, w.historyText()) }))
	if updates < w.accepted || rejected < w.refused {
		w.t.Fatalf("%s: the history holds %d updates and %d refusals through the Plan service; the test made %d and had %d refused",
			when, updates, rejected, w.accepted, w.refused)
	}
}

// checkLocks: each lock alice holds is listed as hers.
func (w *seamsWorld) checkLocks(when string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := retryLeader(ctx, func() (*grapnelpb.ListLocksResponse, error) {
		return w.bob.Locks().List(ctx, &grapnelpb.ListLocksRequest{})
	})
	if err != nil {
		w.t.Fatalf("%s: list locks: %v", when, err)
	}
	listed := map[string]string{}
	for _, l := range resp.GetLocks() {
		listed[l.GetObject()] = l.GetOwner()
	}
	for name := range w.locked {
		if o := listed["workload/"+name]; !strings.Contains(o, "alice") {
			w.t.Fatalf("%s: alice's lock of %s is gone (locks: %v)", when, name, listed)
		}
	}
	for obj := range listed {
		if !w.locked[strings.TrimPrefix(obj, "workload/")] {
			w.t.Fatalf("%s: %s is locked, but alice released it (locks: %v)", when, obj, listed)
		}
	}
}

// checkSecrets: no value the test ever set appears in a read, an event,
// a server, Raft or agent log, or a file under a replica's data
// directory. (The agent's run folder holds it by design, docs/secrets.md.)
func (w *seamsWorld) checkSecrets(when string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := w.alice.Request(ctx, &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{CompleteStateRequest: &ankbase.CompleteStateRequest{}}})
	if err != nil {
		if w.alice, err = w.alice.Reconnect(ctx); err != nil {
			w.t.Fatalf("%s: read: %v", when, err)
		}
		if cs, err = w.alice.Request(ctx, &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{CompleteStateRequest: &ankbase.CompleteStateRequest{}}}); err != nil {
			w.t.Fatalf("%s: read: %v", when, err)
		}
	}
	texts := map[string][]byte{"a read of the whole state": []byte(prototext.Format(cs)), "the events": []byte(w.events.String()), "the Raft log": []byte(w.raftLog.String())}
	for id, b := range w.serverLogs {
		texts["server "+id+"'s log"] = []byte(b.String())
	}
	for name, a := range w.agents {
		texts["agent "+name+"'s log"] = []byte(a.logs.String())
	}
	for what, b := range texts {
		for _, s := range w.secretsUsed {
			if bytes.Contains(b, []byte(s)) {
				w.t.Fatalf("%s: %s holds the secret value %s", when, what, s)
			}
		}
	}
	for _, id := range w.cl.IDs() {
		root := w.cl.Replica(id).DataDir
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			for _, s := range w.secretsUsed {
				if bytes.Contains(b, []byte(s)) {
					w.t.Fatalf("%s: %s holds the secret value %s", when, p, s)
				}
			}
			return nil
		})
	}
}

// historyText is the leader's history, one line per transaction, for a
// failure message.
func (w *seamsWorld) historyText() string {
	var b strings.Builder
	read(w.cl, func(st *state.Store) {
		if st.History == nil {
			return
		}
		for _, tx := range st.History.Since(0, "", 0) {
			fmt.Fprintf(&b, "\n  %d %s %s %s ×%d", tx.Seq, tx.Kind, tx.Requester, tx.Reason, tx.Count)
		}
	})
	return b.String()
}
