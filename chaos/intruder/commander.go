package intruder

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/state/render"
)

// A commander may read and change the desired state; these attacks try
// what it still may not (issue 27, holes 2, 3, 5, 6 and 8).

// widening is one change of the victim a commander may not make.
type widening struct {
	what string
	// change turns the victim's workload into the widened one.
	change func(w *ankbase.Workload)
	// needs is what the refusal must say besides "Update rejected": the
	// level refuses --privileged before the widening check looks, so
	// that variant takes either.
	needs []string
}

// widenings are the changes tried: a runtime changed to podman with
// host privileges, the same change with only an image (which the
// servers' level admits, so that only the widening check can refuse
// it), and a process workload's user set to another workload's uid.
func widenings(c Config) []widening {
	podman := func(options string) func(w *ankbase.Workload) {
		return func(w *ankbase.Workload) {
			w.Runtime = ptr("podman")
			w.RuntimeConfig = ptr("image: docker.io/library/busybox:latest\n" + options + "commandArgs: [\"sleep\", \"86400\"]\n")
		}
	}
	return []widening{
		{what: "UpdateState as a commander: an existing workload's runtime to podman with --privileged and -v /:/host",
			change: podman("commandOptions: [\"--privileged\", \"-v\", \"/:/host\"]\n"), needs: []string{"privileged"}},
		{what: "UpdateState as a commander: an existing workload's runtime to podman (an image only, which the level admits)",
			change: podman(""), needs: []string{"may not widen", "runtime"}},
		{what: "UpdateState as a commander: a process workload's runtimeConfig user: set to another workload's uid",
			change: func(w *ankbase.Workload) {
				w.RuntimeConfig = ptr(strings.TrimRight(w.GetRuntimeConfig(), "\n") + fmt.Sprintf("\nuser: \"%d\"\n", c.OtherUID))
			}, needs: []string{"may not widen", "runtimeConfig.user"}},
	}
}

// wideningAttempts read the victim with the commander's certificate and
// send each widening of it, to the leader and to a follower (which
// proxies the update).
func wideningAttempts(ctx context.Context, c Config) []Attempt {
	var out []Attempt
	for _, t := range c.leaderAndFollower() {
		ws := widenings(c)
		fail := func(err error) {
			for _, w := range ws {
				out = append(out, Attempt{Target: t.Name, Channel: "policy", What: w.what, Accepted: true, Detail: "could not try: " + err.Error()})
			}
		}
		cc, err := dial(t.GRPC, c.Commander)
		if err != nil {
			fail(err)
			continue
		}
		s, err := openSession(ctx, cc, 3*attemptTimeout)
		if err != nil {
			cc.Close()
			fail(err)
			continue
		}
		victim, err := readWorkload(s, c.Victim)
		if err != nil {
			s.close()
			cc.Close()
			fail(err)
			continue
		}
		for _, w := range ws {
			a := Attempt{Target: t.Name, Channel: "policy", What: w.what}
			wl := proto.Clone(victim).(*ankbase.Workload)
			w.change(wl)
			r, err := s.request(putWorkload(c.Victim, wl))
			msg := r.GetError().GetMessage()
			switch {
			case err != nil:
				a.Accepted, a.Detail = true, "no answer: "+errText(err)
			case r.GetUpdateStateSuccess() != nil:
				a.Accepted, a.Detail = true, fmt.Sprintf("the update of %s succeeded", c.Victim)
			default:
				a.Accepted = !strings.HasPrefix(msg, "Update rejected") || !containsAny(msg, w.needs)
				a.Detail = msg
			}
			out = append(out, a)
		}
		s.close()
		cc.Close()
	}
	return out
}

func containsAny(s string, subs []string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// readWorkload reads workload name from the desired state.
func readWorkload(s *session, name string) (*ankbase.Workload, error) {
	r, err := s.request(&ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: []string{"desiredState.workloads." + name}}}})
	if err != nil {
		return nil, err
	}
	w := r.GetCompleteStateResponse().GetCompleteState().GetDesiredState().GetWorkloads().GetWorkloads()[name]
	if w == nil {
		return nil, fmt.Errorf("workload %s not in the desired state (answered %v)", name, r.GetResponseContent())
	}
	return w, nil
}

// putWorkload is an update that sets workload name to w.
func putWorkload(name string, w *ankbase.Workload) *ankbase.Request {
	return &ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{UpdateStateRequest: &ankbase.UpdateStateRequest{
		NewState: &ankbase.CompleteState{DesiredState: &ankbase.State{ApiVersion: "v1",
			Workloads: &ankbase.WorkloadMap{Workloads: map[string]*ankbase.Workload{name: w}}}},
		UpdateMask: []string{"desiredState.workloads." + name}}}}
}

// lockAttempts release, as a commander named as the operator is, the
// lock the operator holds: without force (only the owner may: the
// owner is role and name) and with force (cluster administration), to
// the leader and to a follower (which forwards the call).
func lockAttempts(ctx context.Context, c Config) []Attempt {
	var out []Attempt
	name := "?"
	if id, err := certName(c.Impostor); err == nil {
		name = id.Name
	}
	for _, t := range c.leaderAndFollower() {
		for _, force := range []bool{false, true} {
			a := Attempt{Target: t.Name, Channel: "locks",
				What: fmt.Sprintf("Locks.Unlock of the operator's lock as commander %s, without force", name)}
			want := codes.FailedPrecondition // LOCKED: another owner's lock
			if !force && c.LockClusterVersion < state.ClusterVersionRevocation {
				a.NotExpected = NotOwnerByRole
			}
			if force {
				a.What = fmt.Sprintf("Locks.Unlock of the operator's lock as commander %s, with force", name)
				want = codes.PermissionDenied // force is cluster administration
			}
			cc, err := dial(t.GRPC, c.Impostor)
			if err == nil {
				cctx, cancel := context.WithTimeout(ctx, attemptTimeout)
				_, err = grapnelpb.NewLocksClient(cc).Unlock(cctx, &grapnelpb.UnlockRequest{Objects: []string{c.Lock}, Force: force})
				cancel()
				cc.Close()
			}
			a.Accepted, a.Detail = !refusedWith(err, want), errText(err)
			out = append(out, a)
		}
	}
	return out
}

// logCampaignAttempt opens, on one CLI stream to the leader, follow-log
// campaigns of the victim's instance past the server's cap for one
// requester: the first Bounds.LogCampaigns must be accepted (else the
// test shows nothing) and the rest refused naming the cap. Closing the
// stream ends them all.
func logCampaignAttempt(ctx context.Context, c Config) Attempt {
	capN := c.Bounds.LogCampaigns
	a := Attempt{Target: c.Leader, Channel: "logs", What: "follow-log campaigns on one commander's CLI stream past --max-log-campaigns-per-requester"}
	if capN <= 0 {
		a.Skipped = "no cap configured"
		return a
	}
	t, _ := c.target(c.Leader)
	cc, err := dial(t.GRPC, c.Commander)
	if err != nil {
		a.Accepted, a.Detail = true, "could not try: "+err.Error()
		return a
	}
	defer cc.Close()
	s, err := openSession(ctx, cc, 3*attemptTimeout)
	if err != nil {
		a.Accepted, a.Detail = true, "could not try: "+errText(err)
		return a
	}
	defer s.close()
	inst, err := instanceOf(s, c.Victim)
	if err != nil {
		a.Accepted, a.Detail = true, "could not try: "+err.Error()
		return a
	}
	accepted, refused := 0, 0
	var last string
	for i := range capN + 2 {
		r, err := s.request(&ankbase.Request{RequestContent: &ankbase.Request_LogsRequest{LogsRequest: &ankbase.LogsRequest{
			WorkloadNames: []*ankbase.WorkloadInstanceName{inst}, Follow: ptr(true)}}})
		switch {
		case err != nil:
			a.Accepted, a.Detail = true, fmt.Sprintf("campaign %d: no answer: %s", i+1, errText(err))
			return a
		case len(r.GetLogsRequestAccepted().GetWorkloadNames()) > 0:
			accepted++
		case strings.Contains(r.GetError().GetMessage(), "--max-log-campaigns-per-requester"):
			refused++
			last = r.GetError().GetMessage()
		default:
			a.Accepted, a.Detail = true, fmt.Sprintf("campaign %d answered %v", i+1, r.GetResponseContent())
			return a
		}
	}
	a.Accepted = accepted != capN || refused != 2
	a.Detail = fmt.Sprintf("%d accepted, %d refused (cap %d): %s", accepted, refused, capN, last)
	return a
}

// instanceOf finds an instance of workload in the workload states.
func instanceOf(s *session, workload string) (*ankbase.WorkloadInstanceName, error) {
	r, err := s.request(&ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: []string{"workloadStates"}}}})
	if err != nil {
		return nil, err
	}
	for agent, byName := range r.GetCompleteStateResponse().GetCompleteState().GetWorkloadStates().GetAgentStateMap() {
		for id := range byName.GetWlNameStateMap()[workload].GetIdStateMap() {
			return &ankbase.WorkloadInstanceName{WorkloadName: workload, AgentName: agent, Id: id}, nil
		}
	}
	return nil, fmt.Errorf("no instance of %s in the workload states", workload)
}

// The render bomb: each workload's template loops bombInner times inside
// bombOuter, within the per-template limit; together they exceed the
// request's budget.
const (
	bombOuter = 400
	bombInner = 500
	bombKey   = "intruder_bomb"
)

// renderBomb is the dry-run's desired state: n workloads, each small,
// and the one config item they loop over.
func renderBomb(n int) *state.State {
	list := func(k int) []any {
		l := make([]any, k)
		for i := range l {
			l[i] = fmt.Sprint(i)
		}
		return l
	}
	s := &state.State{APIVersion: state.APIVersion, Workloads: map[string]*state.Workload{},
		Configs: map[string]any{bombKey: map[string]any{"outer": list(bombOuter), "inner": list(bombInner)}}}
	for i := range n {
		s.Workloads[fmt.Sprintf("intruder_bomb_%02d", i)] = &state.Workload{Runtime: "process", Configs: map[string]string{"c": bombKey},
			RuntimeConfig: fmt.Sprintf("command: /bin/true\nargs: [\"%d\"{{#each c.outer}}{{#each ../c.inner}}{{/each}}{{/each}}]\n", i)}
	}
	return s
}

// bombSize is how many bomb workloads exceed a budget of steps: as many
// as it takes, measured with the servers' own renderer, and one more.
func bombSize(steps int) (int, error) {
	one := renderBomb(1)
	b := render.NewBudget(0, 0)
	for n, w := range one.Workloads {
		if _, _, err := render.New().WorkloadWithin(n, w, one.Configs, b); err != nil {
			return 0, err
		}
	}
	if b.Steps() == 0 {
		return 0, fmt.Errorf("a bomb workload takes no render steps")
	}
	return steps/b.Steps() + 2, nil
}

// renderBombAttempt sends the bomb as a commander's dry-run to the
// leader (issue 27, hole 6): it must be refused naming the budget. The
// campaign times an operator's reads on the leader meanwhile (Window).
func renderBombAttempt(ctx context.Context, c Config) Attempt {
	a := Attempt{Target: c.Leader, Channel: "render", What: WhatDryRun}
	if c.Bounds.RenderSteps <= 0 {
		a.Skipped = "no budget configured"
		return a
	}
	n, err := bombSize(c.Bounds.RenderSteps)
	if err != nil {
		a.Accepted, a.Detail = true, "could not try: "+err.Error()
		return a
	}
	bomb := renderBomb(n)
	cs, err := rpc.CompleteStateFromTree(state.Tree{"desiredState": bomb.ToTree()})
	if err != nil {
		a.Accepted, a.Detail = true, "could not try: "+err.Error()
		return a
	}
	mask := []string{"desiredState.configs." + bombKey}
	for _, name := range state.SortedKeys(bomb.Workloads) {
		mask = append(mask, "desiredState.workloads."+name)
	}
	t, _ := c.target(c.Leader)
	cc, err := dial(t.GRPC, c.Commander)
	if err != nil {
		a.Accepted, a.Detail = true, "could not try: "+err.Error()
		return a
	}
	defer cc.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	from := time.Now()
	plan, err := grapnelpb.NewPlanClient(cc).DryRun(cctx, &grapnelpb.PlanRequest{Update: &ankbase.UpdateStateRequest{NewState: cs, UpdateMask: mask}})
	a.Window = &Window{From: from, To: time.Now()}
	took := a.Window.To.Sub(from).Round(time.Millisecond)
	switch {
	case err != nil:
		a.Accepted, a.Detail = true, fmt.Sprintf("%d workloads: no plan after %v: %s", n, took, errText(err))
	case plan.GetAccepted():
		a.Accepted, a.Detail = true, fmt.Sprintf("%d workloads: the plan was accepted after %v", n, took)
	default:
		var msgs []string
		for _, r := range plan.GetRejections() {
			msgs = append(msgs, r.GetMessage())
		}
		all := strings.Join(msgs, "; ")
		a.Accepted = !strings.Contains(all, "max_render_steps_per_request")
		a.Detail = fmt.Sprintf("%d workloads, refused after %v: %s", n, took, all)
	}
	return a
}
