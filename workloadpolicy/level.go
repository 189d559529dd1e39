package workloadpolicy

import (
	"fmt"
	"strings"
)

// Level is how much a workload may ask for, after Kubernetes' Pod
// Security Standards. The zero value is Baseline, the default of the
// agent and the server.
type Level uint8

// Levels.
const (
	// Baseline admits what has no known way to the host: no privileged
	// container, no host path, no device, no host namespace, no
	// capability beyond the usual ones, no weakened confinement, no
	// root process.
	Baseline Level = iota
	// Restricted is Baseline hardened: containers drop every capability,
	// cannot gain privileges and run as a non-root uid; a process
	// workload runs under its own uid and names no user.
	Restricted
	// Privileged admits everything but a uid of another workload.
	Privileged
	// never is what no level admits.
	never
)

// Levels lists the levels from the least to the most permissive.
var Levels = []Level{Restricted, Baseline, Privileged}

func (l Level) String() string {
	switch l {
	case Baseline:
		return "baseline"
	case Restricted:
		return "restricted"
	case Privileged:
		return "privileged"
	}
	return fmt.Sprintf("level(%d)", uint8(l))
}

// ParseLevel reads a level's name.
func ParseLevel(s string) (Level, error) {
	for _, l := range Levels {
		if strings.EqualFold(strings.TrimSpace(s), l.String()) {
			return l, nil
		}
	}
	return Baseline, fmt.Errorf("%q: not a workload policy level (privileged, baseline or restricted)", s)
}

// rank orders the levels by what they admit.
func (l Level) rank() int {
	switch l {
	case Restricted:
		return 0
	case Baseline:
		return 1
	case Privileged:
		return 2
	}
	return 3
}

// Admits reports whether a setting that needs level need may run at l.
func (l Level) Admits(need Level) bool { return l.rank() >= need.rank() }
