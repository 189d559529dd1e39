package gossipmeta

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Requirement (issue 17, point 2): a gossip key file is 0600 or 0400, is
// refused otherwise naming the file and its mode, and may hold several
// keys for a rotation, the first the primary.
func TestReadKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, perm os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), perm); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, perm); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	const k16 = "MDEyMzQ1Njc4OWFiY2RlZg=="                     // "0123456789abcdef"
	const k32 = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // twice that
	for _, tc := range []struct {
		name, path, wantErr string
		wantLens            []int
	}{
		{name: "no file, no encryption", path: ""},
		{name: "16-byte key with newline", path: write("k16", k16+"\n", 0o600), wantLens: []int{16}},
		{name: "read-only for the owner", path: write("k400", k16, 0o400), wantLens: []int{16}},
		{name: "rotation: two keys, comments and blank lines", path: write("two", "# new key first\n"+k32+"\n\n"+k16+"\n", 0o600), wantLens: []int{32, 16}},
		{name: "group-readable", path: write("k640", k16, 0o640), wantErr: "k640 has permissions 0640; a gossip key file must be 0600 or 0400"},
		{name: "world-readable", path: write("k644", k16, 0o644), wantErr: "k644 has permissions 0644"},
		{name: "missing", path: filepath.Join(dir, "nope"), wantErr: "--gossip-key-file: stat"},
		{name: "not base64", path: write("bad", "%%%", 0o600), wantErr: "bad line 1: not base64"},
		{name: "wrong size", path: write("short", "YWJj", 0o600), wantErr: "line 1: the key has 3 bytes"},
		{name: "empty", path: write("empty", "\n# nothing\n", 0o600), wantErr: "no key in the file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := ReadKeyFile(tc.path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "--gossip-key-file") {
					t.Fatalf("error %v, want %q naming the option", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(keys) != len(tc.wantLens) {
				t.Fatalf("%d keys, error %v", len(keys), err)
			}
			for i, k := range keys {
				if len(k) != tc.wantLens[i] {
					t.Fatalf("key %d has %d bytes, want %d", i, len(k), tc.wantLens[i])
				}
			}
		})
	}
}

func TestKeysShares(t *testing.T) {
	a, b, c := []byte("a"), []byte("b"), []byte("c")
	if !(Keys{a, b}).Shares(Keys{c, b}) || (Keys{a}).Shares(Keys{b, c}) || (Keys{}).Shares(Keys{a}) {
		t.Fatal("Shares is wrong")
	}
}
