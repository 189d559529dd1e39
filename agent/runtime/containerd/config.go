package containerd

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/yamlnode"
)

// runConfig is a parsed containerd runtimeConfig with the Ankaios field
// names: nerdctl's generalOptions and `run` commandOptions, checked for
// what would break the agent's guarantees and otherwise passed through.
type runConfig struct {
	Image          string
	CommandArgs    []string
	GeneralOptions []string
	CommandOptions []string
}

const root = "runtimeConfig"

// parseConfig decodes a rendered runtimeConfig, refusing unknown or
// repeated keys and every option that would break the agent's
// guarantees, so that nothing a workload asks for is silently dropped.
func parseConfig(text string) (runConfig, error) {
	var c runConfig
	err := yamlnode.Fields(text, root, "generalOptions, image, commandOptions and commandArgs", runtime.BadConfig, func(field, key string, v *yaml.Node) (err error) {
		switch key {
		case "generalOptions":
			c.GeneralOptions, err = stringList(field, v)
		case "commandOptions":
			c.CommandOptions, err = stringList(field, v)
		case "commandArgs":
			c.CommandArgs, err = stringList(field, v)
		case "image":
			c.Image, err = imageName(field, v)
		default:
			err = runtime.BadConfig(field, "unknown field (expected generalOptions, image, commandOptions or commandArgs)")
		}
		return err
	})
	if err != nil {
		return runConfig{}, err
	}
	if c.Image == "" {
		return runConfig{}, runtime.BadConfig(root+".image", "required")
	}
	if err := checkFlags(root+".generalOptions", c.GeneralOptions, generalFlags, "a nerdctl global option the containerd runtime passes"); err != nil {
		return runConfig{}, err
	}
	if err := checkFlags(root+".commandOptions", c.CommandOptions, runFlags, "a nerdctl run option"); err != nil {
		return runConfig{}, err
	}
	return c, nil
}

// stringList accepts a sequence of scalars; numbers and booleans are kept
// as written, as Ankaios' YAML decoder does.
func stringList(field string, n *yaml.Node) ([]string, error) {
	out, notList, bad := yamlnode.Strings(n)
	switch {
	case notList:
		return nil, runtime.BadConfig(field, "expected a list of strings")
	case bad >= 0:
		return nil, runtime.BadConfig(fmt.Sprintf("%s[%d]", field, bad), "expected a string")
	}
	return out, nil
}

func imageName(field string, n *yaml.Node) (string, error) {
	if yamlnode.IsNull(n) {
		return "", runtime.BadConfig(field, "required")
	}
	if n.Kind != yaml.ScalarNode {
		return "", runtime.BadConfig(field, "expected a string")
	}
	img := strings.TrimSpace(n.Value)
	switch {
	case img == "":
		return "", runtime.BadConfig(field, "required")
	case strings.HasPrefix(img, "-"):
		return "", runtime.BadConfig(field, "must not start with '-'")
	case strings.ContainsAny(img, " \t\n"):
		return "", runtime.BadConfig(field, "must not contain whitespace")
	}
	return normalizeImage(img), nil
}

// normalizeImage spells a Docker-style short reference as containerd
// stores it, as nerdctl does: alpine:3.20 is
// docker.io/library/alpine:3.20, and a reference without a tag or digest
// names :latest.
func normalizeImage(ref string) string {
	first, rest, hasSlash := strings.Cut(ref, "/")
	if !hasSlash || !(strings.ContainsAny(first, ".:") || first == "localhost") {
		if !hasSlash {
			ref = "docker.io/library/" + ref
		} else {
			ref = "docker.io/" + ref
		}
		_ = rest
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	if !strings.Contains(last, ":") && !strings.Contains(last, "@") {
		ref += ":latest"
	}
	return ref
}

// flagSpec is one nerdctl option as its flag parser (pflag) reads it.
type flagSpec struct {
	value bool // takes a value
	// refuse, when set, is why the runtime refuses the option.
	refuse string
	// check judges the value of an option the runtime passes.
	check func(at, option, value string) error
}

// flagTable is a nerdctl command's options by long name, and its short
// names.
type flagTable struct {
	long  map[string]flagSpec
	short map[byte]string
}

func newTable(bools, values string, short map[byte]string, special map[string]flagSpec) flagTable {
	t := flagTable{long: map[string]flagSpec{}, short: short}
	for _, n := range strings.Fields(bools) {
		t.long[n] = flagSpec{}
	}
	for _, n := range strings.Fields(values) {
		t.long[n] = flagSpec{value: true}
	}
	for n, f := range special {
		t.long[n] = f
	}
	return t
}

// generalFlags are nerdctl 1.7's global options. The agent sets the ones
// that choose where containers live: every later call (start, stop, rm,
// the reads of ctr) must find them where `run` put them.
var generalFlags = newTable("debug debug-full experimental insecure-registry",
	"cgroup-manager host-gateway-ip hosts-dir snapshotter storage-driver",
	map[byte]string{'H': "H", 'a': "a", 'n': "n", 'h': "help", 'v': "version"},
	map[string]flagSpec{
		"address":         {value: true, refuse: "the agent chooses containerd's socket (its --containerd-address)"},
		"host":            {value: true, refuse: "the agent chooses containerd's socket (its --containerd-address)"},
		"a":               {value: true, refuse: "the agent chooses containerd's socket (its --containerd-address)"},
		"H":               {value: true, refuse: "the agent chooses containerd's socket (its --containerd-address)"},
		"namespace":       {value: true, refuse: "the agent chooses the containerd namespace (its --containerd-namespace), where it finds its containers again"},
		"n":               {value: true, refuse: "the agent chooses the containerd namespace (its --containerd-namespace), where it finds its containers again"},
		"data-root":       {value: true, refuse: "the agent chooses nerdctl's data root: its later calls (start, stop, rm) must use the one `run` used"},
		"cni-path":        {value: true, refuse: "the agent chooses nerdctl's CNI plugin directory: the network hooks of a container must find the plugins `run` used"},
		"cni-netconfpath": {value: true, refuse: "the agent chooses nerdctl's CNI configuration directory: the network hooks of a container must find the networks `run` used"},
		"help":            {refuse: "nerdctl would print its help instead of running the container"},
		"version":         {refuse: "nerdctl would print its version instead of running the container"},
	})

// runFlags are nerdctl 1.7's `run` options (from `nerdctl run --help`).
// They are passed through as Ankaios passes them, but for those that
// would break what the agent guarantees.
var runFlags = newTable("init oom-kill-disable privileged read-only rootfs sig-proxy tty",
	"add-host attach blkio-weight cap-add cap-drop cgroup-conf cgroup-parent cgroupns cidfile cosign-certificate-identity "+
		"cosign-certificate-identity-regexp cosign-certificate-oidc-issuer cosign-certificate-oidc-issuer-regexp cosign-key "+
		"cpu-period cpu-quota cpu-shares cpus cpuset-cpus cpuset-mems detach-keys device dns dns-opt dns-option dns-search "+
		"entrypoint env env-file gpus group-add hostname init-binary ip ip6 ipc ipfs-address isolation kernel-memory "+
		"mac-address memory memory-reservation memory-swap memory-swappiness mount net network oom-score-adj pid pidfile "+
		"pids-limit platform publish pull rdt-class runtime security-opt shm-size stop-signal stop-timeout sysctl tmpfs "+
		"ulimit umask user uts verify volume volumes-from workdir",
	map[byte]string{'d': "detach", 'i': "interactive", 't': "tty", 'e': "env", 'l': "label", 'v': "volume", 'h': "hostname",
		'm': "memory", 'u': "user", 'w': "workdir", 'a': "attach", 'p': "publish"},
	map[string]flagSpec{
		"detach":      {refuse: "the agent runs every container detached"},
		"rm":          {refuse: "the agent removes the container when the workload is deleted, and reads its exit code after it ended"},
		"name":        {value: true, refuse: "nerdctl keeps a name until the container is removed through nerdctl, so a container removed behind the agent's back would block the instance's replacement; the agent finds containers by their labels"},
		"restart":     {value: true, refuse: "the agent restarts workloads by their restartPolicy; nerdctl's restart would start them behind its back"},
		"log-driver":  {value: true, refuse: "the agent's own logger keeps the output, which the agent's logs read"},
		"log-opt":     {value: true, refuse: "the agent's own logger keeps the output, which the agent's logs read"},
		"label-file":  {value: true, refuse: "it could set the labels the agent owns (name, agent, grapnel.*); give --label instead"},
		"interactive": {refuse: "a detached container has no standard input"},
		"help":        {refuse: "nerdctl would print its help instead of running the container"},
		"label":       {value: true, check: checkLabel},
	})

// checkLabel refuses the labels the agent owns: it finds its containers
// by name and agent, and keeps its own memory in grapnel.* (nerdctl/*
// are nerdctl's).
func checkLabel(at, option, value string) error {
	k, _, _ := strings.Cut(value, "=")
	if k == labelName || k == labelAgent || strings.HasPrefix(k, "grapnel.") || strings.HasPrefix(k, "nerdctl/") {
		return runtime.BadConfig(at, "%s %q: the agent sets label %s itself", option, value, k)
	}
	return nil
}

// checkFlags reads list as nerdctl's flag parser does (--long=value,
// --long value, -s value, -svalue, combined short booleans) and refuses
// an option that is unknown or would break the agent's guarantees, an
// option without its value, and anything that is not an option, which
// would end nerdctl's options there (it would read it as the subcommand
// or the image).
func checkFlags(field string, list []string, table flagTable, what string) error {
	for i := 0; i < len(list); i++ {
		item := list[i]
		at := fmt.Sprintf("%s[%d]", field, i)
		next := func(option string) (string, string, error) {
			if i+1 >= len(list) {
				return "", at, runtime.BadConfig(at, "%q needs a value", option)
			}
			i++
			return list[i], fmt.Sprintf("%s[%d]", field, i), nil // the value is at fault
		}
		switch {
		case item == "--" || !strings.HasPrefix(item, "-") || item == "-":
			return runtime.BadConfig(at, "%q is not an option: nerdctl would stop reading options there (the containerd runtime reads the image from `image` and the command from `commandArgs`)", item)
		case strings.HasPrefix(item, "--"):
			name, value, hasValue := strings.Cut(item[2:], "=")
			spec, ok := table.long[name]
			if !ok {
				return runtime.BadConfig(at, "%q is not %s", item, what)
			}
			if spec.refuse != "" {
				return runtime.BadConfig(at, "%q: %s", item, spec.refuse)
			}
			if !spec.value {
				if hasValue {
					if _, err := strconv.ParseBool(value); err != nil {
						return runtime.BadConfig(at, "%q: expected true or false", item)
					}
				}
				continue
			}
			vat := at
			if !hasValue {
				var err error
				if value, vat, err = next(item); err != nil {
					return err
				}
			}
			if spec.check != nil {
				if err := spec.check(vat, "--"+name, value); err != nil {
					return err
				}
			}
		default:
			// Short options: booleans may be combined; the first one
			// that takes a value takes the rest of the item, or the
			// next item.
			for j := 1; j < len(item); j++ {
				name, ok := table.short[item[j]]
				spec := table.long[name]
				if !ok {
					return runtime.BadConfig(at, "%q: -%c is not %s", item, item[j], what)
				}
				if spec.refuse != "" {
					return runtime.BadConfig(at, "%q: %s", item, spec.refuse)
				}
				if !spec.value {
					if j+1 < len(item) && item[j+1] == '=' {
						if _, err := strconv.ParseBool(item[j+2:]); err != nil {
							return runtime.BadConfig(at, "%q: expected true or false", item)
						}
						break // -t=false: the rest is the value
					}
					continue
				}
				value, vat := strings.TrimPrefix(item[j+1:], "="), at
				if j+1 == len(item) {
					var err error
					if value, vat, err = next(item); err != nil {
						return err
					}
				}
				if spec.check != nil {
					if err := spec.check(vat, "-"+string(item[j]), value); err != nil {
						return err
					}
				}
				break
			}
		}
	}
	return nil
}
