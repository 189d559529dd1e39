package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/grapnel-io/grapnel/chaos/check"
)

// ErrBadReport means a report file could not be read back.
var ErrBadReport = errors.New("bad report")

// Fault is one fault injected: its kind ("leader-kill", "partition-
// minority", ...), what it hit, when, and when it was healed (zero while
// it was not, or for a fault with nothing to heal, like a kill).
type Fault struct {
	Kind   string
	Target string
	At     time.Time
	Healed time.Time
	Detail string
	// Detected is when the cluster was seen to report a storage fault
	// (its StorageFailed problem), Repaired when the fault's target was
	// back (a healthy voter again; after a power cut, the cluster settled
	// with every stable workload running); zero when not measured or it
	// never was.
	Detected time.Time `json:",omitzero"`
	Repaired time.Time `json:",omitzero"`
	// PowerCut is what each flash mount lost in a power cut.
	PowerCut []MountLoss `json:",omitempty"`
}

// MountLoss is what one flash mount lost in a power cut (chaos/flashfs
// MountCut): unsynced bytes and files, namespace operations undone, the
// torn last write, and the undo steps it could not do (none in a correct
// run).
type MountLoss struct {
	Mount        string
	FilesDropped int
	BytesDropped int64
	OpsUndone    int
	Torn         string   `json:",omitempty"`
	Problems     []string `json:",omitempty"`
}

// Sample is the cluster as seen at At: the leader and its term ("" and 0
// while none), the writes acknowledged since the previous sample, and the
// agents attached to the leader.
type Sample struct {
	At       time.Time
	Leader   string
	Term     uint64
	Acks     int
	Attached []string
}

// Report is one run.
type Report struct {
	Seed       int64
	Start, End time.Time
	Faults     []Fault
	Samples    []Sample
	// Agents are the agents whose attachment the timeline shows, one
	// lane each; empty means every agent seen in a sample.
	Agents []string
	// Figures maps a fault kind to its failover figures.
	Figures map[string]Figures
	// Comparison maps a fault kind to the same figures measured under
	// another timing (hashicorp/raft's defaults); nil when not measured.
	Comparison map[string]Figures
	// Flash maps a flash fault kind to its figures; nil without flash
	// faults. FlashModel is the flash file system's durability model
	// ("per-directory" or "journal"), empty when the campaign ran
	// without it.
	Flash        map[string]FlashFigures `json:",omitempty"`
	FlashModel   string                  `json:",omitempty"`
	Availability float64
	// Checks are the checkers' verdicts.
	Checks []check.Result
	// Intrusions counts the intruder's attempts of every intrusion by
	// kind: tried, refused, accepted, not tried (no such key yet).
	Intrusions []check.AttemptTally `json:",omitempty"`
	// Skipped lists the fault kinds the plan left out, each with why
	// ("upgrade: the previous release could not be built: ...").
	Skipped []string `json:",omitempty"`
}

// Passed reports whether every check passed.
func (r *Report) Passed() bool {
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// agents is every agent with a lane: Agents, or all seen in the samples.
func (r *Report) agents() []string {
	if len(r.Agents) > 0 {
		return r.Agents
	}
	var out []string
	for _, s := range r.Samples {
		for _, a := range s.Attached {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	slices.Sort(out)
	return out
}

// WriteJSON writes the whole report, indented.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Load reads a report written by WriteJSON.
func Load(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadReport, path, err)
	}
	return &r, nil
}
