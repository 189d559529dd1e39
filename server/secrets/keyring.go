package secrets

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
)

// KeySize is the length of a key in bytes (AES-256).
const KeySize = 32

// maxKeyID bounds a key id, which every token repeats.
const maxKeyID = 32

// Keyring is the set of cluster keys a replica holds, by id. The first
// key of the file is the active one: it seals new values; every key
// opens the tokens made with it, so that a key can be rotated without
// a moment where some replica cannot open what another sealed.
type Keyring struct {
	active string
	aeads  map[string]cipher.AEAD
	// nonceKeys are, by id, the keys SealIn derives nonces with: each
	// key's own, derived from it, so a nonce tells nothing of the key.
	nonceKeys map[string][]byte
	ids       []string // in file order
}

// LoadKeyring reads a key file: one key a line, `ID BASE64KEY`, where ID
// is [a-zA-Z0-9_-] (at most 32 characters) and the key is 32 bytes in
// standard base64; blank lines and lines starting with # are skipped. The
// file must not be readable by group or others.
func LoadKeyring(path string) (*Keyring, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secret key file %s: mode %#o lets group or others read it; chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	k, err := ParseKeyring(b)
	if err != nil {
		return nil, fmt.Errorf("secret key file %s: %w", path, err)
	}
	return k, nil
}

// ParseKeyring parses the text of a key file (see LoadKeyring).
func ParseKeyring(text []byte) (*Keyring, error) {
	k := &Keyring{aeads: map[string]cipher.AEAD{}, nonceKeys: map[string][]byte{}}
	sc := bufio.NewScanner(bytes.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, enc, ok := strings.Cut(line, " ")
		enc = strings.TrimSpace(enc)
		if !ok || enc == "" {
			return nil, fmt.Errorf("line %d: want `ID BASE64KEY`", n)
		}
		if !validID(id) {
			return nil, fmt.Errorf("line %d: key id %q must be 1 to %d characters of [a-zA-Z0-9_-]", n, id, maxKeyID)
		}
		if _, dup := k.aeads[id]; dup {
			return nil, fmt.Errorf("line %d: key id %q appears twice", n, id)
		}
		key, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return nil, fmt.Errorf("line %d: key %q is not base64: %v", n, id, err)
		}
		if len(key) != KeySize {
			return nil, fmt.Errorf("line %d: key %q has %d bytes, want %d", n, id, len(key), KeySize)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		k.aeads[id] = aead
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte("grapnel secret nonce key v1"))
		k.nonceKeys[id] = mac.Sum(nil)
		k.ids = append(k.ids, id)
		if k.active == "" {
			k.active = id
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if k.active == "" {
		return nil, fmt.Errorf("no key in it")
	}
	return k, nil
}

// Active is the id of the key that seals new values.
func (k *Keyring) Active() string { return k.active }

// IDs lists the key ids, the active one first.
func (k *Keyring) IDs() []string { return append([]string(nil), k.ids...) }

// Has reports whether the keyring holds the key id.
func (k *Keyring) Has(id string) bool {
	_, ok := k.aeads[id]
	return ok
}

func validID(s string) bool {
	if s == "" || len(s) > maxKeyID {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
