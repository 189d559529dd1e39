package ankconf

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the parser of each Ankaios config
// file: it must never panic, refuse with an *Error naming the file, and
// on success return each key Grapnel uses as the kind the format
// declares.
func FuzzParse(f *testing.F) {
	for _, data := range examples {
		f.Add(data)
	}
	f.Add("version = 'v1'\n[default]\ninsecure = true\n")
	f.Add("version = 'v1'\nversion = 'v1'\n")
	f.Add("version = 'v2'\n")
	f.Add("version = 'v1'\ntags = { a = { b = 'c' } }\n")
	f.Add("version = 'v1'\nruntimes = [[1], 'x']\n")
	f.Add("version = 'v1'\nresponse_timeout = 9223372036854775807\n")
	f.Add("version = 'v1'\ndefault = [1]\n")
	f.Add("")
	f.Add("server_url: a:1\ninsecure: true\nresponse_timeout: 18446744073709551615\n")
	f.Add("[1, 2]\n")
	f.Add("? [a]\n: b\n")
	f.Fuzz(func(t *testing.T, data string) {
		_ = IsTOML("cfg", []byte(data))
		if file, err := ParseYAML(CLI, "grapnel CLI config", "f.yaml", []byte(data)); err != nil {
			var e *Error
			if !errors.As(err, &e) || !strings.HasPrefix(err.Error(), "grapnel CLI config f.yaml: ") {
				t.Fatalf("YAML: error %v", err)
			}
		} else if v, ok := file.Uint("response_timeout"); file.Has("response_timeout") && !ok {
			t.Fatalf("YAML: response_timeout %v", v)
		}
		for _, format := range []Format{Server, Agent, CLI} {
			file, err := Parse(format, "f.conf", []byte(data))
			if err != nil {
				var e *Error
				if !errors.As(err, &e) || e.Path != "f.conf" || !strings.HasPrefix(err.Error(), format.What+" f.conf: ") {
					t.Fatalf("%s: error %v", format.What, err)
				}
				continue
			}
			for _, k := range format.Keys {
				if !file.Has(k.Name) {
					continue
				}
				if k.Unsupported != "" {
					t.Fatalf("%s: unsupported key %s returned", format.What, k.Name)
				}
				var ok bool
				switch k.Kind {
				case String:
					_, ok = file.String(k.Name)
				case Bool:
					_, ok = file.Bool(k.Name)
				case Uint:
					_, ok = file.Uint(k.Name)
				case StringList:
					_, ok = file.List(k.Name)
				case StringTable:
					_, ok = file.Table(k.Name)
				}
				if !ok {
					t.Fatalf("%s: key %s is not %s", format.What, k.Name, k.Kind)
				}
			}
		}
	})
}
