package gossipmeta

import (
	"encoding/base64"
	"fmt"
	"os"
	"strings"
)

// ReadKeyFile reads the base64 AES key gossip is encrypted with, as
// replicas and agents take it from --gossip-key-file; an empty path means
// no encryption. Errors name the option.
func ReadKeyFile(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--gossip-key-file: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("--gossip-key-file %s: not base64: %w", path, err)
	}
	switch len(key) {
	case 16, 24, 32:
		return key, nil
	}
	return nil, fmt.Errorf("--gossip-key-file %s: the key has %d bytes; AES needs 16, 24 or 32", path, len(key))
}
