package gossipmeta

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, path, wantErr string
		wantLen             int
	}{
		{name: "no file, no encryption", path: ""},
		{name: "16-byte key with newline", path: write("k16", "MDEyMzQ1Njc4OWFiY2RlZg==\n"), wantLen: 16},
		{name: "missing", path: filepath.Join(dir, "nope"), wantErr: "--gossip-key-file: open"},
		{name: "not base64", path: write("bad", "%%%"), wantErr: "not base64"},
		{name: "wrong size", path: write("short", "YWJj"), wantErr: "the key has 3 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, err := ReadKeyFile(tc.path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(key) != tc.wantLen {
				t.Fatalf("key of %d bytes, error %v", len(key), err)
			}
		})
	}
}
