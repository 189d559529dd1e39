package powercycle

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/runtime/containerd"
	"github.com/grapnel-io/grapnel/agent/runtime/containerd/containerdtest"
	"github.com/grapnel-io/grapnel/state"
)

// One private containerd for the package's containerd tests, started on
// first use and stopped by TestMain.
var ctd struct {
	once sync.Once
	d    *containerdtest.Daemon
	why  string
}

func ctdDaemon() (*containerdtest.Daemon, string) {
	ctd.once.Do(func() {
		if ctd.why = containerdtest.Missing(); ctd.why != "" {
			return
		}
		d, err := containerdtest.Start()
		if err != nil {
			ctd.why = "cannot start containerd: " + err.Error()
			return
		}
		ctd.d = d
	})
	return ctd.d, ctd.why
}

func stopCtd() {
	if ctd.d != nil {
		ctd.d.Stop()
	}
}

// containerdRig is the containerd runtime on the package's private
// containerd, or nil when containerd is not set up (a failure with
// GRAPNEL_REQUIRE_CONTAINERD=1).
func containerdRig(t *testing.T) *rig {
	d, why := ctdDaemon()
	if d == nil {
		if os.Getenv(containerdtest.RequireEnv) == "1" {
			t.Fatalf("containerd is not usable and %s=1: %s", containerdtest.RequireEnv, why)
		}
		return nil
	}
	return &rig{
		name: containerd.Name,
		runtime: func(t *testing.T, boot string) runtime.Runtime {
			rt, err := containerd.New(containerd.Config{Address: d.Address, DataRoot: d.NerdctlRoot, CNINetconfPath: d.NetConf, StopGrace: time.Second, Logger: quiet(t)})
			if err != nil {
				t.Fatal(err)
			}
			return rt
		},
		config: func(script string) string {
			b, _ := json.Marshal(script)
			return "image: " + containerdtest.Image + "\ncommandArgs: [sh, -c, " + string(b) + "]\n"
		},
		hostID: func(t *testing.T, rt runtime.Runtime, inst state.InstanceName) string {
			id, err := rt.(*containerd.Runtime).ContainerID(context.Background(), inst)
			if err != nil {
				return ""
			}
			return "container " + id
		},
		// A power cut ends the task and containerd forgets it with its
		// state directory (a tmpfs): the container is left with neither
		// task nor recorded exit, as containerd's TestPowerCycle shows
		// for a whole daemon. Killing the task and deleting it behind
		// the runtime's back leaves the same.
		powerLoss: func(t *testing.T, rt runtime.Runtime, inst state.InstanceName) {
			id, err := rt.(*containerd.Runtime).ContainerID(context.Background(), inst)
			if err != nil {
				t.Fatal(err)
			}
			if out, err := d.Ctr("tasks", "kill", "--signal", "SIGKILL", id); err != nil {
				t.Fatalf("ctr tasks kill %s: %v: %s", id, err, out)
			}
			if out, err := d.Ctr("tasks", "delete", "--force", id); err != nil {
				t.Fatalf("ctr tasks delete %s: %v: %s", id, err, out)
			}
		},
		inPlace: true,
	}
}
