package deploy_test

import (
	"os"
	"strings"
	"testing"
)

// numberWords names the counts the docs write out.
var numberWords = []string{"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"}

// The capabilities the docs give the agent are those of its unit: as
// many, and each named (deploy/README.md said six while the unit kept
// seven, issue 31).
func TestAgentCapabilitiesDocumented(t *testing.T) {
	u := readUnit(t, "systemd/grapnel-agent.service")
	caps := strings.Fields(u.one(t, "CapabilityBoundingSet"))
	if len(caps) == 0 || len(caps) >= len(numberWords) {
		t.Fatalf("%s: CapabilityBoundingSet has %d capabilities", u.path, len(caps))
	}
	count := numberWords[len(caps)] + " capabilities"
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(string(readme)), " "), count) {
		t.Errorf("deploy/README.md does not say %q: the unit keeps %v", count, caps)
	}
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(ops), "\n## systemd\n")
	if !ok {
		t.Fatal(`docs/operations.md: no section "## systemd"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	section = strings.Join(strings.Fields(section), " ") // one line: prose wraps anywhere
	if !strings.Contains(section, count) {
		t.Errorf("docs/operations.md, systemd: does not say %q", count)
	}
	for _, c := range caps {
		if !strings.Contains(section, "`"+c+"`") && !strings.Contains(section, "`"+c+"/") && !strings.Contains(section, "/`"+c+"`") {
			t.Errorf("docs/operations.md, systemd: does not name %s, which the agent unit keeps", c)
		}
	}
}
