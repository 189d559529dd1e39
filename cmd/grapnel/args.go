package main

import "strings"

// Global flags that take a value; the others are switches.
var globalValueFlags = map[string]bool{
	"--server-url": true, "-s": true, "--ca_pem": true, "--crt_pem": true, "--key_pem": true, "--response-timeout": true,
	"--ank-config": true,
}

// globalValueShort is the shorthand of a global value flag other than -s
// (-x, --ank-config): its value is passed on as it is.
const globalValueShort = 'x'

// Shorthands of global switches that may precede s in a group like -ks.
const globalSwitches = "kvqh"

// spellOutGlobalS rewrites a -s given before the subcommand to
// --server-url. In ank (clap) global options are only taken before the
// subcommand, so `ank -s URL logs wl -s TIME` means server, then since.
// Cobra parses all flags with the subcommand's flag set, where -s is
// --since (logs) or --state (get workloads); spelling the global one out
// keeps the ank meaning wherever the user puts it first.
func spellOutGlobalS(args []string) []string {
	out := make([]string, 0, len(args)+1)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			// The first positional argument is the subcommand: from here
			// on, flags belong to it.
			return append(out, args[i:]...)
		}
		if strings.HasPrefix(a, "--") {
			out = append(out, a)
			if globalValueFlags[a] && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
			continue
		}
		// A shorthand group: switches, optionally ending in s[VALUE].
		group := a[1:]
		j := strings.IndexFunc(group, func(r rune) bool { return !strings.ContainsRune(globalSwitches, r) })
		if j >= 0 && group[j] == globalValueShort {
			out = append(out, a)
			if j == len(group)-1 && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
			continue
		}
		if j < 0 || group[j] != 's' {
			out = append(out, a)
			continue
		}
		if j > 0 {
			out = append(out, "-"+group[:j])
		}
		value := strings.TrimPrefix(group[j+1:], "=")
		switch {
		case value != "":
			out = append(out, "--server-url="+value)
		case i+1 < len(args):
			i++
			out = append(out, "--server-url", args[i])
		default:
			out = append(out, "--server-url")
		}
	}
	return out
}
