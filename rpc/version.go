package rpc

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/grapnel-io/grapnel/internal/errs"
)

// ProtocolVersion is the Ankaios protocol version Grapnel speaks; it is
// sent in AgentHello, CommanderHello and the control interface Hello.
const ProtocolVersion = "1.0.0"

// supportedMajor is the major of ProtocolVersion; since Ankaios v1 only the
// major has to match.
const supportedMajor = 1

// CheckProtocolVersion accepts a peer's protocol version if it is a
// semantic version (MAJOR.MINOR.PATCH with optional pre-release and build
// suffixes) with major 1. Every rejection, of a version that is not
// semantic ("1") or of another major, has Ankaios' text
// ("Unsupported protocol version '1'. Currently supported '1'", as
// check_version_compatibility in Ankaios' common crate words it) and wraps
// errs.ErrUnsupportedProtocol, so the server answers FailedPrecondition as
// upstream does.
func CheckProtocolVersion(v string) error {
	if major, err := semverMajor(v); err == nil && major == supportedMajor {
		return nil
	}
	return errs.WithText(errs.ErrUnsupportedProtocol, fmt.Sprintf("Unsupported protocol version '%s'. Currently supported '%d'", v, supportedMajor))
}

// semverMajor validates v as a semantic version 2.0.0 and returns its
// major number.
func semverMajor(v string) (uint64, error) {
	core := v
	if i := strings.IndexByte(core, '+'); i >= 0 {
		if err := checkIdents(core[i+1:], "build metadata", false); err != nil {
			return 0, err
		}
		core = core[:i]
	}
	if i := strings.IndexByte(core, '-'); i >= 0 {
		if err := checkIdents(core[i+1:], "pre-release", true); err != nil {
			return 0, err
		}
		core = core[:i]
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return 0, fmt.Errorf("expected MAJOR.MINOR.PATCH")
	}
	var major uint64
	for i, p := range parts {
		if !isNumeric(p) || (len(p) > 1 && p[0] == '0') {
			return 0, fmt.Errorf("'%s' is not a version number", p)
		}
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("'%s' is not a version number", p)
		}
		if i == 0 {
			major = n
		}
	}
	return major, nil
}

// checkIdents validates dot-separated identifiers of [0-9A-Za-z-];
// numeric pre-release identifiers must not have leading zeros.
func checkIdents(s, what string, noLeadingZero bool) error {
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return fmt.Errorf("empty %s identifier", what)
		}
		for _, c := range id {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
				return fmt.Errorf("invalid character %q in %s", c, what)
			}
		}
		if noLeadingZero && isNumeric(id) && len(id) > 1 && id[0] == '0' {
			return fmt.Errorf("%s identifier '%s' has a leading zero", what, id)
		}
	}
	return nil
}

func isNumeric(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
