package gossipmeta

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/memberlist"
)

// Keys is a gossip keyring as a key file gives it: the first key
// encrypts what this member sends, every key decrypts what it receives.
// Several keys exist only during a rotation (docs/security.md, "Gossip
// keys").
type Keys [][]byte

// Primary is the key messages are sent with; nil for no encryption.
func (k Keys) Primary() []byte {
	if len(k) == 0 {
		return nil
	}
	return k[0]
}

// Shares reports whether k and o have a key in common.
func (k Keys) Shares(o Keys) bool {
	for _, a := range k {
		for _, b := range o {
			if bytes.Equal(a, b) {
				return true
			}
		}
	}
	return false
}

// ReadKeyFile reads the gossip keys of --gossip-key-file (ReadKeys).
func ReadKeyFile(path string) (Keys, error) { return ReadKeys("--gossip-key-file", path) }

// ReadKeys reads a gossip key file given with option: one base64 AES key
// (16, 24 or 32 bytes) per line, the first the primary; blank lines and
// lines starting with # are skipped. The file must be readable by its
// owner only (0600 or 0400): whoever reads it can join the pool. An
// empty path means no encryption. Errors name the option and the file.
func ReadKeys(option, path string) (Keys, error) {
	if path == "" {
		return nil, nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", option, err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 && perm != 0o400 {
		return nil, fmt.Errorf("%s %s has permissions %04o; a gossip key file must be 0600 or 0400", option, path, perm)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", option, err)
	}
	var keys Keys
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("%s %s line %d: not base64: %w", option, path, i+1, err)
		}
		switch len(key) {
		case 16, 24, 32:
		default:
			return nil, fmt.Errorf("%s %s line %d: the key has %d bytes; AES needs 16, 24 or 32", option, path, i+1, len(key))
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s %s: no key in the file", option, path)
	}
	return keys, nil
}

// ErrNoKeyring marks a key change on a pool started without encryption:
// memberlist cannot start encrypting a running pool.
var ErrNoKeyring = errors.New("gossip pool started without a key; restart with one")

// Rotate makes keys the keyring's keys in the order of a rotation: every
// new key installed, the first made primary, the others removed
// (docs/security.md, "Gossip keys").
func Rotate(kr *memberlist.Keyring, keys Keys) error {
	if kr == nil {
		return ErrNoKeyring
	}
	if len(keys) == 0 {
		return errors.New("no key given; a running pool cannot stop encrypting")
	}
	for _, k := range keys {
		if err := kr.AddKey(k); err != nil {
			return err
		}
	}
	if err := kr.UseKey(keys[0]); err != nil {
		return err
	}
	for _, old := range kr.GetKeys() {
		keep := false
		for _, k := range keys {
			keep = keep || bytes.Equal(k, old)
		}
		if !keep {
			if err := kr.RemoveKey(old); err != nil {
				return err
			}
		}
	}
	return nil
}
