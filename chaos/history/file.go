package history

import (
	"encoding/json"
	"fmt"
	"os"
)

// Save writes the history (ordered by call) to path as indented JSON.
func (r *Recorder) Save(path string) error {
	return SaveOps(path, r.Ops())
}

// SaveOps writes ops to path as indented JSON.
func SaveOps(path string, ops []Op) error {
	b, err := json.MarshalIndent(ops, "", " ")
	if err != nil {
		return fmt.Errorf("failed to encode history: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("failed to save history: %w", err)
	}
	return nil
}

// Load reads a history written by Save, checks every op (the error names
// the op and the field) and returns it ordered by call.
func Load(path string) ([]Op, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to load history: %w", err)
	}
	var ops []Op
	if err := json.Unmarshal(b, &ops); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, path, err)
	}
	seen := make(map[int64]bool, len(ops))
	for _, op := range ops {
		if err := op.validate(); err != nil {
			return nil, err
		}
		if seen[op.ID] {
			return nil, fmt.Errorf("%w: op %d: field \"id\": used twice", ErrInvalid, op.ID)
		}
		seen[op.ID] = true
	}
	Sort(ops)
	return ops, nil
}
