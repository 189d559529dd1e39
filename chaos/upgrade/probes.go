package upgrade

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// The request kinds the probes send (the writers send UpdateState writes
// and deletes and complete state reads of their keys).
const (
	ProbeStateMasks = "complete-state-masks" // get state with field masks
	ProbeWorkloads  = "get-workloads"        // get workloads (states of every instance)
	ProbeDryRun     = "dry-run"              // apply --dry-run (Plan.DryRun)
	ProbeApply      = "apply"                // apply (Plan.Apply / UpdateState)
	ProbeLocks      = "locks"                // a lock held across the step: list, release, take again
	ProbeLogs       = "logs"                 // logs of a process workload
	ProbeEvents     = "events"               // an events subscription gets an event
	ProbeMembers    = "cluster-members"      // cluster members
	ProbeHistory    = "history"              // the transaction history
	ProbeProblems   = "problems"             // the problems view
	ProbeProxied    = "proxied-state"        // complete state on an Ankaios stream a follower proxies
)

// probeTimeout bounds one CLI call.
const probeTimeout = 15 * time.Second

// lockHeld is a lock a probe took, checked at the next step.
type lockHeld struct {
	step  int
	owner string
}

// prober sends every request kind and remembers the locks it holds.
type prober struct {
	s     *system
	locks map[Release]lockHeld
}

// probeWorkload is the workload the dry-runs and applies of CLI rel
// change; lockObject the one its lock holds.
func probeWorkload(rel Release) string { return "upg_probe_" + string(rel) }
func lockObject(rel Release) string    { return "workload/upg_lock_" + string(rel) }

// run sends every kind through the CLI of both releases and a complete
// state request through every replica as an Ankaios client.
func (p *prober) run(ctx context.Context, step int) []Probe {
	var out []Probe
	for _, rel := range []Release{Old, New} {
		via := "cli " + string(rel)
		probe := func(kind string, f func() error) {
			t := time.Now()
			err := f()
			pr := Probe{Kind: kind, Via: via, OK: err == nil, Took: time.Since(t)}
			if err != nil {
				pr.Detail = err.Error()
			}
			out = append(out, pr)
		}
		probe(ProbeStateMasks, func() error { return p.stateMasks(ctx, rel) })
		probe(ProbeWorkloads, func() error { return p.workloads(ctx, rel) })
		probe(ProbeDryRun, func() error { return p.dryRun(ctx, rel, step) })
		probe(ProbeApply, func() error { return p.apply(ctx, rel, step) })
		probe(ProbeLocks, func() error { return p.lock(ctx, rel, step) })
		probe(ProbeLogs, func() error { return p.logs(ctx, rel) })
		probe(ProbeEvents, func() error { return p.events(ctx, rel) })
		probe(ProbeMembers, func() error { return p.members(ctx, rel) })
		probe(ProbeHistory, func() error { _, err := p.s.cli(ctx, rel, probeTimeout, "history", "-o", "json"); return err })
		probe(ProbeProblems, func() error { _, err := p.s.cli(ctx, rel, probeTimeout, "get", "problems"); return err })
	}
	for i, r := range p.s.g.Replicas {
		t := time.Now()
		err := p.proxied(ctx, i)
		pr := Probe{Kind: ProbeProxied, Via: "ankaios client on " + p.s.replicaName(i), OK: err == nil, Took: time.Since(t)}
		if err != nil {
			pr.Detail = fmt.Sprintf("%s: %v", r.Addr, err)
		}
		out = append(out, pr)
	}
	return out
}

// stateMasks reads two masked parts of the complete state and checks
// both came back, and nothing unasked.
func (p *prober) stateMasks(ctx context.Context, rel Release) error {
	wl, agent := "upg_a1", p.s.agents[0].Name
	out, err := p.s.cli(ctx, rel, probeTimeout, "get", "state", "-o", "json", "desiredState.workloads."+wl, "workloadStates."+agent)
	if err != nil {
		return err
	}
	var cs struct {
		DesiredState struct {
			Workloads map[string]any `json:"workloads"`
		} `json:"desiredState"`
		WorkloadStates map[string]any `json:"workloadStates"`
	}
	if err := json.Unmarshal([]byte(jsonPart(out)), &cs); err != nil {
		return fmt.Errorf("get state -o json: %v in %q", err, shorten(out, 300))
	}
	switch {
	case cs.DesiredState.Workloads[wl] == nil:
		return fmt.Errorf("masked workload %s missing: %s", wl, shorten(out, 300))
	case len(cs.DesiredState.Workloads) != 1:
		return fmt.Errorf("mask desiredState.workloads.%s returned %d workloads", wl, len(cs.DesiredState.Workloads))
	case cs.WorkloadStates[agent] == nil:
		return fmt.Errorf("masked workload states of %s missing: %s", agent, shorten(out, 300))
	}
	return nil
}

// jsonPart drops what the CLI prints before the JSON (a revision comment
// goes to stderr, which CombinedOutput mixes in).
func jsonPart(out string) string {
	if i := strings.IndexAny(out, "{["); i >= 0 {
		return out[i:]
	}
	return out
}

// workloads lists the workloads and checks every kept one is Running.
func (p *prober) workloads(ctx context.Context, rel Release) error {
	out, err := p.s.cli(ctx, rel, probeTimeout, "get", "workloads")
	if err != nil {
		return err
	}
	for wl := range p.s.want {
		found := false
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) > 0 && f[0] == wl {
				found = true
				if !strings.Contains(l, "Running") {
					return fmt.Errorf("%s not Running: %q", wl, strings.TrimSpace(l))
				}
			}
		}
		if !found {
			return fmt.Errorf("%s not listed:\n%s", wl, shorten(out, 600))
		}
	}
	return nil
}

// manifest writes a manifest of the probe workload of rel (unscheduled,
// so no agent runs it) and returns its path.
func (p *prober) manifest(rel Release, step int, tag string) (string, error) {
	path := filepath.Join(p.s.dir, fmt.Sprintf("probe-%s-%d-%s.yaml", rel, step, tag))
	m := fmt.Sprintf("apiVersion: v1\nworkloads:\n  %s:\n    runtime: process\n    agent: \"\"\n    restartPolicy: NEVER\n    runtimeConfig: |\n      command: /bin/sleep\n      args: [\"%d\"]\n",
		probeWorkload(rel), 1000+step)
	return path, os.WriteFile(path, []byte(m), 0o644)
}

// dryRun plans a change of the probe workload and checks the plan names it.
func (p *prober) dryRun(ctx context.Context, rel Release, step int) error {
	path, err := p.manifest(rel, step, "dry")
	if err != nil {
		return err
	}
	out, err := p.s.cli(ctx, rel, probeTimeout, "apply", "--dry-run", "-o", "json", path)
	if err != nil {
		return err
	}
	if !strings.Contains(out, probeWorkload(rel)) {
		return fmt.Errorf("the plan does not name %s:\n%s", probeWorkload(rel), shorten(out, 600))
	}
	return nil
}

// apply makes the change and reads it back.
func (p *prober) apply(ctx context.Context, rel Release, step int) error {
	path, err := p.manifest(rel, step, "apply")
	if err != nil {
		return err
	}
	if _, err := p.s.cli(ctx, rel, probeTimeout, "--no-wait", "apply", path); err != nil {
		return err
	}
	out, err := p.s.cli(ctx, rel, probeTimeout, "get", "state", "-o", "json", "desiredState.workloads."+probeWorkload(rel))
	if err != nil {
		return err
	}
	if want := fmt.Sprintf("%d", 1000+step); !strings.Contains(out, want) {
		return fmt.Errorf("applied args [%s] not read back: %s", want, shorten(out, 400))
	}
	return nil
}

var lockedBy = regexp.MustCompile(`locked (\S+) by (\S+) until`)

// lock checks the lock CLI rel took at an earlier step: still listed
// with the owner it had, released by its owner; then takes it again for
// the next step.
func (p *prober) lock(ctx context.Context, rel Release, step int) error {
	obj := lockObject(rel)
	var errs []error
	if held, ok := p.locks[rel]; ok {
		owner, listed, err := p.listed(ctx, rel, obj)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !listed:
			errs = append(errs, fmt.Errorf("the lock on %s taken at step %d (owner %s) is not listed", obj, held.step, held.owner))
		case owner != held.owner:
			errs = append(errs, fmt.Errorf("the lock on %s taken at step %d by %s is listed with owner %s", obj, held.step, held.owner, owner))
		}
		if _, err := p.s.cli(ctx, rel, probeTimeout, "unlock", obj); err != nil {
			errs = append(errs, fmt.Errorf("its owner could not release the lock taken at step %d: %w", held.step, err))
			// Released by force, so that the next step starts clean.
			if _, ferr := p.s.cli(ctx, New, probeTimeout, "unlock", "--force", obj); ferr != nil {
				errs = append(errs, fmt.Errorf("unlock --force: %w", ferr))
			}
		}
		delete(p.locks, rel)
	}
	out, err := p.s.cli(ctx, rel, probeTimeout, "lock", obj, "--ttl", "30m", "--reason", fmt.Sprintf("upgrade test step %d", step))
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	m := lockedBy.FindStringSubmatch(out)
	if m == nil {
		return errors.Join(append(errs, fmt.Errorf("lock printed %q", strings.TrimSpace(out)))...)
	}
	p.locks[rel] = lockHeld{step: step, owner: m[2]}
	if owner, listed, err := p.listed(ctx, rel, obj); err != nil || !listed || owner != m[2] {
		errs = append(errs, fmt.Errorf("the lock just taken by %s: listed %v with owner %q (%v)", m[2], listed, owner, err))
	}
	return errors.Join(errs...)
}

// listed reads the locks and returns the owner of obj's.
func (p *prober) listed(ctx context.Context, rel Release, obj string) (string, bool, error) {
	out, err := p.s.cli(ctx, rel, probeTimeout, "get", "locks", "-o", "json")
	if err != nil {
		return "", false, err
	}
	var v any
	if err := json.Unmarshal([]byte(jsonPart(out)), &v); err != nil {
		return "", false, fmt.Errorf("get locks -o json: %v in %q", err, shorten(out, 300))
	}
	var owner string
	var found bool
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if x["object"] == obj {
				found = true
				owner, _ = x["owner"].(string)
				return
			}
			for _, y := range x {
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	walk(v)
	return owner, found, nil
}

// logs reads the last lines of the ticking workload on the first agent.
func (p *prober) logs(ctx context.Context, rel Release) error {
	out, err := p.s.cli(ctx, rel, probeTimeout, "logs", "-t", "3", "upg_tick1")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "tick") {
		return fmt.Errorf("no tick line in %q", shorten(out, 300))
	}
	return nil
}

// members lists the replicas and checks every one is there.
func (p *prober) members(ctx context.Context, rel Release) error {
	out, err := p.s.cli(ctx, rel, probeTimeout, "cluster", "members")
	if err != nil {
		return err
	}
	for _, r := range p.s.g.Replicas {
		if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(r.Name) + `\s`).MatchString(out) {
			return fmt.Errorf("%s not listed:\n%s", r.Name, shorten(out, 600))
		}
	}
	return nil
}

// eventsBound is how long an events subscription may wait for its first
// event: the writers change the subscribed workloads several times a
// second.
const eventsBound = 10 * time.Second

// events subscribes to the writers' workloads and waits for an event.
func (p *prober) events(ctx context.Context, rel Release) error {
	ctx, cancel := context.WithTimeout(ctx, eventsBound+5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.s.builds[rel].CLI(), append(p.s.cliBase(), "get", "events", "-o", "json", "desiredState.workloads")...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) != "" {
				got <- sc.Text()
				break
			}
		}
		close(got)
		for sc.Scan() {
		}
	}()
	var res error
	select {
	case l, ok := <-got:
		if !ok {
			res = fmt.Errorf("the subscription ended without an event: %s", strings.TrimSpace(stderr.String()))
		}
		_ = l
	case <-time.After(eventsBound):
		res = fmt.Errorf("no event within %v: %s", eventsBound, strings.TrimSpace(stderr.String()))
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	return res
}

// proxied opens a CLI stream at replica i as an unmodified Ankaios
// client does (not leader-aware, so a follower proxies it to the leader)
// and asks for a masked complete state.
func (p *prober) proxied(ctx context.Context, i int) error {
	creds := insecure.NewCredentials()
	if p.s.pki != nil {
		tc, err := rpc.ClientTLSConfig(p.s.pki.Operator, rpc.ServerName)
		if err != nil {
			return err
		}
		creds = credentials.NewTLS(tc)
	}
	cc, err := grpc.NewClient(p.s.g.Replicas[i].Addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	st, err := wire.KindCLI.Open(ctx, cc)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_CommanderHello{
		CommanderHello: &grpcapi.CommanderHello{ProtocolVersion: rpc.ProtocolVersion}}}); err != nil {
		_, rerr := st.Recv()
		return fmt.Errorf("hello: %v (%v)", err, rerr)
	}
	req := &ankbase.Request{RequestId: "upgrade-probe", RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: []string{"desiredState.workloads.upg_a1"}}}}
	if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: req}}); err != nil {
		_, rerr := st.Recv()
		return fmt.Errorf("request: %v (%v)", err, rerr)
	}
	for {
		m, err := st.Recv()
		if err != nil {
			return fmt.Errorf("answer: %w", err)
		}
		r := m.GetResponse()
		if r == nil || r.GetRequestId() != req.RequestId {
			continue
		}
		if e := r.GetError(); e != nil {
			return fmt.Errorf("answered with an error: %s", e.GetMessage())
		}
		if r.GetCompleteStateResponse().GetCompleteState().GetDesiredState().GetWorkloads().GetWorkloads()["upg_a1"] == nil {
			return fmt.Errorf("the answer lacks upg_a1: %v", r)
		}
		return nil
	}
}
