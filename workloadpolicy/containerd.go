package workloadpolicy

// inspectContainerd reads a containerd runtimeConfig. The containerd
// runtime (agent/runtime/containerd) passes nerdctl `run` options
// through, and nerdctl's are Docker's, as podman's are: commandOptions
// are judged with podman's table, which refuses what it does not know.
// generalOptions (nerdctl's global options: snapshotter, registries,
// cgroup manager) change how containerd runs every container: they need
// privileged.
func inspectContainerd(text string) (*Profile, error) {
	general, command, image, imageField, err := readRunConfig(text)
	if err != nil {
		return nil, err
	}
	f := &finder{}
	if len(general) > 0 {
		f.grant(root+".generalOptions[0]", quote(general[0]), Privileged, "%s: nerdctl's global options change how containerd runs the container", quote(general[0]))
	}
	judgeRun(f, command)
	judgeImage(f, imageField, image)
	requireRestrictedContainerd(f)
	return f.profile(), nil
}

// requireRestrictedContainerd: restricted needs what it needs of podman,
// and a user other than root, which the policy does not judge for nerdctl
// yet: a containerd workload never meets restricted.
func requireRestrictedContainerd(f *finder) {
	dropAll := false
	for _, s := range f.settings {
		if s.Key == "--cap-drop=ALL" {
			dropAll = true
		}
	}
	field := root + ".commandOptions"
	if !dropAll {
		f.require(field, "--cap-drop=ALL", "restricted needs --cap-drop=ALL (the container may add back NET_BIND_SERVICE only)")
	}
	f.require(field, "--user", "restricted needs a user other than root, which the policy does not judge for nerdctl's --user yet")
}
