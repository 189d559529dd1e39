package servercmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The key file is taken from the flag, and a replica does not start
// with one that group or others can read, nor with a malformed one; the
// error never shows the key (docs/secrets.md).
func TestSecretKeyFileIsCheckedAtStart(t *testing.T) {
	const key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		mode       os.FileMode
		want       string
	}{
		{"readable by others", "k1 " + key + "\n", 0o644, "chmod 600"},
		{"malformed", "k1\n", 0o600, "line 1"},
		{"short key", "k1 AAEC\n", 0o600, "has 3 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(p, []byte(tc.text), tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, tc.mode); err != nil {
				t.Fatal(err)
			}
			cfg, err := loadConfig([]string{"-k", "--data-dir", t.TempDir(), "--secret-key-file", p}, func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatal(err)
			}
			if cfg.SecretKeyFile != p {
				t.Fatalf("SecretKeyFile = %q", cfg.SecretKeyFile)
			}
			err = run(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "secret key file") {
				t.Fatalf("run = %v, want a refusal mentioning %q", err, tc.want)
			}
			if strings.Contains(err.Error(), key) {
				t.Fatalf("the error shows the key: %v", err)
			}
		})
	}
}
