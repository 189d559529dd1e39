package workloadpolicy

import (
	"fmt"
	"strings"
)

// Podman reads its options with spf13/pflag; the functions here read a
// list of options exactly as pflag does, so that the policy judges the
// option podman will see and not another: `--env --privileged` sets an
// environment variable, `-itv/:/host` is -i, -t and the volume /:/host,
// `-v=/x` is the volume /x, and `--privileged false` makes "false" the
// image. podman run stops reading options at the first item that is not
// one (the image) and at "--".

// optKind is how pflag takes an option's value.
type optKind uint8

const (
	// valueOpt takes a value: --opt=v, --opt v, -o v, -ov, -o=v; the
	// next item is the value whatever it looks like.
	valueOpt optKind = iota
	// boolOpt never takes the next item: --opt is --opt=true.
	boolOpt
)

// option is one option podman knows, with what the policy makes of it.
type option struct {
	long  string
	short byte // 0: none
	kind  optKind
	// judge classifies one occurrence; nil: the option never matters.
	judge func(o occurrence, out *finder)
}

// optionTable finds options by their long name (after podman's aliases)
// and by their letter.
type optionTable struct {
	long    map[string]*option
	short   map[byte]*option
	aliases map[string]string
}

func newTable(aliases map[string]string, opts ...option) optionTable {
	t := optionTable{long: map[string]*option{}, short: map[byte]*option{}, aliases: aliases}
	for i := range opts {
		o := &opts[i]
		if _, dup := t.long[o.long]; dup {
			panic("workloadpolicy: option --" + o.long + " listed twice")
		}
		t.long[o.long] = o
		if o.short != 0 {
			t.short[o.short] = o
		}
	}
	return t
}

// occurrence is one option as pflag reads it.
type occurrence struct {
	opt *option
	// value is what pflag hands the option: "true" for a bool option
	// written bare.
	value string
	// field is the item the option was written in, index its index.
	field string
	index int
	// written is how it was written, for the key of a setting.
	written string
}

// stop is why pflag stops reading options before the end of the list.
type stop struct {
	index  int
	reason string
	// positional: the item is not an option (podman run takes it as the
	// image, and the rest as the command).
	positional bool
}

// readFlags reads items as pflag does with interspersed arguments off,
// and returns the options up to the first item that is not one. A stop
// is nil when every item was read as an option.
func readFlags(t optionTable, field string, items []string) ([]occurrence, *stop) {
	var occs []occurrence
	at := func(i int) string { return fmt.Sprintf("%s[%d]", field, i) }
	for i := 0; i < len(items); {
		item, start := items[i], i
		i++
		switch {
		case len(item) < 2 || item[0] != '-':
			return occs, &stop{index: start, positional: true, reason: fmt.Sprintf("%q is not an option: podman takes it as the image, and every item after it as the container's command", item)}
		case item == "--":
			return occs, &stop{index: start, positional: true, reason: "\"--\" ends podman's options: podman takes the next item as the image"}
		case item[1] == '-':
			name, value, hasValue := strings.Cut(item[2:], "=")
			if name == "" || name[0] == '-' {
				return occs, &stop{index: start, reason: fmt.Sprintf("%q is not an option podman reads", item)}
			}
			if a, ok := t.aliases[name]; ok {
				name = a
			}
			o := t.long[name]
			if o == nil {
				return occs, &stop{index: start, reason: fmt.Sprintf("--%s is not an option the workload policy knows, so it cannot tell what it does (nor what follows it)", name)}
			}
			written := item
			switch {
			case hasValue:
			case o.kind == boolOpt:
				value = "true"
			case i < len(items):
				value = items[i]
				written += " " + value
				i++
			default:
				return occs, &stop{index: start, reason: fmt.Sprintf("--%s needs a value, and podman would take it from the options the agent adds after this list", name)}
			}
			occs = append(occs, occurrence{opt: o, value: value, field: at(start), index: start, written: written})
		default:
			shorts := item[1:]
			for len(shorts) > 0 {
				o := t.short[shorts[0]]
				if o == nil {
					return occs, &stop{index: start, reason: fmt.Sprintf("-%c (in %q) is not an option the workload policy knows, so it cannot tell what it does (nor what follows it)", shorts[0], item)}
				}
				rest, value, written := shorts[1:], "", "-"+shorts[:1]
				switch {
				case len(shorts) > 2 && shorts[1] == '=':
					value, rest, written = shorts[2:], "", "-"+shorts
				case o.kind == boolOpt:
					value = "true"
				case len(shorts) > 1:
					value, rest, written = shorts[1:], "", "-"+shorts
				case i < len(items):
					value = items[i]
					written += " " + value
					i++
				default:
					return occs, &stop{index: start, reason: fmt.Sprintf("-%c needs a value, and podman would take it from the options the agent adds after this list", shorts[0])}
				}
				occs = append(occs, occurrence{opt: o, value: value, field: at(start), index: start, written: written})
				shorts = rest
			}
		}
	}
	return occs, nil
}
