package secrets

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func ring(t *testing.T, lines ...string) *Keyring {
	t.Helper()
	k, err := ParseKeyring([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestParseKeyringRefusesBadFiles(t *testing.T) {
	good := newKey(t)
	short := base64.StdEncoding.EncodeToString([]byte("short"))
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "# only a comment\n\n", "no key"},
		{"no key", "k1", "want `ID BASE64KEY`"},
		{"bad id", "k:1 " + good, "key id"},
		{"long id", strings.Repeat("k", 33) + " " + good, "key id"},
		{"not base64", "k1 !!!", "not base64"},
		{"short key", "k1 " + short, "has 5 bytes"},
		{"duplicate", "k1 " + good + "\nk1 " + good, "appears twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseKeyring([]byte(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), good) {
				t.Fatalf("the error shows the key: %v", err)
			}
		})
	}
}

func TestLoadKeyringRefusesAFileOthersCanRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(p, []byte("k1 "+newKey(t)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyring(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("err = %v, want a refusal of mode 0644", err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := LoadKeyring(p)
	if err != nil || k.Active() != "k1" {
		t.Fatalf("LoadKeyring = %v, %v", k, err)
	}
}

func TestSealOpen(t *testing.T) {
	k := ring(t, "# cluster keys", "k2 "+newKey(t), "k1 "+newKey(t))
	if k.Active() != "k2" || fmt.Sprint(k.IDs()) != "[k2 k1]" {
		t.Fatalf("active %s ids %v: the first key must be the active one", k.Active(), k.IDs())
	}
	a, err := k.Seal("hunter2")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := k.Seal("hunter2")
	if a == b {
		t.Fatal("two seals of one value are equal: the nonce is not fresh, equal secrets could be told apart")
	}
	if strings.Contains(a, "hunter2") || !IsToken(a) || KeyID(a) != "k2" {
		t.Fatalf("token %q", a)
	}
	for _, tok := range []string{a, b} {
		if p, err := k.Open(tok); err != nil || p != "hunter2" {
			t.Fatalf("Open = %q, %v", p, err)
		}
	}
	// Tampering with the key id or the body is detected.
	other := strings.Replace(a, ":k2:", ":k1:", 1)
	if _, err := k.Open(other); err == nil {
		t.Fatal("a token moved to another key id opened")
	}
	flipped := a[:len(a)-3] + string(rune('A'+(a[len(a)-3]-'A'+1)%26)) + a[len(a)-2:]
	if _, err := k.Open(flipped); err == nil {
		t.Fatal("a changed token opened")
	}
	if _, err := ring(t, "k9 "+newKey(t)).Open(a); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("err = %v, want ErrUnknownKey", err)
	}
}

func TestRevealAndMaskTokens(t *testing.T) {
	k := ring(t, "k1 "+newKey(t))
	tok, _ := k.Seal("s3cr3t")
	text := "command: [sh, -c, 'echo " + tok + "']\nenv:\n  PW: " + tok + "\n"
	got, err := k.Reveal(text)
	if err != nil || got != "command: [sh, -c, 'echo s3cr3t']\nenv:\n  PW: s3cr3t\n" {
		t.Fatalf("Reveal = %q, %v", got, err)
	}
	if m := MaskTokens(text); strings.Contains(m, tok) || !strings.Contains(m, "PW: "+Mask) {
		t.Fatalf("MaskTokens = %q", m)
	}
	if got, err := k.Reveal("no token here"); err != nil || got != "no token here" {
		t.Fatalf("Reveal = %q, %v", got, err)
	}
	// A token the replica cannot open stays, and is reported.
	var none *Keyring
	if got, err := none.Reveal(text); err == nil || got != text {
		t.Fatalf("Reveal without keys = %q, %v", got, err)
	}
}

func TestSealConfigs(t *testing.T) {
	k := ring(t, "k1 "+newKey(t))
	next := map[string]any{
		"plain":      "visible",
		"secret_db":  map[string]any{"user": "app", "password": "pw1", "empty": "", "hosts": []any{"a", "b"}},
		"secret_one": "tok",
	}
	sealed, err := SealConfigs(k, next, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sealed["plain"] != "visible" {
		t.Fatalf("a non-secret item was changed: %v", sealed["plain"])
	}
	if strings.Contains(fmt.Sprint(sealed), "pw1") || strings.Contains(fmt.Sprint(sealed), "app") || strings.Contains(fmt.Sprint(sealed), "tok\"") {
		t.Fatalf("plain text left in %v", sealed)
	}
	if next["secret_one"] != "tok" {
		t.Fatal("SealConfigs changed its input")
	}
	db := sealed["secret_db"].(map[string]any)
	if db["empty"] != "" || !IsToken(db["password"].(string)) || !IsToken(db["hosts"].([]any)[1].(string)) {
		t.Fatalf("sealed item %v", db)
	}

	t.Run("the same value again keeps the stored tokens", func(t *testing.T) {
		again, err := SealConfigs(k, next, sealed)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(again) != fmt.Sprint(sealed) {
			t.Fatalf("rewriting the same secrets changed them:\n%v\n%v", again, sealed)
		}
	})
	t.Run("a changed leaf alone gets a new token", func(t *testing.T) {
		ch := map[string]any{"secret_db": map[string]any{"user": "app", "password": "pw2", "empty": "", "hosts": []any{"a", "b"}}}
		got, err := SealConfigs(k, ch, sealed)
		if err != nil {
			t.Fatal(err)
		}
		g, o := got["secret_db"].(map[string]any), sealed["secret_db"].(map[string]any)
		if g["user"] != o["user"] || g["password"] == o["password"] {
			t.Fatalf("got %v from %v", g, o)
		}
		if p, _ := k.Open(g["password"].(string)); p != "pw2" {
			t.Fatalf("password opens to %q", p)
		}
	})
	t.Run("the mask written back keeps the stored value", func(t *testing.T) {
		got, err := SealConfigs(k, MaskConfigs(sealed), sealed)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(sealed) {
			t.Fatalf("read-modify-write changed the secrets: %v", got)
		}
	})
	t.Run("a stored token written back is kept", func(t *testing.T) {
		got, err := SealConfigs(k, map[string]any{"secret_x": sealed["secret_one"]}, nil)
		if err != nil || got["secret_x"] != sealed["secret_one"] {
			t.Fatalf("got %v, %v", got, err)
		}
	})
	for _, tc := range []struct {
		name      string
		k         *Keyring
		next, cur map[string]any
		want      string
	}{
		{"mask without a stored value", k, map[string]any{"secret_new": Mask}, nil, "desiredState.configs.secret_new: the secret mask"},
		{"mask in a leaf without a stored value", k, map[string]any{"secret_new": map[string]any{"a": Mask}}, nil, "desiredState.configs.secret_new.a"},
		{"no key file", nil, map[string]any{"secret_x": "pw"}, nil, "--secret-key-file"},
		{"a foreign token", k, map[string]any{"secret_x": "gsec:v1:zz:" + strings.Repeat("A", 40)}, nil, "does not open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SealConfigs(tc.k, tc.next, tc.cur)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "pw") {
				t.Fatalf("the error shows the value: %v", err)
			}
		})
	}
}

func TestMaskConfigs(t *testing.T) {
	in := map[string]any{"a": "1", "secret_b": map[string]any{"x": "gsec:v1:k1:..."}}
	out := MaskConfigs(in)
	if out["a"] != "1" || out["secret_b"] != Mask {
		t.Fatalf("MaskConfigs = %v", out)
	}
	if _, ok := in["secret_b"].(map[string]any); !ok {
		t.Fatal("MaskConfigs changed its input")
	}
	plain := map[string]any{"a": "1"}
	if fmt.Sprintf("%p", MaskConfigs(plain)) != fmt.Sprintf("%p", plain) {
		t.Fatal("a map without secrets was copied")
	}
}

// Rotation as docs/secrets.md describes it: the new key goes first in
// every replica's file, the old one stays behind it; Stale finds what
// the old key sealed, Reseal seals it under the new one; then a keyring
// without the old key opens everything.
func TestRotation(t *testing.T) {
	old, nw := newKey(t), newKey(t)
	k1 := ring(t, "k1 "+old)
	stored, err := SealConfigs(k1, map[string]any{"secret_a": "A", "secret_b": []any{"B1", ""}, "secret_plain": "typed before the key file", "c": "C"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stored["secret_plain"] = "typed before the key file" // as an older server stored it
	if s := Stale(k1, stored); fmt.Sprint(s) != "[secret_plain]" {
		t.Fatalf("Stale before rotation = %v", s)
	}
	k12 := ring(t, "k2 "+nw, "k1 "+old)
	stale := Stale(k12, stored)
	if fmt.Sprint(stale) != "[secret_a secret_b secret_plain]" {
		t.Fatalf("Stale = %v", stale)
	}
	resealed, err := Reseal(k12, stored, stale)
	if err != nil {
		t.Fatal(err)
	}
	if s := Stale(k12, resealed); len(s) != 0 {
		t.Fatalf("Stale after Reseal = %v", s)
	}
	if resealed["c"] != "C" || stored["secret_plain"] != "typed before the key file" {
		t.Fatal("Reseal touched what it should not")
	}
	k2 := ring(t, "k2 "+nw)
	for key, want := range map[string]string{"secret_a": "A", "secret_plain": "typed before the key file"} {
		if p, err := k2.Open(resealed[key].(string)); err != nil || p != want {
			t.Fatalf("%s opens to %q, %v under the new key alone", key, p, err)
		}
	}
	if p, err := k2.Open(resealed["secret_b"].([]any)[0].(string)); err != nil || p != "B1" {
		t.Fatalf("secret_b.0 = %q, %v", p, err)
	}
	if _, err := k2.Open(stored["secret_a"].(string)); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("an old token opened without the old key: %v", err)
	}
	// Without the old key, Reseal names the item it cannot open.
	if _, err := Reseal(k2, stored, []string{"secret_a"}); err == nil || !strings.Contains(err.Error(), "secret_a") {
		t.Fatalf("err = %v", err)
	}
}

// SealIn is a function of the key, the scope and the value: the same
// three seal to the same token, which opens; another scope, value or key
// seals to another (its nonce differs, so GCM never sees a nonce twice
// with two texts).
func TestSealIn(t *testing.T) {
	k := ring(t, "k1 "+newKey(t))
	a, err := k.SealIn("seq 2 owner alice", "hunter2")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := k.SealIn("seq 2 owner alice", "hunter2"); b != a {
		t.Fatalf("one scope and value sealed to %s and %s", a, b)
	}
	if p, err := k.Open(a); err != nil || p != "hunter2" {
		t.Fatalf("Open = %q, %v", p, err)
	}
	nonce := func(tok string) string { return tok[len("gsec:v1:k1:"):][:16] } // 12 bytes, base64
	for _, c := range []struct{ scope, plain string }{
		{"seq 2 owner bob", "hunter2"}, {"seq 3 owner alice", "hunter2"}, {"seq 2 owner alice", "hunter3"},
	} {
		o, _ := k.SealIn(c.scope, c.plain)
		if o == a || nonce(o) == nonce(a) {
			t.Fatalf("%q in %q seals with the nonce of hunter2 in alice's scope", c.plain, c.scope)
		}
	}
	if o, _ := ring(t, "k1 "+newKey(t)).SealIn("seq 2 owner alice", "hunter2"); o == a {
		t.Fatal("another key sealed to the same token")
	}
}
