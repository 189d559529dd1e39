package workloadpolicy

import (
	"fmt"

	"github.com/grapnel-io/grapnel/state"
)

// The runtimes the policy reads. A workload of another runtime has no
// settings: no agent runs it.
const (
	RuntimeProcess    = "process"
	RuntimePodman     = "podman"
	RuntimePodmanKube = "podman-kube"
	RuntimeContainerd = "containerd"
)

// Inspect reads the security-relevant settings of a workload's rendered
// runtimeConfig. A runtimeConfig it cannot read is a *ParseError naming
// the field; the runtime refuses it as well.
func Inspect(runtime, runtimeConfig string) (*Profile, error) {
	switch runtime {
	case RuntimeProcess:
		return inspectProcess(runtimeConfig)
	case RuntimePodman:
		return inspectPodman(runtimeConfig)
	case RuntimePodmanKube:
		return inspectKube(runtimeConfig)
	case RuntimeContainerd:
		return inspectContainerd(runtimeConfig)
	}
	return &Profile{}, nil
}

// UIDRange is the agent's range of workload uids: each belongs to one
// workload (agent/runtime/process).
type UIDRange struct{ First, Last uint32 }

// Contains reports whether uid is in the range; the zero range holds none.
func (r UIDRange) Contains(uid int64) bool {
	return r != UIDRange{} && uid >= int64(r.First) && uid <= int64(r.Last)
}

// Policy is one agent's or the server's admission policy.
type Policy struct {
	Level Level
	// UIDs is the agent's workload uid range: no container may run as a
	// uid in it (--user, runAsUser), at any level, since each belongs to
	// a process workload. The server knows no agent's range and leaves
	// it zero.
	UIDs UIDRange
	// Owner names whose policy it is in a refusal: "the
	// --workload-policy of agent 'agent_A'", "the servers'
	// --workload-policy".
	Owner string
	// PassUnreadable admits a runtimeConfig the policy cannot read. The
	// server sets it: the runtime refuses such a config on the agent,
	// which names the field (as before there was a policy), and the
	// agent's own check reads the text with its secrets opened.
	PassUnreadable bool
}

// Check returns nil when the policy admits the workload, else a
// *Refusal naming the first setting it refuses, its field below path
// (the workload's path, "desiredState.workloads.NAME", or "" on the
// agent), the reason and the level. A runtimeConfig the policy cannot
// read is refused below privileged (the runtime refuses it anyway).
func (p Policy) Check(path, runtime, runtimeConfig string) error {
	prof, err := Inspect(runtime, runtimeConfig)
	if err != nil {
		if p.Level == Privileged || p.PassUnreadable {
			return nil
		}
		pe := err.(*ParseError)
		return p.refusal(path, pe.Field, pe.Reason+"; the workload policy reads only what the runtime reads", Baseline)
	}
	return p.CheckProfile(path, prof)
}

// CheckProfile is Check on a profile already read.
func (p Policy) CheckProfile(path string, prof *Profile) error {
	for _, s := range prof.Settings {
		if p.UIDs.Contains(s.uid) {
			return p.refusal(path, s.Field, fmt.Sprintf("%s names uid %d, which is in the agent's workload uid range %d-%d: each of those belongs to one process workload",
				quote(s.Key), s.uid, p.UIDs.First, p.UIDs.Last), never)
		}
		if !p.Level.Admits(s.Need) {
			return p.refusal(path, s.Field, s.Reason, s.Need)
		}
	}
	if p.Level == Restricted && len(prof.Unmet) > 0 {
		s := prof.Unmet[0]
		return p.refusal(path, s.Field, s.Reason, s.Need)
	}
	return nil
}

func (p Policy) refusal(path, field, reason string, need Level) *Refusal {
	if path != "" {
		field = path + "." + field
	}
	return &Refusal{Path: field, Reason: reason, Level: p.Level, Need: need, Owner: p.Owner}
}

// Refusal is a workload the policy does not admit. It unwraps to a
// *state.FieldError, so it is state.ErrInvalid and a dry-run names its
// field.
type Refusal struct {
	Path   string
	Reason string
	// Level is the policy's level, Need the least level that would admit
	// the setting.
	Level, Need Level
	Owner       string
}

func (r *Refusal) Error() string { return r.Path + ": " + r.detail() }

func (r *Refusal) detail() string {
	owner := r.Owner
	if owner == "" {
		owner = "the workload policy"
	}
	if r.Need == never {
		return fmt.Sprintf("%s; %s refuses it at every level", r.Reason, owner)
	}
	return fmt.Sprintf("%s; that needs the workload policy %s, and %s is %s", r.Reason, r.Need, owner, r.Level)
}

// Unwrap makes a refusal a *state.FieldError.
func (r *Refusal) Unwrap() error { return &state.FieldError{Path: r.Path, Reason: r.detail()} }
