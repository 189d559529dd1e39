package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/runtime/process"
	"github.com/grapnel-io/grapnel/state"
)

// quietLog drops the process runtime's log lines: the harness only reads
// records and ends leftovers.
var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// HostIDs returns what identifies each running workload on its host, by
// instance name: "pid N" for a process (from the process runtime's record
// in the agent's run folder), "container ID" for a podman container. A
// workload restarted in between has another one.
func HostIDs(agents []*Agent, ws []state.WorkloadState) (map[string]string, error) {
	byName := map[string]*Agent{}
	for _, a := range agents {
		byName[a.Name] = a
	}
	out := map[string]string{}
	for _, s := range ws {
		a := byName[s.Instance.AgentName]
		if a == nil || s.State.State != state.StateRunning {
			continue
		}
		rt, err := process.New(process.Config{RunFolder: a.RunFolder, Logger: quietLog})
		if err != nil {
			return nil, err
		}
		if pid, err := rt.PID(runtime.ID(s.Instance.String())); err == nil {
			out[s.Instance.String()] = fmt.Sprintf("pid %d", pid)
			continue
		}
		cid, err := inspectID(s.Instance.String())
		if err != nil {
			return nil, fmt.Errorf("%s: neither a process record nor a container: %w", s.Instance, err)
		}
		out[s.Instance.String()] = "container " + cid
	}
	return out, nil
}

// inspectID is the id of the container named name. podman's own state
// database can refuse a call made while another podman command holds it
// (exit 125, seen once in CI with the agent's polls running); such a
// refusal is tried again, three times at most.
func inspectID(name string) (string, error) {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		var stderr strings.Builder
		cmd := exec.Command("podman", "inspect", "--format", "{{.Id}}", name)
		cmd.Stderr = &stderr
		var out []byte
		if out, err = cmd.Output(); err == nil {
			return strings.TrimSpace(string(out)), nil
		}
		err = fmt.Errorf("podman inspect: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return "", err
}

// Restarted lists the instances whose host id differs between two
// HostIDs results (or that vanished).
func Restarted(before, after map[string]string) []string {
	var out []string
	for inst, id := range before {
		if after[inst] != id {
			out = append(out, fmt.Sprintf("%s: %s → %q", inst, id, after[inst]))
		}
	}
	return out
}

// RemoveWorkloads ends what the agents left running: workloads outlive
// their agents by design, so a test or benchmark ends them itself.
func RemoveWorkloads(agents []*Agent) {
	for _, a := range agents {
		if rt, err := process.New(process.Config{RunFolder: a.RunFolder, Logger: quietLog}); err == nil {
			found, _ := rt.List(context.Background(), a.Name)
			for _, f := range found {
				_ = rt.Delete(context.Background(), f.ID)
			}
		}
		if !a.Podman {
			// Containers are found by the agent's name alone, and another
			// test's agent may have the same name and run podman now.
			continue
		}
		out, _ := exec.Command("podman", "ps", "-aq", "--filter", "label=agent="+a.Name).Output()
		for _, id := range strings.Fields(string(out)) {
			_ = exec.Command("podman", "rm", "-f", "-t", "0", id).Run()
		}
	}
}
