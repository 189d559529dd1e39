package workloadpolicy

import (
	"strconv"

	"gopkg.in/yaml.v3"
)

// inspectProcess reads a process runtimeConfig: only `user:` matters.
// The process runtime resolves a name and checks it against the agent's
// list of users and its uid range; here only what the text says is
// judged: root needs privileged, any other user baseline.
func inspectProcess(text string) (*Profile, error) {
	f := &finder{}
	err := topFields(text, func(field, key string, v *yaml.Node) error {
		if key != "user" {
			return nil
		}
		u, err := scalar(field, v)
		if err != nil || u == "" {
			return err
		}
		if IsRootUser(u) {
			f.grant(field, "user "+u, Privileged, "%s is root", quote(u))
		} else {
			f.grant(field, "user "+u, Baseline, "names the user %s instead of a uid of the workload's own", quote(u))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f.profile(), nil
}

// IsRootUser reports whether a user as written names root: the name
// root or the uid 0 (in any spelling the runtime reads as 0).
func IsRootUser(u string) bool {
	if u == "root" {
		return true
	}
	n, err := strconv.ParseUint(u, 10, 32)
	return err == nil && n == 0
}
