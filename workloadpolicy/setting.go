package workloadpolicy

import (
	"fmt"
	"strings"
)

// Setting is one security-relevant setting of a workload's runtimeConfig.
type Setting struct {
	// Field is where it is written, relative to the workload:
	// "runtimeConfig.commandOptions[3]", "runtimeConfig.user".
	Field string
	// Key is the setting in a canonical form ("--volume /:/host",
	// "user 1000"), which a change of the workload is compared by.
	Key string
	// Need is the least level that admits it.
	Need Level
	// Narrows marks a setting that restricts the workload (--cap-drop,
	// no-new-privileges, a non-root --user): dropping it widens what the
	// workload may do, adding it never does. Every other setting grants
	// something a plain container or process does not have.
	Narrows bool
	// Reason says what it does, for a refusal.
	Reason string
	// uid is the host uid a podman --user names (> 0), which must not
	// be another workload's (Policy.UIDs).
	uid int64
	// shown replaces Key in messages when the key holds more than the
	// setting (the items after an option the policy does not know).
	shown string
}

// Shown is the setting as a message names it.
func (s Setting) Shown() string {
	if s.shown != "" {
		return s.shown
	}
	return s.Key
}

// Profile is what the policy reads in one workload.
type Profile struct {
	// Settings are the security-relevant settings, in the order of the
	// runtimeConfig.
	Settings []Setting
	// Unmet are what the restricted level requires and the workload does
	// not do (--cap-drop=ALL, say), each with the field it belongs in.
	// Need is Baseline for each: only restricted asks for them.
	Unmet []Setting
}

// Grants are the settings that grant something.
func (p *Profile) Grants() []Setting {
	var out []Setting
	for _, s := range p.Settings {
		if !s.Narrows {
			out = append(out, s)
		}
	}
	return out
}

// Restrictions are the settings that restrict the workload.
func (p *Profile) Restrictions() []Setting {
	var out []Setting
	for _, s := range p.Settings {
		if s.Narrows {
			out = append(out, s)
		}
	}
	return out
}

// finder collects the settings of one runtimeConfig.
type finder struct {
	settings []Setting
	unmet    []Setting
}

// grant records a setting that grants something, admitted from need up.
func (f *finder) grant(field, key string, need Level, format string, args ...any) {
	f.settings = append(f.settings, Setting{Field: field, Key: key, Need: need, Reason: fmt.Sprintf(format, args...)})
}

// narrow records a setting that restricts the workload.
func (f *finder) narrow(field, key string) {
	f.settings = append(f.settings, Setting{Field: field, Key: key, Need: Restricted, Narrows: true})
}

// require records what restricted requires and the workload lacks.
func (f *finder) require(field, key, format string, args ...any) {
	f.unmet = append(f.unmet, Setting{Field: field, Key: key, Need: Baseline, Reason: fmt.Sprintf(format, args...)})
}

func (f *finder) profile() *Profile { return &Profile{Settings: f.settings, Unmet: f.unmet} }

// ParseError is a runtimeConfig the policy cannot read: it names the
// field. The runtime refuses such a config too.
type ParseError struct {
	Field  string
	Reason string
}

func (e *ParseError) Error() string { return e.Field + ": " + e.Reason }

func parseErr(field, format string, args ...any) error {
	return &ParseError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// quote shortens a value for a reason or a key: runtimeConfigs may hold
// long values.
func quote(s string) string {
	const max = 120
	if len(s) > max {
		s = s[:max] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// lower is s in lower case without surrounding blanks.
func lower(s string) string { return strings.ToLower(strings.TrimSpace(s)) }
