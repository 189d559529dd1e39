// Package ankconf reads the TOML config files of Eclipse Ankaios
// (ank-server.conf, ank-agent.conf, ank.conf), so that Grapnel's programs
// start from an Ankaios deployment's files unchanged.
//
// A Format lists the keys one file may hold and the kind of value each
// takes. Parse checks the file strictly: the mandatory version must be
// "v1", an unknown key or a value of the wrong kind is an error naming the
// file, the key and the reason, and a key Grapnel has no equivalent for
// is accepted with a warning naming it. The caller maps the values it
// gets onto its own settings. ParseYAML checks a Grapnel YAML file with
// the same keys (the CLI's own config file) the same way.
package ankconf

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"gopkg.in/yaml.v3"
)

// Version is the format version every Ankaios config file states.
const Version = "v1"

// Kind is the kind of value a key takes.
type Kind uint8

// The kinds of value.
const (
	String      Kind = iota + 1 // a string
	Bool                        // true or false
	Uint                        // a whole number, 0 or more
	StringList                  // an array of strings
	StringTable                 // a table whose values are strings
	Any                         // any value (for keys that are only warned about)
)

func (k Kind) String() string {
	switch k {
	case String:
		return "a string"
	case Bool:
		return "a boolean (true or false)"
	case Uint:
		return "a whole number (0 or more)"
	case StringList:
		return "an array of strings"
	case StringTable:
		return "a table of strings"
	}
	return "a value"
}

// Key is one key of a Format.
type Key struct {
	Name string
	Kind Kind
	// Unsupported, when set, says why Grapnel has no equivalent: the key
	// is accepted, its value is not returned and a warning names it.
	Unsupported string
}

// Format describes one kind of Ankaios config file.
type Format struct {
	// What names the file in messages ("Ankaios server config").
	What string
	Keys []Key
	// Section names a table whose keys count as top-level keys (the ank
	// CLI's [default]); "" when there is none.
	Section string
	// Exclusive lists pairs of keys of which at most one may be given
	// (a PEM file and its content).
	Exclusive [][2]string
}

// Error is a file Parse refused: Key is "" when the file as a whole is
// at fault (it cannot be read, or it is not TOML).
type Error struct {
	What, Path, Key, Reason string
}

func (e *Error) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%s %s: %s", e.What, e.Path, e.Reason)
	}
	return fmt.Sprintf("%s %s: key '%s': %s", e.What, e.Path, e.Key, e.Reason)
}

// File is a checked config file.
type File struct {
	// Path is where it was read from.
	Path string
	// Warnings name the keys Grapnel does not use, one line each.
	Warnings []string
	values   map[string]any
}

// Read reads and checks the file at path.
func Read(f Format, path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{What: f.What, Path: path, Reason: err.Error()}
	}
	return Parse(f, path, data)
}

// Parse checks data, the content of the file at path, against f.
func Parse(f Format, path string, data []byte) (*File, error) {
	var raw map[string]any
	if err := toml.Unmarshal(data, &raw); err != nil {
		e := &Error{What: f.What, Path: path}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position()
			e.Reason = fmt.Sprintf("not valid TOML: line %d, column %d: %s", line, col, strings.TrimPrefix(de.Error(), "toml: "))
		} else {
			e.Reason = "not valid TOML: " + strings.TrimPrefix(err.Error(), "toml: ")
		}
		return nil, e
	}
	return check(f, path, raw, true)
}

// ParseYAML checks data, a Grapnel YAML file at path holding the keys of
// f under the same names, against f: as Parse, but the version may be
// left out and there is no section. what names the file in messages.
func ParseYAML(f Format, what, path string, data []byte) (*File, error) {
	f.What, f.Section = what, ""
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, &Error{What: what, Path: path, Reason: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	norm, ok := fromYAML(raw).(map[string]any)
	if !ok { // an empty file
		norm = map[string]any{}
	}
	return check(f, path, norm, false)
}

// fromYAML turns what yaml.v3 decodes into the types the TOML decoder
// gives (int64, []any, map[string]any), so one check serves both.
func fromYAML(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case uint64: // above MaxInt64
		return float64(x)
	case []any:
		out := make([]any, len(x))
		for i, it := range x {
			out[i] = fromYAML(it)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, it := range x {
			out[k] = fromYAML(it)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, it := range x {
			out[fmt.Sprint(k)] = fromYAML(it)
		}
		return out
	}
	return v
}

// check checks raw, the decoded file, against f; needVersion says the
// file must state version = "v1" (an Ankaios file does).
func check(f Format, path string, raw map[string]any, needVersion bool) (*File, error) {
	fail := func(key, format string, args ...any) (*File, error) {
		return nil, &Error{What: f.What, Path: path, Key: key, Reason: fmt.Sprintf(format, args...)}
	}
	// Flatten the section into the top level; a key may be given once.
	flat := make(map[string]any, len(raw))
	for k, v := range raw {
		if f.Section != "" && k == f.Section {
			continue
		}
		flat[k] = v
	}
	if f.Section != "" {
		if sec, ok := raw[f.Section]; ok {
			t, ok := sec.(map[string]any)
			if !ok {
				return fail(f.Section, "expected a table, got %s", describe(sec))
			}
			for _, k := range slices.Sorted(maps.Keys(t)) {
				if _, dup := flat[k]; dup {
					return fail(f.Section+"."+k, "also given at the top level; give it once")
				}
				flat[k] = t[k]
			}
		}
	}

	keys := make(map[string]Key, len(f.Keys))
	for _, k := range f.Keys {
		keys[k.Name] = k
	}
	out := &File{Path: path, values: map[string]any{}}
	v, ok := flat["version"]
	if !ok && needVersion {
		return fail("version", "missing: an Ankaios config file states version = %q", Version)
	}
	if s, isString := v.(string); ok && (!isString || s != Version) {
		return fail("version", "got %s, the only version is %q", describe(v), Version)
	}
	for _, name := range slices.Sorted(maps.Keys(flat)) {
		if name == "version" {
			continue
		}
		val := flat[name]
		k, known := keys[name]
		if !known {
			return fail(name, "unknown key (known: %s)", strings.Join(knownNames(f), ", "))
		}
		conv, err := convert(k.Kind, val)
		if err != nil {
			return fail(name, "%v", err)
		}
		if k.Unsupported != "" {
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s %s: key '%s' has no Grapnel equivalent and is ignored: %s", f.What, path, name, k.Unsupported))
			continue
		}
		out.values[name] = conv
	}
	for _, pair := range f.Exclusive {
		_, a := flat[pair[0]]
		_, b := flat[pair[1]]
		if a && b {
			return fail(pair[1], "%s is given too; give either the file or its content", pair[0])
		}
	}
	return out, nil
}

// convert checks that v is of kind k and returns it as the Go type the
// accessors return.
func convert(k Kind, v any) (any, error) {
	wrong := func() (any, error) { return nil, fmt.Errorf("expected %s, got %s", k, describe(v)) }
	switch k {
	case String:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case Bool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case Uint:
		if n, ok := v.(int64); ok {
			if n < 0 {
				return nil, fmt.Errorf("expected %s, got %d", k, n)
			}
			return uint64(n), nil
		}
	case StringList:
		items, ok := v.([]any)
		if !ok {
			return wrong()
		}
		out := make([]string, 0, len(items))
		for i, it := range items {
			s, ok := it.(string)
			if !ok {
				return nil, fmt.Errorf("expected %s, got %s at index %d", k, describe(it), i)
			}
			out = append(out, s)
		}
		return out, nil
	case StringTable:
		t, ok := v.(map[string]any)
		if !ok {
			return wrong()
		}
		out := make(map[string]string, len(t))
		for _, key := range slices.Sorted(maps.Keys(t)) {
			s, ok := t[key].(string)
			if !ok {
				return nil, fmt.Errorf("expected %s, got %s for '%s'", k, describe(t[key]), key)
			}
			out[key] = s
		}
		return out, nil
	case Any:
		return v, nil
	}
	return wrong()
}

// describe names the kind of a decoded TOML value, with the value when it
// is short.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 40 {
			return "a string"
		}
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("the boolean %t", x)
	case int64:
		return fmt.Sprintf("the integer %d", x)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "a float"
		}
		return fmt.Sprintf("the float %g", x)
	case time.Time, toml.LocalDate, toml.LocalTime, toml.LocalDateTime:
		return "a date or time"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a %T", v)
}

func knownNames(f Format) []string {
	names := []string{"version"}
	for _, k := range f.Keys {
		names = append(names, k.Name)
	}
	if f.Section != "" {
		names = append(names, "["+f.Section+"]")
	}
	return names
}

// Has reports whether the file gives key (and Grapnel uses it).
func (f *File) Has(key string) bool {
	_, ok := f.values[key]
	return ok
}

// Set copies the value of every key in dst that the file gives into
// it: each pointer is a *string for a String key or a *bool for a Bool
// key, the Grapnel setting the key stands for.
func (f *File) Set(dst map[string]any) {
	for key, p := range dst {
		switch p := p.(type) {
		case *string:
			if v, ok := f.String(key); ok {
				*p = v
			}
		case *bool:
			if v, ok := f.Bool(key); ok {
				*p = v
			}
		default:
			panic(fmt.Sprintf("ankconf: Set %s: unsupported %T", key, p))
		}
	}
}

// String returns a String key's value.
func (f *File) String(key string) (string, bool) {
	v, ok := f.values[key].(string)
	return v, ok
}

// Bool returns a Bool key's value.
func (f *File) Bool(key string) (bool, bool) {
	v, ok := f.values[key].(bool)
	return v, ok
}

// Uint returns a Uint key's value.
func (f *File) Uint(key string) (uint64, bool) {
	v, ok := f.values[key].(uint64)
	return v, ok
}

// List returns a StringList key's value.
func (f *File) List(key string) ([]string, bool) {
	v, ok := f.values[key].([]string)
	return slices.Clone(v), ok
}

// Table returns a StringTable key's value.
func (f *File) Table(key string) (map[string]string, bool) {
	v, ok := f.values[key].(map[string]string)
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(v))
	for k, s := range v {
		out[k] = s
	}
	return out, true
}

// Fail is an error about key of the file, for a value the caller finds
// wrong after Parse accepted its kind.
func (f *File) Fail(what, key, format string, args ...any) error {
	return &Error{What: what, Path: f.Path, Key: key, Reason: fmt.Sprintf(format, args...)}
}

// IsTOML tells an Ankaios TOML config file from a Grapnel YAML one, for a
// file named on the command line or in a variable: by the extension of
// its name (.conf and .toml are TOML, .yaml and .yml YAML), otherwise by
// its first line that is neither blank nor a comment: a [table] header or
// a key = value line is TOML. Anything else, an empty file included, is
// YAML.
func IsTOML(path string, data []byte) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".conf", ".toml":
		return true
	case ".yaml", ".yml":
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "[") {
			return true
		}
		return isKeyValue(line)
	}
	return false
}

// isKeyValue reports whether line starts with a TOML key (bare, quoted or
// dotted) followed by "=".
func isKeyValue(line string) bool {
	rest := line
	for {
		rest = strings.TrimLeft(rest, " \t")
		if rest == "" {
			return false
		}
		switch c := rest[0]; c {
		case '"', '\'':
			end := strings.IndexByte(rest[1:], c)
			if end < 0 {
				return false
			}
			rest = rest[end+2:]
		default:
			n := 0
			for n < len(rest) && isBareKeyChar(rest[n]) {
				n++
			}
			if n == 0 {
				return false
			}
			rest = rest[n:]
		}
		rest = strings.TrimLeft(rest, " \t")
		switch {
		case strings.HasPrefix(rest, "="):
			return true
		case strings.HasPrefix(rest, "."):
			rest = rest[1:]
		default:
			return false
		}
	}
}

func isBareKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}
