package secrets

import (
	"fmt"
	"strings"

	"github.com/grapnel-io/grapnel/state"
)

// Prefix marks a config item as secret: its key starts with it. A naming
// convention rather than a marker item: the mark travels with the item,
// no update can drop it while the value stays, and it needs no field the
// Ankaios protocol lacks (docs/api-compatibility.md).
const Prefix = "secret_"

// Mask stands for a secret item wherever one would be shown. Written
// back in an update, it keeps the stored value. It is a plain YAML and
// JSON string, so a read-modify-write client round-trips it.
const Mask = "<secret>"

// IsSecret reports whether the config key names a secret item.
func IsSecret(key string) bool { return strings.HasPrefix(key, Prefix) }

// MaskConfigs returns configs with every secret item replaced by Mask.
// The map is copied only when it holds a secret; the values are shared.
func MaskConfigs(configs map[string]any) map[string]any {
	var out map[string]any
	for k := range configs {
		if !IsSecret(k) {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(configs))
			for k2, v := range configs {
				out[k2] = v
			}
		}
		out[k] = Mask
	}
	if out == nil {
		return configs
	}
	return out
}

// MaskState returns s with its secret config items masked; s is not
// changed.
func MaskState(s state.State) state.State {
	s.Configs = MaskConfigs(s.Configs)
	return s
}

// SealConfigs returns next with every string leaf of its secret items
// sealed, given cur, the items stored now. A leaf that is unchanged keeps
// its stored token, so that writing a secret again with the same value
// changes nothing (no new token, no restart of the workloads using it).
// Mask, for a whole item or a leaf, keeps the stored value. next is not
// changed; the result shares what it does not seal. k may be nil (no key
// file): then only stored tokens and masks may be written.
func SealConfigs(k *Keyring, next, cur map[string]any) (map[string]any, error) {
	return SealConfigsIn(k, next, cur, "")
}

// SealConfigsIn is SealConfigs with each new token made by SealIn in
// scope: sealing the same next against the same cur in the same scope
// gives the same tokens, so that a dry-run shows the instance names the
// update then creates. An empty scope seals with random nonces.
func SealConfigsIn(k *Keyring, next, cur map[string]any, scope string) (map[string]any, error) {
	var out map[string]any
	for _, key := range state.SortedKeys(next) {
		if !IsSecret(key) {
			continue
		}
		path := "desiredState.configs." + key
		v, old := next[key], cur[key]
		var sealed any
		var err error
		if v == Mask {
			if old == nil {
				return nil, &state.FieldError{Path: path, Reason: "the secret mask " + Mask + " was written for a secret that has no stored value"}
			}
			sealed = old
		} else if sealed, err = sealValue(k, scope, path, v, old); err != nil {
			return nil, err
		}
		if out == nil {
			out = make(map[string]any, len(next))
			for k2, v2 := range next {
				out[k2] = v2
			}
		}
		out[key] = sealed
	}
	if out == nil {
		return next, nil
	}
	return out, nil
}

func sealValue(k *Keyring, scope, path string, v, old any) (any, error) {
	switch v := v.(type) {
	case string:
		oldS, _ := old.(string)
		return sealLeaf(k, scope, path, v, oldS)
	case []any:
		oldL, _ := old.([]any)
		out := make([]any, len(v))
		for i, e := range v {
			var o any
			if i < len(oldL) {
				o = oldL[i]
			}
			s, err := sealValue(k, scope, fmt.Sprintf("%s.%d", path, i), e, o)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	case map[string]any:
		oldM, _ := old.(map[string]any)
		out := make(map[string]any, len(v))
		for _, key := range state.SortedKeys(v) {
			s, err := sealValue(k, scope, path+"."+key, v[key], oldM[key])
			if err != nil {
				return nil, err
			}
			out[key] = s
		}
		return out, nil
	default:
		return nil, &state.FieldError{Path: path, Reason: fmt.Sprintf("a config value of type %T cannot be sealed", v)}
	}
}

// sealLeaf seals one string given the stored one. Errors name the path,
// never the value.
func sealLeaf(k *Keyring, scope, path, v, old string) (string, error) {
	switch {
	case v == "":
		return "", nil // nothing to hide; a template's #if sees it as before
	case v == Mask:
		if !IsToken(old) {
			return "", &state.FieldError{Path: path, Reason: "the secret mask " + Mask + " was written where no secret value is stored"}
		}
		return old, nil
	case v == old && IsToken(v):
		return v, nil
	case IsToken(v):
		if k == nil {
			return "", &state.FieldError{Path: path, Reason: "a sealed value can only be written to servers started with --secret-key-file"}
		}
		if _, err := k.Open(v); err != nil {
			return "", &state.FieldError{Path: path, Reason: "a sealed value that does not open here: " + err.Error()}
		}
		return v, nil
	}
	if k == nil {
		return "", &state.FieldError{Path: path, Reason: "secret config items (keys starting with " + Prefix + ") need the servers started with --secret-key-file"}
	}
	if IsToken(old) {
		if p, err := k.Open(old); err == nil && p == v {
			return old, nil
		}
	}
	var t string
	var err error
	if scope == "" {
		t, err = k.Seal(v)
	} else {
		// The leaf's path is in the scope: two items of the same value
		// get different tokens.
		t, err = k.SealIn(scope+"\x00"+path, v)
	}
	if err != nil {
		return "", &state.FieldError{Path: path, Reason: err.Error()}
	}
	return t, nil
}

// Stale lists, sorted, the secret items that are not sealed under k's
// active key: written before the key file or the item's name marked them,
// or sealed under a key being rotated out. Reseal seals them anew.
func Stale(k *Keyring, configs map[string]any) []string {
	var out []string
	for _, key := range state.SortedKeys(configs) {
		if IsSecret(key) && !sealedUnder(configs[key], k.active) {
			out = append(out, key)
		}
	}
	return out
}

func sealedUnder(v any, id string) bool {
	switch v := v.(type) {
	case string:
		return v == "" || KeyID(v) == id
	case []any:
		for _, e := range v {
			if !sealedUnder(e, id) {
				return false
			}
		}
	case map[string]any:
		for _, e := range v {
			if !sealedUnder(e, id) {
				return false
			}
		}
	}
	return true
}

// Reseal returns configs with the items keys names sealed again under the
// active key (opening their tokens first). A token that does not open is
// an error naming the item.
func Reseal(k *Keyring, configs map[string]any, keys []string) (map[string]any, error) {
	out := make(map[string]any, len(configs))
	for k2, v := range configs {
		out[k2] = v
	}
	for _, key := range keys {
		plain, err := openValue(k, "desiredState.configs."+key, configs[key])
		if err != nil {
			return nil, err
		}
		if out[key], err = sealValue(k, "", "desiredState.configs."+key, plain, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func openValue(k *Keyring, path string, v any) (any, error) {
	switch v := v.(type) {
	case string:
		if !IsToken(v) {
			return v, nil
		}
		p, err := k.Open(v)
		if err != nil {
			return nil, &state.FieldError{Path: path, Reason: err.Error()}
		}
		return p, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			o, err := openValue(k, fmt.Sprintf("%s.%d", path, i), e)
			if err != nil {
				return nil, err
			}
			out[i] = o
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for key, e := range v {
			o, err := openValue(k, path+"."+key, e)
			if err != nil {
				return nil, err
			}
			out[key] = o
		}
		return out, nil
	}
	return v, nil
}
