package secrets

import (
	"strings"
	"testing"
)

func BenchmarkSeal(b *testing.B) {
	k := mustRing(b)
	for b.Loop() {
		if _, err := k.Seal("a 32 character database password"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRevealRuntimeConfig(b *testing.B) {
	k := mustRing(b)
	tok, _ := k.Seal("a 32 character database password")
	rc := strings.Repeat("image: x\ncommandOptions: [\"--net=host\"]\n", 10) + "env: {PW: " + tok + "}\n"
	for b.Loop() {
		if _, err := k.Reveal(rc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRevealWithoutToken(b *testing.B) {
	k := mustRing(b)
	rc := strings.Repeat("image: x\ncommandOptions: [\"--net=host\"]\n", 10)
	for b.Loop() {
		_, _ = k.Reveal(rc)
	}
}

func mustRing(b *testing.B) *Keyring {
	k, err := ParseKeyring([]byte("k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="))
	if err != nil {
		b.Fatal(err)
	}
	return k
}
