package secrets

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// tokenPrefix starts every sealed value; the version lets the format
// change. A token is `gsec:v1:KEYID:BASE64URL(nonce|ciphertext|tag)`,
// made of characters that pass through handlebars, YAML and JSON
// untouched, so a template can place it anywhere a string goes.
const tokenPrefix = "gsec:v1:"

// tokenRE finds tokens inside rendered text. A key id is at most 32
// characters; the sealed part at least a nonce and a tag.
var tokenRE = regexp.MustCompile(`gsec:v1:([a-zA-Z0-9_-]{1,32}):([a-zA-Z0-9_-]{38,})`)

// ErrUnknownKey means a token was sealed with a key the keyring lacks.
var ErrUnknownKey = errors.New("sealed with a key this replica does not hold")

// aad binds a ciphertext to the format version and its key id.
func aad(id string) []byte { return []byte(tokenPrefix + id) }

// Seal encrypts plain under the active key with a fresh random nonce.
// Two seals of the same text differ, so a token says nothing about its
// plain text, not even whether two secrets are equal.
func (k *Keyring) Seal(plain string) (string, error) {
	aead := k.aeads[k.active]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("secret nonce: %w", err)
	}
	sealed := aead.Seal(nonce, nonce, []byte(plain), aad(k.active))
	return tokenPrefix + k.active + ":" + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// SealIn encrypts plain under the active key with a nonce derived from
// the scope and plain (a synthetic nonce, as AES-GCM-SIV makes one): the
// same plain text sealed in the same scope gives the same token, and a
// nonce repeats only with its plain text, so GCM's nonce rule holds. The
// leader seals an update's new secret items in the scope of the update
// (the revision it makes and who asks, server/secrets.go): a dry-run and
// the apply after it make the same tokens, hence the same instance
// names, while two requesters, two revisions or two items never share
// one, so a token still tells nobody else whether two values are equal.
func (k *Keyring) SealIn(scope, plain string) (string, error) {
	aead := k.aeads[k.active]
	mac := hmac.New(sha256.New, k.nonceKeys[k.active])
	mac.Write([]byte(scope))
	mac.Write([]byte{0})
	mac.Write([]byte(plain))
	nonce := mac.Sum(nil)[:aead.NonceSize()]
	sealed := aead.Seal(nonce, nonce, []byte(plain), aad(k.active))
	return tokenPrefix + k.active + ":" + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// Open decrypts a token.
func (k *Keyring) Open(token string) (string, error) {
	id, body, ok := splitToken(token)
	if !ok {
		return "", fmt.Errorf("not a sealed value")
	}
	aead, ok := k.aeads[id]
	if !ok {
		return "", fmt.Errorf("key %q: %w", id, ErrUnknownKey)
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return "", fmt.Errorf("key %q: the sealed value is malformed", id)
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], aad(id))
	if err != nil {
		return "", fmt.Errorf("key %q: the sealed value does not open (another key with the same id, or changed)", id)
	}
	return string(plain), nil
}

// IsToken reports whether s is one whole token.
func IsToken(s string) bool {
	_, _, ok := splitToken(s)
	return ok
}

// KeyID is the key id of a token ("" for anything else).
func KeyID(s string) string {
	id, _, _ := splitToken(s)
	return id
}

func splitToken(s string) (id, body string, ok bool) {
	if !strings.HasPrefix(s, tokenPrefix) {
		return "", "", false
	}
	m := tokenRE.FindStringSubmatchIndex(s)
	if m == nil || m[0] != 0 || m[1] != len(s) {
		return "", "", false
	}
	return s[m[2]:m[3]], s[m[4]:m[5]], true
}

// Reveal replaces every token in text by its plain text: the runtime
// config or file an agent gets. Text without a token is returned as it
// is, without allocating. A token that does not open is left in place
// and reported; the agent then sees ciphertext, never another value.
func (k *Keyring) Reveal(text string) (string, error) {
	if !strings.Contains(text, tokenPrefix) {
		return text, nil
	}
	var first error
	out := tokenRE.ReplaceAllStringFunc(text, func(tok string) string {
		if k == nil {
			if first == nil {
				first = fmt.Errorf("no --secret-key-file: %w", ErrUnknownKey)
			}
			return tok
		}
		p, err := k.Open(tok)
		if err != nil {
			if first == nil {
				first = err
			}
			return tok
		}
		return p
	})
	return out, first
}

// MaskTokens replaces every token in text by Mask: for output that shows
// rendered text (a dry-run's field changes).
func MaskTokens(text string) string {
	if !strings.Contains(text, tokenPrefix) {
		return text
	}
	return tokenRE.ReplaceAllString(text, Mask)
}
