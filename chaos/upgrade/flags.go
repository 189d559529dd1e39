package upgrade

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// helpFlagRe finds the flags of a pflag usage text: "  -a, --address",
// "      --name".
var helpFlagRe = regexp.MustCompile(`(?m)^\s+(?:(-[A-Za-z0-9]),\s+)?(--[A-Za-z0-9][A-Za-z0-9_-]*)`)

// ParseHelpFlags lists the flags a program's --help text shows, long
// ("--name") and short ("-a") alike.
func ParseHelpFlags(help string) map[string]bool {
	out := map[string]bool{}
	for _, m := range helpFlagRe.FindAllStringSubmatch(help, -1) {
		if m[1] != "" {
			out[m[1]] = true
		}
		out[m[2]] = true
	}
	return out
}

// helpText runs bin with args and returns what it printed, whatever its
// exit status (pflag's --help may exit 0 or 2).
func helpText(ctx context.Context, bin string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return string(out)
}

// Flags are the flags one binary takes, from its --help.
type Flags map[string]bool

// ReadFlags reads bin's flags from its --help.
func ReadFlags(ctx context.Context, bin string) (Flags, error) {
	f := Flags(ParseHelpFlags(helpText(ctx, bin, "--help")))
	if !f["--help"] && len(f) < 3 {
		return nil, fmt.Errorf("%s --help shows no flags", bin)
	}
	return f, nil
}

// Unknown lists the flags among args that f does not have: starting a
// binary with them would fail (an old release must never get a flag of
// a newer one).
func (f Flags) Unknown(args []string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			continue
		}
		name, _, _ := strings.Cut(a, "=")
		if !strings.HasPrefix(name, "--") && len(name) > 2 {
			name = name[:2] // -k, -a: a short flag with its value attached
		}
		if isNumber(name) {
			continue
		}
		if !f[name] {
			out = append(out, name)
		}
	}
	return out
}

func isNumber(s string) bool {
	_, err := fmt.Sscan(s, new(float64))
	return err == nil
}

// FinalizeUsage is what `grapnel cluster upgrade finalize --help` prints
// in its usage line when the build has the command.
const FinalizeUsage = "grapnel cluster upgrade finalize"

// HasFinalize says whether the CLI at bin has `cluster upgrade finalize`:
// cobra answers --help of an unknown subcommand with its parent's help,
// so the usage line must name the command itself.
func HasFinalize(ctx context.Context, bin string) bool {
	return strings.Contains(helpText(ctx, bin, "cluster", "upgrade", "finalize", "--help"), FinalizeUsage)
}
