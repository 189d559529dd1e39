package server

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/grapnel-io/grapnel/server/secrets"
)

// Requirement (issue 30 point 5, D8): a watcher of desiredState.configs
// gets an event when a secret config item changes in place, as for any
// other item, and the event shows the mask, never the value.
func TestEventsOnSecretConfigChange(t *testing.T) {
	keys, err := secrets.ParseKeyring([]byte("k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="))
	if err != nil {
		t.Fatal(err)
	}
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.Secrets = keys })
	cli := ts.cli()
	id := subscribe(cli, "desiredState.configs")
	const path = "desiredState.configs.secret_db"
	for i, pw := range []string{"Hunter2pw", "N3wS3cr3t"} {
		if r := cli.update(manifest(t, secretManifest(pw)), "desiredState"); r.GetError() != nil {
			t.Fatalf("update %d: %v", i, r.GetError())
		}
		ev := nextEvent(cli, id)
		fields := ev.GetAlteredFields().GetUpdatedFields()
		if i == 0 {
			fields = ev.GetAlteredFields().GetAddedFields()
		}
		if !slices.Contains(fields, path) {
			t.Fatalf("update %d: altered fields %v lack %s", i, ev.GetAlteredFields(), path)
		}
		text := prototext.Format(ev)
		if strings.Contains(text, pw) || strings.Contains(text, "app-user") {
			t.Fatalf("update %d: the event holds the value: %s", i, text)
		}
		if !strings.Contains(text, secrets.Mask) {
			t.Fatalf("update %d: the event does not show the mask: %s", i, text)
		}
	}
}
