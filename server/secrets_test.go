package server

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/server/secrets"
	"github.com/grapnel-io/grapnel/state"
)

func secretManifest(password string) string {
	return `apiVersion: v1
workloads:
  app:
    agent: agent_A
    runtime: podman
    configs: {db: secret_db}
    runtimeConfig: |
      image: app
      commandOptions: ["-e", "PW={{db.password}}", "-e", "USER={{db.user}}"]
    files:
      - mountPoint: /etc/app/pw
        data: "{{db.password}}"
configs:
  secret_db:
    user: app-user
    password: ` + password + `
`
}

// The leader seals before it plans (issue 16 point 6): the command, the
// rendering and its instance id hold tokens only; the agent's message
// carries the value; the same value or the mask again is no change; a
// dry-run shows the mask; without a key file the update is refused.
func TestSecretsAreSealedBeforePlanning(t *testing.T) {
	keys, err := secrets.ParseKeyring([]byte("k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="))
	if err != nil {
		t.Fatal(err)
	}
	st := state.NewStore()
	st.AgentConnected("agent_A", nil)
	l := planLeader(st, state.DefaultLimits())
	l.s.cfg.Secrets = keys

	p, err := l.planUpdate(replaceAll(t, secretManifest("hunter2")), plan.Admission{}, plan.Guard{})
	if err != nil {
		t.Fatal(err)
	}
	db := p.Update.PutConfigs["secret_db"].(map[string]any)
	if !secrets.IsToken(db["password"].(string)) || !secrets.IsToken(db["user"].(string)) {
		t.Fatalf("the command holds %v", db)
	}
	if len(p.Added) != 1 {
		t.Fatalf("added %v", p.Added)
	}
	rendered := p.Added[0]
	if strings.Contains(rendered.Workload.RuntimeConfig, "hunter2") || !strings.Contains(rendered.Workload.RuntimeConfig, db["password"].(string)) {
		t.Fatalf("the rendering is %q", rendered.Workload.RuntimeConfig)
	}
	if rendered.Instance != state.NewInstanceName("app", "agent_A", rendered.Workload.RuntimeConfig) {
		t.Fatal("the instance id is not the hash of the sealed rendering")
	}
	sent := planDispatch(l.s, st, p).perAgent["agent_A"].GetAddedWorkloads()[0].GetWorkload().GetRuntimeConfig()
	if !strings.Contains(sent, `"-e", "PW=hunter2", "-e", "USER=app-user"`) {
		t.Fatalf("the agent gets %q", sent)
	}
	if f := planDispatch(l.s, st, p).perAgent["agent_A"].GetAddedWorkloads()[0].GetWorkload().GetFiles().GetFiles(); len(f) != 1 || f[0].GetData() != "hunter2" {
		t.Fatalf("the agent gets the files %v", f)
	}
	if strings.Contains(rendered.Workload.RuntimeConfig, "hunter2") || strings.Contains(rendered.Workload.Files[0].Content, "hunter2") {
		t.Fatal("revealing changed the stored rendering")
	}
	st.ApplyDesired(&p.Update, 1)

	for _, again := range []string{secretManifest("hunter2"), strings.Replace(secretManifest(""), "  secret_db:\n    user: app-user\n    password: \n", "  secret_db: "+secrets.Mask+"\n", 1)} {
		p, err := l.planUpdate(replaceAll(t, again), plan.Admission{}, plan.Guard{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Changed {
			t.Fatalf("an update with the same value or the mask changes %v", p.Update)
		}
	}

	resp := l.dryRun(replaceAll(t, secretManifest("hunter3")), "", plan.Admission{})
	text := prototext.Format(resp)
	if !resp.GetChanged() || strings.Contains(text, "hunter") || strings.Contains(text, "gsec:") || !strings.Contains(text, "PW="+secrets.Mask) {
		t.Fatalf("the dry-run shows:\n%s", text)
	}

	l.s.cfg.Secrets = nil
	if _, err := l.planUpdate(replaceAll(t, secretManifest("hunter3")), plan.Admission{}, plan.Guard{}); err == nil ||
		!strings.Contains(err.Error(), "desiredState.configs.secret_db") || !strings.Contains(err.Error(), "--secret-key-file") {
		t.Fatalf("without a key file: %v", err)
	}
}

// A dry-run of an update that changes a secret shows the instance names
// the update then creates: the leader seals in the scope of the update
// (its revision and requester), not with a random nonce each time (D7).
// Another requester's plan seals to other tokens, so an instance name
// tells nobody else whether their guess is the value.
func TestSecretsDryRunPredictsTheInstanceName(t *testing.T) {
	keys, err := secrets.ParseKeyring([]byte("k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="))
	if err != nil {
		t.Fatal(err)
	}
	st := state.NewStore()
	st.AgentConnected("agent_A", nil)
	l := planLeader(st, state.DefaultLimits())
	l.s.cfg.Secrets = keys
	p, err := l.planUpdate(replaceAll(t, secretManifest("hunter2")), plan.Admission{}, plan.Guard{})
	if err != nil {
		t.Fatal(err)
	}
	st.ApplyDesired(&p.Update, 1)

	instance := func(owner string) string {
		t.Helper()
		resp := l.dryRun(replaceAll(t, secretManifest("hunter3")), owner, plan.Admission{})
		if len(resp.GetWorkloads()) != 1 || resp.GetWorkloads()[0].GetInstance() == "" {
			t.Fatalf("the dry-run plans %v", resp.GetWorkloads())
		}
		return resp.GetWorkloads()[0].GetInstance()
	}
	planned := instance("alice")
	if again := instance("alice"); again != planned {
		t.Fatalf("two dry-runs name %s and %s", planned, again)
	}
	applied, err := l.planUpdate(replaceAll(t, secretManifest("hunter3")), plan.Admission{}, plan.Guard{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if len(applied.Added) != 1 || applied.Added[0].Instance.String() != planned {
		t.Fatalf("the dry-run named %s, the update adds %v", planned, applied.Added)
	}
	if other := instance("bob"); other == planned {
		t.Fatalf("bob's plan seals alice's value to the same token: %s", other)
	}
}
