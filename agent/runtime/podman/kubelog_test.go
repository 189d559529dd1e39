package podman

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/state"
)

// Rendered manifests and options may hold secrets: the debug log of a
// podman-kube workload's calls names the subcommands only, and neither
// the manifest nor the options reach podman's command line through the
// config volume's label.
func TestKubeLogsNoSecrets(t *testing.T) {
	const secret = "hunter2-secret"
	argsLog := t.TempDir() + "/args"
	r := fakePodman(t, `echo "$@" >> `+argsLog+`
case "$*" in
*"kube play"*) cat >/dev/null; printf 'Pod:\n0123abcd\nContainer:\n4567\n' ;;
*"volume inspect"*) echo "Error: inspecting object: no such volume" >&2; exit 125 ;;
*"kube down"*) cat >/dev/null ;;
esac`)
	logs := &syncbuf.Buffer{}
	r.log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	k := NewKube(r)
	manifest := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: " + secret + "\n---\n" + kubePod
	cfg := "generalOptions: [--log-level=debug]\nplayOptions: [--creds, 'user:" + secret + "']\nmanifest: |\n" + indent(manifest)
	s := runtime.Spec{
		Instance: state.NewInstanceName("w", "a", cfg),
		Workload: &state.Workload{Agent: "a", Runtime: KubeName, RuntimeConfig: cfg},
	}
	id, err := k.Create(context.Background(), s)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := k.Delete(context.Background(), id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if strings.Contains(logs.String(), secret) {
		t.Fatalf("the debug log holds the secret:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "call=\"kube play\"") || !strings.Contains(logs.String(), "call=\"kube down\"") {
		t.Fatalf("the debug log does not name the calls:\n%s", logs.String())
	}
	// Only `kube play` itself carries playOptions, as upstream; nothing
	// else does, and the manifest never does (it goes on stdin).
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, argsLog)), "\n") {
		if strings.Contains(line, secret) && !strings.Contains(line, "kube play --quiet --creds") {
			t.Fatalf("podman called with the secret: %s", line)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
