package state

import (
	"fmt"
	"strings"
)

// MaxFieldLength is the longest name Ankaios allows.
const MaxFieldLength = 63

// ValidName reports whether s uses only [a-zA-Z0-9_-].
func ValidName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// CheckName validates a workload name, config key or alias: non-empty,
// [a-zA-Z0-9_-], at most 63 characters.
func CheckName(path, kind, s string) error {
	switch {
	case s == "":
		return fieldErr(path, "%s must not be empty", kind)
	case len(s) > MaxFieldLength:
		return fieldErr(path, "%s '%s' is longer than %d characters", kind, s, MaxFieldLength)
	case !ValidName(s):
		return fieldErr(path, "%s '%s' contains characters other than [a-zA-Z0-9_-]", kind, s)
	}
	return nil
}

// CheckAgentName validates an agent field after rendering: it may be empty
// (the workload is not scheduled) but may only use [a-zA-Z0-9_-].
func CheckAgentName(path, s string) error {
	if !ValidName(s) {
		return fieldErr(path, "agent name '%s' contains characters other than [a-zA-Z0-9_-]", s)
	}
	return nil
}

// Validate checks the naming rules of the desired state that hold before
// rendering: workload names, config keys, aliases and access rules.
func (s State) Validate() error {
	for _, name := range SortedKeys(s.Workloads) {
		p := "desiredState.workloads." + name
		if err := CheckName(p, "workload name", name); err != nil {
			return err
		}
		if err := s.Workloads[name].validate(p); err != nil {
			return err
		}
	}
	for _, key := range SortedKeys(s.Configs) {
		p := "desiredState.configs." + key
		if err := CheckName(p, "config key", key); err != nil {
			return err
		}
		if err := validateConfigItem(p, s.Configs[key]); err != nil {
			return err
		}
	}
	return nil
}

func (w *Workload) validate(p string) error {
	if w.Runtime == "" {
		return fieldErr(join(p, "runtime"), "runtime must not be empty")
	}
	for _, alias := range SortedKeys(w.Configs) {
		if err := CheckName(join(p, "configs."+alias), "config alias", alias); err != nil {
			return err
		}
		if err := CheckName(join(p, "configs."+alias), "config key", w.Configs[alias]); err != nil {
			return err
		}
	}
	for _, dep := range SortedKeys(w.Dependencies) {
		if err := CheckName(join(p, "dependencies."+dep), "workload name", dep); err != nil {
			return err
		}
	}
	for i, f := range w.Files {
		if f.MountPoint == "" {
			return fieldErr(fmt.Sprintf("%s.files.%d.mountPoint", p, i), "mount point must not be empty")
		}
	}
	if err := validateRules(join(p, "controlInterfaceAccess.allowRules"), w.ControlInterfaceAccess.AllowRules); err != nil {
		return err
	}
	return validateRules(join(p, "controlInterfaceAccess.denyRules"), w.ControlInterfaceAccess.DenyRules)
}

func validateRules(p string, rules []AccessRule) error {
	for i, r := range rules {
		rp := fmt.Sprintf("%s.%d", p, i)
		if r.IsLogRule {
			for j, n := range r.WorkloadNames {
				if err := checkLogRuleName(fmt.Sprintf("%s.workloadNames.%d", rp, j), n); err != nil {
					return err
				}
			}
			continue
		}
		if len(r.FilterMasks) == 0 {
			return fieldErr(join(rp, "filterMasks"), "a state rule needs at least one filter mask")
		}
		for j, m := range r.FilterMasks {
			if err := CheckFilterMask(fmt.Sprintf("%s.filterMasks.%d", rp, j), m); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckFilterMask validates a state rule mask: dot-separated segments, each
// '*' or a name of [a-zA-Z0-9_-].
func CheckFilterMask(path, mask string) error {
	if mask == "" {
		return fieldErr(path, "filter mask must not be empty")
	}
	for _, seg := range strings.Split(mask, ".") {
		if seg == "*" {
			continue
		}
		if seg == "" || !ValidName(seg) {
			return fieldErr(path, "filter mask '%s' has an invalid segment '%s'", mask, seg)
		}
	}
	return nil
}

func checkLogRuleName(path, n string) error {
	if strings.Count(n, "*") > 1 {
		return fieldErr(path, "log rule workload name '%s' has more than one '*'", n)
	}
	if len(n) > MaxFieldLength+1 {
		return fieldErr(path, "log rule workload name '%s' is longer than %d characters", n, MaxFieldLength+1)
	}
	bare := strings.Replace(n, "*", "", 1)
	if (bare == "" && n == "") || !ValidName(bare) {
		return fieldErr(path, "log rule workload name '%s' is not a workload name with at most one '*'", n)
	}
	return nil
}

func validateConfigItem(p string, v any) error {
	switch x := v.(type) {
	case string:
		return nil
	case []any:
		for i, e := range x {
			if err := validateConfigItem(fmt.Sprintf("%s.%d", p, i), e); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		for _, k := range SortedKeys(x) {
			if err := CheckName(join(p, k), "config key", k); err != nil {
				return err
			}
			if err := validateConfigItem(join(p, k), x[k]); err != nil {
				return err
			}
		}
		return nil
	}
	return fieldErr(p, "config item must be a string, a list or a map, not %T", v)
}
