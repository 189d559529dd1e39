package fsm

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/fsm/fsmpb"
	"github.com/grapnel-io/grapnel/state"
)

// The bodies are the protobuf messages of fsm/proto/commands.proto,
// generated into fsm/fsmpb; no reader is written by hand. Every replica
// decodes the bytes the leader wrote, and the encode is deterministic too,
// so that one command has one entry (the golden entries in testdata hold
// it): a body holds no protobuf map, what is a map in the store travels
// as a list in key order (see the .proto), and Deterministic would order
// a protobuf map if one were added. Empty and absent maps and lists are
// one thing on the wire: a body decodes with them nil. Config items keep
// the difference (their kind says which), since the desired state
// compares them deeply.
var (
	marshalOptions   = proto.MarshalOptions{Deterministic: true}
	unmarshalOptions = proto.UnmarshalOptions{DiscardUnknown: true}
)

// Encode writes the command's type byte, then its body.
func Encode(c Command) ([]byte, error) {
	t := c.Type()
	m, err := c.message()
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w: %v", t, ErrBadCommand, err)
	}
	opts := marshalOptions
	buf := make([]byte, 1, 1+opts.Size(m))
	buf[0] = byte(t)
	opts.UseCachedSize = true
	buf, err = opts.MarshalAppend(buf, m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w: %v", t, ErrBadCommand, err)
	}
	return buf, nil
}

// decodeBody decodes the body of a command of type t with the type's
// entry in the command table (commands.go): nil for an unknown type a
// replica may skip, an error for one it may not skip or a retired one.
func decodeBody(t MessageType, buf []byte) (Command, error) {
	c, err := lookup(t)
	if err != nil || c == nil {
		return nil, err
	}
	if c.decode == nil {
		return nil, fmt.Errorf("%w: %s is decoded with SplitBatch", ErrBadCommand, t)
	}
	body, err := c.decode(buf)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUndecodable, t, err)
	}
	return body, nil
}

// errNoBody is a workload or rendering that a body holds without content.
var errNoBody = errors.New("no body")

func (r *UpdateDesiredStateRequest) message() (proto.Message, error) {
	u := &r.Update
	m := &fsmpb.DesiredUpdate{
		ApiVersion:      u.APIVersion,
		DeleteWorkloads: u.DeleteWorkloads,
		DeleteConfigs:   u.DeleteConfigs,
		DeleteRendered:  u.DeleteRendered,
	}
	if len(u.PutWorkloads) > 0 {
		m.PutWorkloads = make([]*fsmpb.Workload, 0, len(u.PutWorkloads))
		for _, n := range state.SortedKeys(u.PutWorkloads) {
			w := u.PutWorkloads[n]
			if w == nil {
				return nil, fmt.Errorf("workload %q: %w", n, errNoBody)
			}
			p := workloadToProto(w)
			p.Name = n
			m.PutWorkloads = append(m.PutWorkloads, p)
		}
	}
	if len(u.PutConfigs) > 0 {
		var err error
		if m.PutConfigs, err = configMapToProto(u.PutConfigs); err != nil {
			return nil, err
		}
	}
	if len(u.PutRendered) > 0 {
		m.PutRendered = make([]*fsmpb.Rendered, 0, len(u.PutRendered))
		for _, n := range state.SortedKeys(u.PutRendered) {
			rw := u.PutRendered[n]
			p := &fsmpb.Rendered{Name: n, Instance: instanceToProto(rw.Instance)}
			// A copy of its spec is left out; decoding rebuilds it.
			if w, ok := u.PutWorkloads[n]; !ok || len(w.Configs) > 0 {
				if rw.Workload == nil {
					return nil, fmt.Errorf("rendered workload %q: %w", n, errNoBody)
				}
				p.Workload = workloadToProto(rw.Workload)
			}
			m.PutRendered = append(m.PutRendered, p)
		}
	}
	if len(u.SetStates) > 0 {
		m.SetStates = make([]*fsmpb.WorkloadState, len(u.SetStates))
		for i, ws := range u.SetStates {
			m.SetStates[i] = workloadStateToProto(ws)
		}
	}
	if len(u.DeleteStates) > 0 {
		m.DeleteStates = make([]*fsmpb.InstanceName, len(u.DeleteStates))
		for i, in := range u.DeleteStates {
			m.DeleteStates[i] = instanceToProto(in)
		}
	}
	if len(u.AgentTags) > 0 {
		m.AgentTags = make([]*fsmpb.AgentTags, 0, len(u.AgentTags))
		for _, a := range state.SortedKeys(u.AgentTags) {
			m.AgentTags = append(m.AgentTags, &fsmpb.AgentTags{Agent: a, Tags: pairsOf(u.AgentTags[a])})
		}
	}
	return &fsmpb.UpdateDesiredState{Update: m, Seq: r.Seq, History: historyToProto(r.History)}, nil
}

// updateFromProto converts a decoded update and rebuilds the renderings
// left out as copies of their specs. A name given twice keeps the last.
// Every workload and rendering it returns has a body, as the store needs.
func updateFromProto(p *fsmpb.UpdateDesiredState) (*UpdateDesiredStateRequest, error) {
	r := &UpdateDesiredStateRequest{Seq: p.Seq, History: historyFromProto(p.History)}
	m := p.Update
	if m == nil {
		return r, nil
	}
	u := &r.Update
	u.APIVersion = m.ApiVersion
	u.DeleteWorkloads = nilIfEmpty(m.DeleteWorkloads)
	u.DeleteConfigs = nilIfEmpty(m.DeleteConfigs)
	u.DeleteRendered = nilIfEmpty(m.DeleteRendered)
	var err error
	if len(m.PutWorkloads) > 0 {
		u.PutWorkloads = make(map[string]*state.Workload, len(m.PutWorkloads))
		for _, w := range m.PutWorkloads {
			if u.PutWorkloads[w.Name], err = workloadFromProto(w); err != nil {
				return nil, fmt.Errorf("workload %q: %w", w.Name, err)
			}
		}
	}
	if len(m.PutConfigs) > 0 {
		if u.PutConfigs, err = configMapFromProto(m.PutConfigs); err != nil {
			return nil, err
		}
	}
	if len(m.PutRendered) > 0 {
		u.PutRendered = make(map[string]state.Rendered, len(m.PutRendered))
		for _, rw := range m.PutRendered {
			n := rw.Name
			w, err := workloadFromProto(rw.Workload)
			if err != nil {
				return nil, fmt.Errorf("rendered workload %q: %w", n, err)
			}
			if w == nil {
				spec, ok := u.PutWorkloads[n]
				if !ok {
					return nil, fmt.Errorf("rendered workload %q has neither a body nor a spec", n)
				}
				w = spec.Clone()
			}
			u.PutRendered[n] = state.Rendered{Instance: instanceFromProto(rw.Instance), Workload: w}
		}
	}
	if len(m.SetStates) > 0 {
		u.SetStates = make([]state.WorkloadState, len(m.SetStates))
		for i, ws := range m.SetStates {
			u.SetStates[i] = workloadStateFromProto(ws)
		}
	}
	if len(m.DeleteStates) > 0 {
		u.DeleteStates = make([]state.InstanceName, len(m.DeleteStates))
		for i, in := range m.DeleteStates {
			u.DeleteStates[i] = instanceFromProto(in)
		}
	}
	if len(m.AgentTags) > 0 {
		u.AgentTags = make(map[string]map[string]string, len(m.AgentTags))
		for _, a := range m.AgentTags {
			if u.AgentTags[a.Agent], err = mapOf[string](a.Tags); err != nil {
				return nil, fmt.Errorf("tags of agent %q: %w", a.Agent, err)
			}
		}
	}
	return r, nil
}

func (r *LockObjectsRequest) message() (proto.Message, error) {
	return &fsmpb.LockObjects{Objects: r.Objects, Owner: r.Owner, Reason: r.Reason, NowMs: r.NowMs, ExpiresMs: r.ExpiresMs}, nil
}

func lockFromProto(m *fsmpb.LockObjects) (*LockObjectsRequest, error) {
	return &LockObjectsRequest{Objects: m.Objects, Owner: m.Owner, Reason: m.Reason, NowMs: m.NowMs, ExpiresMs: m.ExpiresMs}, nil
}

func (r *ReplicaRemovalRequest) message() (proto.Message, error) {
	if r.ID == "" {
		return nil, errors.New("a replica removal names no replica")
	}
	m := &fsmpb.ReplicaRemoval{Id: r.ID, Incarnation: r.Incarnation, Forget: r.Forget, TimeMs: r.TimeMs}
	for _, c := range r.Certs {
		if c.Serial == "" {
			return nil, fmt.Errorf("a certificate of replica %q without a serial", r.ID)
		}
		m.Certs = append(m.Certs, &fsmpb.ReplicaCert{Serial: c.Serial, NotAfterMs: c.NotAfterMs})
	}
	return m, nil
}

func removalFromProto(m *fsmpb.ReplicaRemoval) (*ReplicaRemovalRequest, error) {
	if m.Id == "" {
		return nil, errors.New("a replica removal names no replica")
	}
	return &ReplicaRemovalRequest{ID: m.Id, Incarnation: m.Incarnation, Forget: m.Forget, Certs: certsOf(m.Certs), TimeMs: m.TimeMs}, nil
}

func (r *ReplicaCertificateRequest) message() (proto.Message, error) {
	switch {
	case r.ID == "":
		return nil, errors.New("a replica certificate names no replica")
	case r.Cert.Serial == "":
		return nil, fmt.Errorf("a certificate of replica %q without a serial", r.ID)
	}
	return &fsmpb.ReplicaCertificate{Id: r.ID, Cert: &fsmpb.ReplicaCert{Serial: r.Cert.Serial, NotAfterMs: r.Cert.NotAfterMs}}, nil
}

func certificateFromProto(m *fsmpb.ReplicaCertificate) (*ReplicaCertificateRequest, error) {
	switch {
	case m.Id == "":
		return nil, errors.New("a replica certificate names no replica")
	case m.Cert.GetSerial() == "":
		return nil, errors.New("a replica certificate without a serial")
	}
	return &ReplicaCertificateRequest{ID: m.Id, Cert: state.ReplicaCert{Serial: m.Cert.GetSerial(), NotAfterMs: m.Cert.GetNotAfterMs()}}, nil
}

func (r *SetClusterVersionRequest) message() (proto.Message, error) {
	if r.Version == 0 {
		return nil, errors.New("a cluster version of 0")
	}
	return &fsmpb.SetClusterVersion{Version: r.Version}, nil
}

func clusterVersionFromProto(m *fsmpb.SetClusterVersion) (*SetClusterVersionRequest, error) {
	if m.Version == 0 {
		return nil, errors.New("a cluster version of 0")
	}
	return &SetClusterVersionRequest{Version: m.Version}, nil
}

// certsOf reads replica certificates off the wire.
func certsOf(ms []*fsmpb.ReplicaCert) []state.ReplicaCert {
	var out []state.ReplicaCert
	for _, m := range ms {
		out = append(out, state.ReplicaCert{Serial: m.GetSerial(), NotAfterMs: m.GetNotAfterMs()})
	}
	return out
}

func (r *UnlockObjectsRequest) message() (proto.Message, error) {
	return &fsmpb.UnlockObjects{Objects: r.Objects, Owner: r.Owner, NowMs: r.NowMs, Force: r.Force}, nil
}

func unlockFromProto(m *fsmpb.UnlockObjects) (*UnlockObjectsRequest, error) {
	return &UnlockObjectsRequest{Objects: m.Objects, Owner: m.Owner, NowMs: m.NowMs, Force: m.Force}, nil
}

func (r *AgentConnectedRequest) message() (proto.Message, error) {
	return &fsmpb.AgentConnected{Name: r.Name, Tags: pairsOf(r.Tags)}, nil
}

func agentConnectedFromProto(m *fsmpb.AgentConnected) (*AgentConnectedRequest, error) {
	tags, err := mapOf[string](m.Tags)
	if err != nil {
		return nil, err
	}
	return &AgentConnectedRequest{Name: m.Name, Tags: tags}, nil
}

func (r *AgentGoneRequest) message() (proto.Message, error) {
	return &fsmpb.AgentGone{Name: r.Name, History: historyToProto(r.History)}, nil
}

func agentGoneFromProto(m *fsmpb.AgentGone) (*AgentGoneRequest, error) {
	return &AgentGoneRequest{Name: m.Name, History: historyFromProto(m.History)}, nil
}

func (r *WorkloadReportsRequest) message() (proto.Message, error) {
	m := &fsmpb.WorkloadReports{Reports: make([]*fsmpb.AgentReport, len(r.Reports)), History: historyToProto(r.History)}
	for i, rep := range r.Reports {
		p := &fsmpb.AgentReport{Agent: rep.Agent, Incarnation: rep.Mark.Incarnation, Generation: rep.Mark.Generation,
			States: make([]*fsmpb.WorkloadState, len(rep.States))}
		for j, ws := range rep.States {
			p.States[j] = workloadStateToProto(ws)
		}
		m.Reports[i] = p
	}
	return m, nil
}

func reportsFromProto(m *fsmpb.WorkloadReports) (*WorkloadReportsRequest, error) {
	r := &WorkloadReportsRequest{History: historyFromProto(m.History)}
	if len(m.Reports) == 0 {
		return r, nil
	}
	r.Reports = make([]AgentReport, len(m.Reports))
	for i, p := range m.Reports {
		rep := AgentReport{Agent: p.Agent, Mark: state.ReportMark{Incarnation: p.Incarnation, Generation: p.Generation}}
		if len(p.States) > 0 {
			rep.States = make([]state.WorkloadState, len(p.States))
			for j, ws := range p.States {
				rep.States[j] = workloadStateFromProto(ws)
			}
		}
		r.Reports[i] = rep
	}
	return r, nil
}

func workloadToProto(w *state.Workload) *fsmpb.Workload {
	p := &fsmpb.Workload{
		Agent:         w.Agent,
		RestartPolicy: string(w.RestartPolicy),
		Dependencies:  pairsOf(w.Dependencies),
		Tags:          pairsOf(w.Tags),
		Runtime:       w.Runtime,
		RuntimeConfig: w.RuntimeConfig,
		Configs:       pairsOf(w.Configs),
	}
	if a := w.ControlInterfaceAccess; len(a.AllowRules) > 0 || len(a.DenyRules) > 0 {
		p.ControlInterfaceAccess = &fsmpb.ControlInterfaceAccess{AllowRules: rulesToProto(a.AllowRules), DenyRules: rulesToProto(a.DenyRules)}
	}
	if len(w.Files) > 0 {
		p.Files = make([]*fsmpb.File, len(w.Files))
		for i, f := range w.Files {
			p.Files[i] = &fsmpb.File{MountPoint: f.MountPoint, Content: f.Content, Binary: f.Binary}
		}
	}
	return p
}

// workloadFromProto converts a workload; nil stays nil.
func workloadFromProto(p *fsmpb.Workload) (*state.Workload, error) {
	if p == nil {
		return nil, nil
	}
	w := &state.Workload{
		Agent:         p.Agent,
		RestartPolicy: state.RestartPolicy(p.RestartPolicy),
		Runtime:       p.Runtime,
		RuntimeConfig: p.RuntimeConfig,
	}
	var err error
	if w.Dependencies, err = mapOf[state.AddCondition](p.Dependencies); err != nil {
		return nil, fmt.Errorf("dependencies: %w", err)
	}
	if w.Tags, err = mapOf[string](p.Tags); err != nil {
		return nil, fmt.Errorf("tags: %w", err)
	}
	if w.Configs, err = mapOf[string](p.Configs); err != nil {
		return nil, fmt.Errorf("configs: %w", err)
	}
	if a := p.ControlInterfaceAccess; a != nil {
		w.ControlInterfaceAccess = state.ControlInterfaceAccess{AllowRules: rulesFromProto(a.AllowRules), DenyRules: rulesFromProto(a.DenyRules)}
	}
	if len(p.Files) > 0 {
		w.Files = make([]state.File, len(p.Files))
		for i, f := range p.Files {
			w.Files[i] = state.File{MountPoint: f.MountPoint, Content: f.Content, Binary: f.Binary}
		}
	}
	return w, nil
}

func rulesToProto(rs []state.AccessRule) []*fsmpb.AccessRule {
	if len(rs) == 0 {
		return nil
	}
	out := make([]*fsmpb.AccessRule, len(rs))
	for i, r := range rs {
		out[i] = &fsmpb.AccessRule{IsLogRule: r.IsLogRule, Operation: string(r.Operation), FilterMasks: r.FilterMasks, WorkloadNames: r.WorkloadNames}
	}
	return out
}

func rulesFromProto(ps []*fsmpb.AccessRule) []state.AccessRule {
	if len(ps) == 0 {
		return nil
	}
	out := make([]state.AccessRule, len(ps))
	for i, p := range ps {
		out[i] = state.AccessRule{IsLogRule: p.IsLogRule, Operation: state.ReadWrite(p.Operation),
			FilterMasks: nilIfEmpty(p.FilterMasks), WorkloadNames: nilIfEmpty(p.WorkloadNames)}
	}
	return out
}

func instanceToProto(n state.InstanceName) *fsmpb.InstanceName {
	return &fsmpb.InstanceName{WorkloadName: n.WorkloadName, AgentName: n.AgentName, Id: n.ID}
}

func instanceFromProto(p *fsmpb.InstanceName) state.InstanceName {
	return state.InstanceName{WorkloadName: p.GetWorkloadName(), AgentName: p.GetAgentName(), ID: p.GetId()}
}

func workloadStateToProto(ws state.WorkloadState) *fsmpb.WorkloadState {
	in, s := ws.Instance, ws.State
	return &fsmpb.WorkloadState{WorkloadName: in.WorkloadName, AgentName: in.AgentName, Id: in.ID,
		State: string(s.State), SubState: s.SubState, AdditionalInfo: s.AdditionalInfo}
}

func workloadStateFromProto(p *fsmpb.WorkloadState) state.WorkloadState {
	return state.WorkloadState{
		Instance: state.InstanceName{WorkloadName: p.WorkloadName, AgentName: p.AgentName, ID: p.Id},
		State:    state.ExecutionState{State: state.ExecState(p.State), SubState: p.SubState, AdditionalInfo: p.AdditionalInfo}}
}

// configMapToProto converts a map of config items, in key order.
func configMapToProto(m map[string]any) ([]*fsmpb.ConfigItem, error) {
	out := make([]*fsmpb.ConfigItem, 0, len(m))
	for _, k := range state.SortedKeys(m) {
		item, err := configToProto(m[k])
		if err != nil {
			return nil, fmt.Errorf("config item %q: %w", k, err)
		}
		item.Key = k
		out = append(out, item)
	}
	return out, nil
}

func configMapFromProto(items []*fsmpb.ConfigItem) (map[string]any, error) {
	out := make(map[string]any, len(items))
	for _, e := range items {
		item, err := configFromProto(e)
		if err != nil {
			return nil, fmt.Errorf("config item %q: %w", e.Key, err)
		}
		out[e.Key] = item
	}
	return out, nil
}

// configToProto converts a config item: a string, a []any or a
// map[string]any of config items, or nil. A nil list or map is a nil
// item, as it was in JSON.
func configToProto(v any) (*fsmpb.ConfigItem, error) {
	switch x := v.(type) {
	case string:
		return &fsmpb.ConfigItem{String_: x}, nil
	case []any:
		if x == nil {
			break
		}
		p := &fsmpb.ConfigItem{Kind: fsmpb.ConfigItem_LIST, Items: make([]*fsmpb.ConfigItem, len(x))}
		for i, e := range x {
			item, err := configToProto(e)
			if err != nil {
				return nil, err
			}
			p.Items[i] = item
		}
		return p, nil
	case map[string]any:
		if x == nil {
			break
		}
		items, err := configMapToProto(x)
		if err != nil {
			return nil, err
		}
		return &fsmpb.ConfigItem{Kind: fsmpb.ConfigItem_MAP, Items: items}, nil
	default:
		if v != nil {
			return nil, fmt.Errorf("a config item cannot be a %T", v)
		}
	}
	return &fsmpb.ConfigItem{Kind: fsmpb.ConfigItem_NIL}, nil
}

// configFromProto converts a config item. A kind this version does not
// know does not decode.
func configFromProto(p *fsmpb.ConfigItem) (any, error) {
	switch p.Kind {
	case fsmpb.ConfigItem_STRING:
		return p.String_, nil
	case fsmpb.ConfigItem_LIST:
		out := make([]any, len(p.Items))
		for i, e := range p.Items {
			item, err := configFromProto(e)
			if err != nil {
				return nil, err
			}
			out[i] = item
		}
		return out, nil
	case fsmpb.ConfigItem_MAP:
		return configMapFromProto(p.Items)
	case fsmpb.ConfigItem_NIL:
		return nil, nil
	}
	return nil, fmt.Errorf("config item of kind %d", p.Kind)
}

// pairsOf flattens a map of strings into key, value, key, value, ... in
// key order.
func pairsOf[V ~string](m map[string]V) []string {
	if len(m) == 0 {
		return nil
	}
	keys := state.SortedKeys(m)
	out := make([]string, 0, 2*len(m))
	for _, k := range keys {
		out = append(out, k, string(m[k]))
	}
	return out
}

// errOddPairs is a flattened map with a key and no value.
var errOddPairs = errors.New("a key without a value")

// mapOf rebuilds a map flattened by pairsOf; empty is nil, and a key given
// twice keeps the last value.
func mapOf[V ~string](kv []string) (map[string]V, error) {
	if len(kv)%2 != 0 {
		return nil, errOddPairs
	}
	if len(kv) == 0 {
		return nil, nil
	}
	m := make(map[string]V, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = V(kv[i+1])
	}
	return m, nil
}

// nilIfEmpty returns nil for an empty list: decoded bodies hold nil for
// what is empty, whatever the wire held.
func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}
