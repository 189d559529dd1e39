package podman

import (
	"fmt"
	"strings"

	"github.com/grapnel-io/grapnel/agent/runtime"
)

// Labels every container of Grapnel carries, as Ankaios sets them: List
// finds an agent's containers by labelAgent and recovers the instance
// from labelName, whatever the container itself is called.
const (
	labelName  = "name"
	labelAgent = "agent"
)

// runArgs builds the command line of `podman run` for one instance:
//
//	<generalOptions> run --detach --name <instance> <commandOptions>
//	<mounts> --label name=<instance> --label agent=<agent> <image> <commandArgs>
//
// commandOptions come after --name so that a workload may choose its own
// container name (Ankaios allows it); the labels come after commandOptions
// so that a workload cannot change the ones List depends on.
func runArgs(c runConfig, s runtime.Spec) ([]string, error) {
	inst := s.Instance.String()
	var args []string
	args = append(args, c.GeneralOptions...)
	args = append(args, "run", "--detach", "--name", inst)
	args = append(args, c.CommandOptions...)
	for i, m := range s.Mounts {
		arg, err := bindMount(m.HostPath, m.MountPoint, true)
		if err != nil {
			return nil, fmt.Errorf("files[%d]: %w", i, err)
		}
		args = append(args, arg)
	}
	if s.ControlInterface != "" {
		// Read-write: the workload opens the FIFOs for writing too.
		arg, err := bindMount(s.ControlInterface, runtime.ContainerControlInterface, false)
		if err != nil {
			return nil, fmt.Errorf("control interface: %w", err)
		}
		args = append(args, arg)
	}
	args = append(args,
		"--label", labelName+"="+inst,
		"--label", labelAgent+"="+s.Instance.AgentName,
		c.Image)
	args = append(args, c.CommandArgs...)
	return args, nil
}

// bindMount is one --mount option. Paths with a comma are refused: the
// option is a comma-separated list that podman does not unquote.
func bindMount(host, target string, readonly bool) (string, error) {
	for _, p := range []string{host, target} {
		if strings.Contains(p, ",") {
			return "", runtime.BadConfig(p, "contains a comma, which podman's --mount option cannot express")
		}
	}
	arg := "--mount=type=bind,source=" + host + ",destination=" + target
	if readonly {
		arg += ",readonly=true"
	}
	return arg, nil
}
