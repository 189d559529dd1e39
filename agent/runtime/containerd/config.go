package containerd

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/yamlnode"
)

// runConfig is a parsed containerd runtimeConfig with the Ankaios field
// names, its commandOptions already translated into `ctr run` options.
type runConfig struct {
	Image       string
	CommandArgs []string
	// RunOptions are the `ctr run` options commandOptions stand for.
	RunOptions []string
	// HostNetwork is --network=host; a workload otherwise gets a network
	// namespace of its own with only the loopback interface.
	HostNetwork bool
	// capAdd and capDrop collect --cap-add and --cap-drop until the
	// options are read; dropAll is --cap-drop ALL.
	capAdd, capDrop []string
	dropAll         bool
}

// defaultCaps are the capabilities containerd gives a container by
// default (those of Docker and nerdctl): what --cap-drop ALL drops.
var defaultCaps = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"}

// configError names the runtimeConfig field that was rejected and why.
type configError struct {
	Field  string
	Reason string
}

func (e *configError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap lets errors.Is(err, runtime.ErrBadConfig) hold.
func (e *configError) Unwrap() error { return runtime.ErrBadConfig }

func badConfig(field, format string, args ...any) error {
	return &configError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

const root = "runtimeConfig"

// parseConfig decodes a rendered runtimeConfig, refusing unknown or
// repeated keys and every commandOption the runtime cannot honour, so
// that nothing a workload asks for is silently dropped.
func parseConfig(text string) (runConfig, error) {
	var c runConfig
	var general, command []string
	err := yamlnode.Fields(text, root, "generalOptions, image, commandOptions and commandArgs", badConfig, func(field, key string, v *yaml.Node) (err error) {
		switch key {
		case "generalOptions":
			general, err = stringList(field, v)
		case "commandOptions":
			command, err = stringList(field, v)
		case "commandArgs":
			c.CommandArgs, err = stringList(field, v)
		case "image":
			c.Image, err = imageName(field, v)
		default:
			err = badConfig(field, "unknown field (expected generalOptions, image, commandOptions or commandArgs)")
		}
		return err
	})
	if err != nil {
		return runConfig{}, err
	}
	if c.Image == "" {
		return runConfig{}, badConfig(root+".image", "required")
	}
	if len(general) > 0 {
		return runConfig{}, badConfig(root+".generalOptions[0]", "%q: the containerd runtime takes no generalOptions (the agent chooses containerd's socket and namespace)", general[0])
	}
	if err := translate(&c, command); err != nil {
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
		return nil, badConfig(field, "expected a list of strings")
	case bad >= 0:
		return nil, badConfig(fmt.Sprintf("%s[%d]", field, bad), "expected a string")
	}
	return out, nil
}

func imageName(field string, n *yaml.Node) (string, error) {
	if yamlnode.IsNull(n) {
		return "", badConfig(field, "required")
	}
	if n.Kind != yaml.ScalarNode {
		return "", badConfig(field, "expected a string")
	}
	img := strings.TrimSpace(n.Value)
	switch {
	case img == "":
		return "", badConfig(field, "required")
	case strings.HasPrefix(img, "-"):
		return "", badConfig(field, "must not start with '-'")
	case strings.ContainsAny(img, " \t\n"):
		return "", badConfig(field, "must not contain whitespace")
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

// commandOption is one nerdctl `run` option the runtime honours.
type commandOption struct {
	long  string
	short byte
	value bool // takes a value
}

// commandOptions are the nerdctl (Docker) `run` options the runtime
// translates into `ctr run` options. They are a subset of podman's run
// options with the same meaning, so the workload policy judges them with
// its podman table. Anything else is refused with the reason.
var commandOptions = []commandOption{
	{long: "env", short: 'e', value: true},
	{long: "workdir", short: 'w', value: true},
	{long: "network", value: true},
	{long: "net", value: true},
	{long: "volume", short: 'v', value: true},
	{long: "mount", value: true},
	{long: "cap-add", value: true},
	{long: "cap-drop", value: true},
	{long: "label", short: 'l', value: true},
	{long: "memory", short: 'm', value: true},
	{long: "cpus", value: true},
	{long: "privileged"},
	{long: "read-only"},
}

// managed are options the agent sets itself.
var managed = map[string]string{
	"name": "the agent names the container", "detach": "the agent runs every container detached",
	"d": "the agent runs every container detached", "rm": "the agent removes the container when the workload is deleted",
}

// translate reads commandOptions as nerdctl's flag parser does for the
// forms it accepts (--long=value, --long value, -s value, --bool) and
// appends the `ctr run` options they stand for. Combined short flags are
// refused, so that the policy and the runtime read one list one way.
func translate(c *runConfig, list []string) error {
	field := root + ".commandOptions"
	for i := 0; i < len(list); i++ {
		item := list[i]
		at := fmt.Sprintf("%s[%d]", field, i)
		var name, value string
		hasValue := false
		switch {
		case strings.HasPrefix(item, "--") && len(item) > 2:
			name, value, hasValue = strings.Cut(item[2:], "=")
		case strings.HasPrefix(item, "-") && len(item) == 2:
			name = item[1:]
		default:
			return badConfig(at, "%q is not an option: the containerd runtime reads the image from `image` and the command from `commandArgs`", item)
		}
		if why, ok := managed[name]; ok {
			return badConfig(at, "%q: %s", item, why)
		}
		opt := findOption(name)
		if opt == nil {
			return badConfig(at, "%q is not an option the containerd runtime supports (it supports %s)", item, supportedList())
		}
		if !opt.value {
			if hasValue {
				b, err := strconv.ParseBool(value)
				if err != nil {
					return badConfig(at, "%q: expected true or false", item)
				}
				if !b {
					continue
				}
			}
			c.RunOptions = append(c.RunOptions, "--"+opt.long)
			continue
		}
		if !hasValue {
			if i+1 >= len(list) {
				return badConfig(at, "%q needs a value", item)
			}
			i++
			value = list[i]
			at = fmt.Sprintf("%s[%d]", field, i) // the value is at fault
		}
		if err := c.option(at, opt.long, value); err != nil {
			return err
		}
	}
	c.capabilities()
	return nil
}

// capabilities appends the --cap-add and --cap-drop options with
// Docker's meaning, whatever their order: the drops first (ALL being every
// default capability), then the adds. ctr applies its drops after its
// adds and knows no ALL, so a capability both dropped and added is only
// added.
func (c *runConfig) capabilities() {
	drops := c.capDrop
	if c.dropAll {
		drops = defaultCaps
	}
	for _, cp := range c.capAdd {
		c.RunOptions = append(c.RunOptions, "--cap-add", cp)
	}
	for _, cp := range drops {
		if !slices.Contains(c.capAdd, cp) {
			c.RunOptions = append(c.RunOptions, "--cap-drop", cp)
		}
	}
}

func findOption(name string) *commandOption {
	for i := range commandOptions {
		o := &commandOptions[i]
		if o.long == name || (len(name) == 1 && o.short == name[0]) {
			return o
		}
	}
	return nil
}

func supportedList() string {
	var names []string
	for _, o := range commandOptions {
		n := "--" + o.long
		if o.short != 0 {
			n += "/-" + string(o.short)
		}
		names = append(names, n)
	}
	return strings.Join(names, ", ")
}

// option appends the `ctr run` form of one valued option.
func (c *runConfig) option(at, name, value string) error {
	switch name {
	case "env":
		if !strings.Contains(value, "=") {
			return badConfig(at, "--env %q: expected NAME=VALUE (ctr does not copy the agent's own variables)", value)
		}
		c.RunOptions = append(c.RunOptions, "--env", value)
	case "workdir":
		if !strings.HasPrefix(value, "/") {
			return badConfig(at, "--workdir %q: expected an absolute path", value)
		}
		c.RunOptions = append(c.RunOptions, "--cwd", value)
	case "network", "net":
		switch value {
		case "host":
			c.HostNetwork = true
			c.RunOptions = append(c.RunOptions, "--net-host")
		case "none":
		default:
			return badConfig(at, "--%s %q: the containerd runtime supports host and none", name, value)
		}
	case "volume":
		parts := strings.Split(value, ":")
		if len(parts) < 2 || len(parts) > 3 || !strings.HasPrefix(parts[0], "/") || !strings.HasPrefix(parts[1], "/") {
			return badConfig(at, "--volume %q: expected /HOST:/CONTAINER[:ro|rw] (named volumes are not supported)", value)
		}
		ro := false
		if len(parts) == 3 {
			switch parts[2] {
			case "ro":
				ro = true
			case "rw":
			default:
				return badConfig(at, "--volume %q: options other than ro and rw are not supported", value)
			}
		}
		m, err := bindMount(parts[0], parts[1], ro)
		if err != nil {
			return badConfig(at, "--volume %q: %v", value, err)
		}
		c.RunOptions = append(c.RunOptions, "--mount", m)
	case "mount":
		src, dst, ro, err := parseMount(value)
		if err != nil {
			return badConfig(at, "--mount %q: %v", value, err)
		}
		m, err := bindMount(src, dst, ro)
		if err != nil {
			return badConfig(at, "--mount %q: %v", value, err)
		}
		c.RunOptions = append(c.RunOptions, "--mount", m)
	case "cap-add", "cap-drop":
		cp := strings.ToUpper(value)
		switch {
		case cp == "ALL" && name == "cap-drop":
			c.dropAll = true
			return nil
		case cp == "ALL":
			return badConfig(at, "--cap-add ALL: name the capabilities (or use --privileged)")
		case !strings.HasPrefix(cp, "CAP_"):
			cp = "CAP_" + cp
		}
		if name == "cap-add" {
			c.capAdd = append(c.capAdd, cp)
		} else {
			c.capDrop = append(c.capDrop, cp)
		}
	case "label":
		k, _, _ := strings.Cut(value, "=")
		if k == labelName || k == labelAgent || strings.HasPrefix(k, "grapnel.") {
			return badConfig(at, "--label %q: the agent sets label %s itself", value, k)
		}
		c.RunOptions = append(c.RunOptions, "--label", value)
	case "memory":
		n, err := parseBytes(value)
		if err != nil {
			return badConfig(at, "--memory %q: %v", value, err)
		}
		c.RunOptions = append(c.RunOptions, "--memory-limit", strconv.FormatInt(n, 10))
	case "cpus":
		f, err := strconv.ParseFloat(value, 64)
		if err != nil || f <= 0 {
			return badConfig(at, "--cpus %q: expected a positive number", value)
		}
		c.RunOptions = append(c.RunOptions, "--cpus", value)
	}
	return nil
}

// parseMount reads a Docker --mount of type bind.
func parseMount(v string) (src, dst string, ro bool, err error) {
	typ := "volume"
	for _, kv := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(kv, "=")
		switch k {
		case "type":
			typ = val
		case "source", "src":
			src = val
		case "destination", "dst", "target":
			dst = val
		case "readonly", "ro":
			ro = val == "" || val == "true" || val == "1"
		default:
			return "", "", false, fmt.Errorf("key %q is not supported", k)
		}
	}
	if typ != "bind" {
		return "", "", false, fmt.Errorf("only type=bind is supported")
	}
	if !strings.HasPrefix(src, "/") || !strings.HasPrefix(dst, "/") {
		return "", "", false, fmt.Errorf("expected an absolute source and target")
	}
	return src, dst, ro, nil
}

// parseBytes reads a Docker memory size: a number with an optional
// b, k, m or g suffix.
func parseBytes(v string) (int64, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	mult := int64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'b':
			s = s[:len(s)-1]
		case 'k':
			mult, s = 1<<10, s[:len(s)-1]
		case 'm':
			mult, s = 1<<20, s[:len(s)-1]
		case 'g':
			mult, s = 1<<30, s[:len(s)-1]
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("expected a positive size such as 64m")
	}
	return n * mult, nil
}

// bindMount is one `ctr run --mount` value. ctr splits it at commas and
// colons (options), so paths holding either are refused.
func bindMount(host, target string, readonly bool) (string, error) {
	for _, p := range []string{host, target} {
		if strings.ContainsAny(p, ",:") {
			return "", fmt.Errorf("path %q contains a comma or a colon, which ctr's --mount cannot express", p)
		}
	}
	opts := "rbind:rw"
	if readonly {
		opts = "rbind:ro"
	}
	return "type=bind,src=" + host + ",dst=" + target + ",options=" + opts, nil
}
