package state

// CompleteState is the whole observable state of a cluster: what users asked
// for, what agents report and which agents are connected.
type CompleteState struct {
	DesiredState   State
	WorkloadStates WorkloadStatesMap
	Agents         AgentMap
}

// State is the desired state: a manifest as accepted.
type State struct {
	APIVersion string
	Workloads  map[string]*Workload
	// Configs are config items: each is a string, a []any or a
	// map[string]any of config items.
	Configs map[string]any
}

// Workload is one workload of the desired state. Agent, RuntimeConfig and
// file contents may hold handlebars templates until rendered.
//
// Its json tags are the keys of snapshot records 2 and 4: frozen (see
// Rendered).
type Workload struct {
	Agent                  string                  `json:"Agent"`
	RestartPolicy          RestartPolicy           `json:"RestartPolicy"`
	Dependencies           map[string]AddCondition `json:"Dependencies"`
	Tags                   map[string]string       `json:"Tags"`
	Runtime                string                  `json:"Runtime"`
	RuntimeConfig          string                  `json:"RuntimeConfig"`
	ControlInterfaceAccess ControlInterfaceAccess  `json:"ControlInterfaceAccess"`
	// Configs maps a template alias to a key of State.Configs.
	Configs map[string]string `json:"Configs"`
	Files   []File            `json:"Files"`
}

// File is a file mounted read-only into a workload.
type File struct {
	MountPoint string `json:"MountPoint"`
	// Content is the file content; base64 text when Binary is set.
	Content string `json:"Content"`
	Binary  bool   `json:"Binary"`
}

// ControlInterfaceAccess lists the rules that open the control interface.
// Access is denied unless an allow rule matches and no deny rule does.
type ControlInterfaceAccess struct {
	AllowRules []AccessRule `json:"AllowRules"`
	DenyRules  []AccessRule `json:"DenyRules"`
}

// AccessRule is either a state rule (IsLogRule false) or a log rule.
type AccessRule struct {
	IsLogRule     bool      `json:"IsLogRule"`
	Operation     ReadWrite `json:"Operation"`     // state rules only
	FilterMasks   []string  `json:"FilterMasks"`   // state rules only
	WorkloadNames []string  `json:"WorkloadNames"` // log rules only
}

// RestartPolicy says when an agent restarts a workload that exited.
type RestartPolicy string

// Restart policies; the names are the manifest spelling.
const (
	RestartNever     RestartPolicy = "NEVER"
	RestartOnFailure RestartPolicy = "ON_FAILURE"
	RestartAlways    RestartPolicy = "ALWAYS"
)

// AddCondition is the state a dependency must reach before a workload starts.
type AddCondition string

// Add conditions; the names are the manifest spelling.
const (
	AddCondRunning   AddCondition = "ADD_COND_RUNNING"
	AddCondSucceeded AddCondition = "ADD_COND_SUCCEEDED"
	AddCondFailed    AddCondition = "ADD_COND_FAILED"
)

// DeleteCondition is the state a dependent must be in before its dependency
// may be deleted.
type DeleteCondition string

// Delete conditions, as in the Ankaios wire enum.
const (
	DelCondRunning              DeleteCondition = "DEL_COND_RUNNING"
	DelCondNotPendingNorRunning DeleteCondition = "DEL_COND_NOT_PENDING_NOR_RUNNING"
)

// ReadWrite is the operation a state rule grants or denies.
type ReadWrite string

// Operations; the names are the manifest spelling.
const (
	RWNothing   ReadWrite = "Nothing"
	RWRead      ReadWrite = "Read"
	RWWrite     ReadWrite = "Write"
	RWReadWrite ReadWrite = "ReadWrite"
)

// WorkloadStatesMap holds execution states keyed agent → workload → id.
type WorkloadStatesMap map[string]map[string]map[string]ExecutionState

// AgentMap holds the connected agents.
type AgentMap map[string]*AgentAttributes

// AgentAttributes is what the server knows of a connected agent.
// Its json tags are the keys of snapshot record 6: frozen (see Rendered).
type AgentAttributes struct {
	Status AgentStatus       `json:"Status"`
	Tags   map[string]string `json:"Tags"`
}

// AgentStatus is an agent's last load report. Nil fields mean "not yet
// reported", as upstream creates null entries for a new agent.
type AgentStatus struct {
	CPUUsage   *uint32 `json:"CPUUsage"`
	FreeMemory *uint64 `json:"FreeMemory"`
}

// Clone returns a deep copy of w.
func (w *Workload) Clone() *Workload {
	if w == nil {
		return nil
	}
	c := *w
	c.Dependencies = cloneMap(w.Dependencies)
	c.Tags = cloneMap(w.Tags)
	c.Configs = cloneMap(w.Configs)
	c.ControlInterfaceAccess = w.ControlInterfaceAccess.Clone()
	if w.Files != nil {
		c.Files = append([]File(nil), w.Files...)
	}
	return &c
}

// Clone returns a deep copy of a.
func (a ControlInterfaceAccess) Clone() ControlInterfaceAccess {
	return ControlInterfaceAccess{AllowRules: cloneRules(a.AllowRules), DenyRules: cloneRules(a.DenyRules)}
}

// HasAllowRules reports whether the control interface is opened at all.
func (a ControlInterfaceAccess) HasAllowRules() bool { return len(a.AllowRules) > 0 }

func cloneRules(rs []AccessRule) []AccessRule {
	if rs == nil {
		return nil
	}
	out := make([]AccessRule, len(rs))
	for i, r := range rs {
		out[i] = r
		out[i].FilterMasks = append([]string(nil), r.FilterMasks...)
		out[i].WorkloadNames = append([]string(nil), r.WorkloadNames...)
	}
	return out
}

// Clone returns a copy of s that shares workloads and config items with s.
// Workloads and config items are treated as immutable values: code that
// changes one replaces it in the map instead.
func (s State) Clone() State {
	return State{APIVersion: s.APIVersion, Workloads: cloneMap(s.Workloads), Configs: cloneMap(s.Configs)}
}

// Clone returns a deep copy of m.
func (m WorkloadStatesMap) Clone() WorkloadStatesMap {
	out := make(WorkloadStatesMap, len(m))
	for a, wls := range m {
		nw := make(map[string]map[string]ExecutionState, len(wls))
		for w, ids := range wls {
			nw[w] = cloneMap(ids)
		}
		out[a] = nw
	}
	return out
}

// Clone returns a deep copy of m.
func (m AgentMap) Clone() AgentMap {
	out := make(AgentMap, len(m))
	for k, v := range m {
		c := *v
		c.Tags = cloneMap(v.Tags)
		if v.Status.CPUUsage != nil {
			x := *v.Status.CPUUsage
			c.Status.CPUUsage = &x
		}
		if v.Status.FreeMemory != nil {
			x := *v.Status.FreeMemory
			c.Status.FreeMemory = &x
		}
		out[k] = &c
	}
	return out
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return nil
	}
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
