package workloadpolicy

// inspectContainerd reads a containerd runtimeConfig. The containerd
// runtime (agent/runtime/containerd) accepts only nerdctl `run` options
// that podman's `run` has with the same meaning, in the forms both read
// alike, so commandOptions are judged with podman's table; what it does
// not accept it refuses itself. It takes no generalOptions at all.
func inspectContainerd(text string) (*Profile, error) {
	general, command, image, imageField, err := readRunConfig(text)
	if err != nil {
		return nil, err
	}
	f := &finder{}
	if len(general) > 0 {
		f.grant(root+".generalOptions[0]", quote(general[0]), Privileged, "%s: the containerd runtime takes no generalOptions", quote(general[0]))
	}
	judgeRun(f, command)
	judgeImage(f, imageField, image)
	requireRestrictedContainerd(f)
	return f.profile(), nil
}

// requireRestrictedContainerd: restricted needs what it needs of podman,
// but ctr sets no-new-privileges on every container already, and cannot
// run one as another user than the image's: a containerd workload never
// meets restricted.
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
	f.require(field, "--user", "restricted needs a user other than root, which the containerd runtime cannot set (ctr run has no --user)")
}
