package fsm

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// The snapshot records are frozen JSON (docs/replication.md, "Snapshot
// records"): the key of every field is spelled out in a json tag, so that
// renaming a Go field cannot rename the key and leave old snapshots to
// restore with that field silently zero; and the golden snapshot pins the
// bytes of every record type.

// snapshotBodies is the Go type each record's body is written from and
// read into. TestSnapshotGoldenBodies checks it against what
// WriteSnapshot writes: every body of the golden decodes into its type,
// strictly, and encodes back to the same bytes.
var snapshotBodies = map[SnapshotType]reflect.Type{
	SnapAPIVersion:     reflect.TypeFor[string](), // Store.Desired.APIVersion
	SnapWorkload:       reflect.TypeFor[workloadRecord](),
	SnapConfig:         reflect.TypeFor[configRecord](),
	SnapRendered:       reflect.TypeFor[renderedRecord](),
	SnapDeleteEdge:     reflect.TypeFor[deleteEdgeRecord](),
	SnapAgent:          reflect.TypeFor[agentRecord](),
	SnapWorkloadState:  reflect.TypeFor[state.WorkloadState](),
	SnapRevision:       reflect.TypeFor[uint64](), // Store.Revision
	SnapDesiredSeq:     reflect.TypeFor[uint64](), // Store.DesiredSeq
	SnapReportMark:     reflect.TypeFor[reportMarkRecord](),
	SnapHistoryMeta:    reflect.TypeFor[historyMetaRecord](),
	SnapTx:             reflect.TypeFor[state.Tx](),
	SnapTransition:     reflect.TypeFor[state.Transition](),
	SnapAgentMode:      reflect.TypeFor[agentModeRecord](),
	SnapPlacement:      reflect.TypeFor[placementRecord](),
	SnapProblems:       reflect.TypeFor[problemsRecord](),
	SnapGuard:          reflect.TypeFor[guardRecord](),
	SnapRemovedReplica: reflect.TypeFor[removedReplicaRecord](),
	SnapReplicaCerts:   reflect.TypeFor[replicaCertsRecord](),
	SnapRevokedCert:    reflect.TypeFor[revokedCertRecord](),
	SnapClusterVersion: reflect.TypeFor[clusterVersionRecord](),
}

// schemaField is one field encoding/json writes under its own key: an
// exported field of a struct a record reaches, not an embedded struct
// (whose fields are written inline, and are schema fields themselves).
type schemaField struct {
	owner reflect.Type
	field reflect.StructField
}

func (f schemaField) String() string { return f.owner.String() + "." + f.field.Name }

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// recordSchema lists the schema fields of every struct type reachable
// from t: through pointers, slices, arrays, maps' values and fields,
// each struct once. A type with its own MarshalJSON or MarshalText
// decides its bytes itself and is not entered (none does today; the
// golden still pins what it writes). An interface (a config item) holds
// no struct a snapshot writes.
func recordSchema(t reflect.Type) []schemaField {
	var out []schemaField
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		if t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler) ||
			t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
			return
		}
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(t.Elem())
		case reflect.Map:
			walk(t.Key())
			walk(t.Elem())
		case reflect.Struct:
			if seen[t] {
				return
			}
			seen[t] = true
			for i := range t.NumField() {
				f := t.Field(i)
				_, tagged := f.Tag.Lookup("json")
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				switch {
				case f.Anonymous && !tagged && ft.Kind() == reflect.Struct:
					// Inlined: a tag here would nest it under a key.
				case !f.IsExported():
					continue // never encoded
				default:
					out = append(out, schemaField{t, f})
				}
				walk(f.Type)
			}
		}
	}
	walk(t)
	return out
}

// jsonKey is the key a field's tag names ("" without one), and whether
// the tag keeps the field out ("-").
func jsonKey(f reflect.StructField) (key string, skipped bool) {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", true
	}
	key, _, _ = strings.Cut(tag, ",")
	return key, false
}

// Every field a snapshot record writes names its key in a json tag:
// without one the key is the Go field name, and renaming the field
// would silently drop its value from every existing snapshot. A field
// added to a record, or to any struct a record reaches, fails here until
// it is tagged.
func TestSnapshotRecordsAreTagged(t *testing.T) {
	var untagged []string
	reachedBy := map[string][]string{}
	for _, typ := range AllSnapshotTypes {
		body, ok := snapshotBodies[typ]
		if !ok {
			t.Errorf("snapshot record %d (%s) has no body type in snapshotBodies", typ, typ)
			continue
		}
		for _, f := range recordSchema(body) {
			if key, skipped := jsonKey(f.field); skipped || key != "" {
				continue
			}
			name := f.String()
			if reachedBy[name] == nil {
				untagged = append(untagged, name)
			}
			reachedBy[name] = append(reachedBy[name], fmt.Sprintf("%d %s", typ, typ))
		}
	}
	for _, name := range untagged {
		field := name[strings.LastIndexByte(name, '.')+1:]
		t.Errorf("%s has no json key (snapshot records %s write it): tag it with the key %s lists for it, keeping omitempty as is; "+
			"`json:\"%s\"` only if it is new, which needs a new cluster version (docs/upgrade.md)",
			name, strings.Join(reachedBy[name], ", "), schemaGolden, field)
	}
	if len(snapshotBodies) != len(AllSnapshotTypes) {
		t.Errorf("snapshotBodies has %d record types, AllSnapshotTypes %d", len(snapshotBodies), len(AllSnapshotTypes))
	}
}

// The walk sees what it must: an untagged field deep inside a record,
// inside an embedded struct, and behind a map's value and a slice, is
// reported; unexported fields and "-" are not.
func TestRecordSchemaFindsUntaggedFields(t *testing.T) {
	type leaf struct {
		Tagged   string `json:"t"`
		Untagged string
		Skipped  string `json:"-"`
		NoKey    string `json:",omitempty"`
		hidden   string
	}
	type inner struct {
		Leaves []leaf `json:"l"`
	}
	type embedded struct {
		ByName map[string]*inner `json:"m"`
		Loose  int
	}
	type record struct {
		embedded
		Top string `json:"top"`
	}
	_ = leaf{}.hidden
	var untagged []string
	for _, f := range recordSchema(reflect.TypeFor[record]()) {
		if key, skipped := jsonKey(f.field); !skipped && key == "" {
			untagged = append(untagged, f.field.Name)
		}
	}
	if got := strings.Join(untagged, " "); got != "Untagged NoKey Loose" {
		t.Fatalf("untagged fields found: %q, want Untagged NoKey Loose", got)
	}
}

// allRecordsStore is a store with at least one record of every type and
// every field of every record set, and next to it a sparse record of most
// types with its fields zero, so that the golden pins both a key and its
// omitempty. It is built field by field (through the store's methods
// where a restore uses them, so that a restored store equals it); the
// index is the one its golden snapshot carries.
func allRecordsStore() (*state.Store, uint64) {
	st := state.NewStore()
	st.Desired.APIVersion = state.APIVersion
	st.Revision, st.DesiredSeq = 40, 7
	web := &state.Workload{
		Agent: "agent_A", RestartPolicy: state.RestartOnFailure,
		Dependencies: map[string]state.AddCondition{"db": state.AddCondRunning},
		Tags:         map[string]string{"team": "infra"},
		Runtime:      "podman", RuntimeConfig: "image: {{cfg.image}}",
		ControlInterfaceAccess: state.ControlInterfaceAccess{
			AllowRules: []state.AccessRule{{Operation: state.RWReadWrite, FilterMasks: []string{"desiredState.workloads.web"}}},
			DenyRules:  []state.AccessRule{{IsLogRule: true, WorkloadNames: []string{"db"}}},
		},
		Configs: map[string]string{"cfg": "web_cfg"},
		Files:   []state.File{{MountPoint: "/etc/web.conf", Content: "port 80"}, {MountPoint: "/bin/probe", Content: "AAE=", Binary: true}},
	}
	st.Desired.Workloads["web"] = web
	st.Desired.Workloads["bare"] = &state.Workload{}
	st.Desired.Configs["web_cfg"] = map[string]any{"image": "nginx", "ports": []any{"80", map[string]any{"tls": "443"}}}
	st.Desired.Configs["motd"] = "hello"
	st.Desired.Configs["empty"] = map[string]any{}
	rendered := web.Clone()
	rendered.RuntimeConfig = "image: nginx"
	inst := state.NewInstanceName("web", "agent_A", rendered.RuntimeConfig)
	st.Rendered["web"] = state.Rendered{Instance: inst, Workload: rendered}
	st.Rendered["bare"] = state.Rendered{Workload: &state.Workload{}}
	st.DeleteGraph["db"] = map[string]state.DeleteCondition{"web": state.DelCondNotPendingNorRunning}
	cpu, mem := uint32(12), uint64(1<<30)
	st.Agents["agent_A"] = &state.AgentAttributes{Status: state.AgentStatus{CPUUsage: &cpu, FreeMemory: &mem},
		Tags: map[string]string{"region": "eu"}}
	st.Agents["agent_B"] = &state.AgentAttributes{}
	failed := state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed, AdditionalInfo: "exit 1"}
	st.States.Set(inst, failed)
	st.States.Set(state.InstanceName{}, state.ExecutionState{})
	st.ReportMarks["agent_A"] = state.ReportMark{Incarnation: 3, Generation: 9}
	st.ReportMarks["agent_B"] = state.ReportMark{}
	st.SetAgentMode("agent_B", state.ModeMaintenance)
	st.Placement = map[string][]string{"batch": {"agent_A", "agent_B"}}

	st.History.Limits = state.HistoryLimits{MaxEntries: 500, MaxAgeMs: 86_400_000, MaxBytes: 65_536}
	st.History.LastSeq = 13
	st.History.Restore(&state.Tx{Seq: 12, Index: 39, TimeMs: 1_700_000_000_000, Kind: state.TxUpdate,
		Requester: "cli-conn-1", UpdateMask: []string{"desiredState.workloads.web"}, Reason: "rolled out", Count: 2,
		Workloads: []state.TxWorkload{{Name: "web", Op: state.OpUpdated, Instance: inst.String(),
			OldInstance: "web.0123.agent_A", Changes: []state.FieldChange{{Field: "runtimeConfig", Old: "image: httpd", New: "image: nginx"}},
			States: []string{"Pending(Initial)"}}},
		Configs:    []state.TxConfig{{Key: "web_cfg", Op: state.OpAdded}},
		APIVersion: state.APIVersion}, nil)
	st.History.Restore(&state.Tx{Seq: 13, Index: 40, TimeMs: 1_700_000_000_500, Kind: state.TxDecision,
		Workloads: []state.TxWorkload{{Name: "web", Op: state.OpStates}}}, nil)
	st.History.Restore(nil, &state.Transition{Index: 40, TimeMs: 1_700_000_000_500, Instance: inst, State: failed})

	st.Problems.Restore(state.Problem{ID: 4, Kind: "MissingDependency", Key: "MissingDependency/web/db",
		Objects: []state.ProblemObject{{Kind: "workload", Name: "db"}}, Summary: "web depends on db", Detail: "add db",
		SinceMs: 1_700_000_000_300})
	st.Problems.Restore(state.Problem{ID: 5, Kind: "AgentGone", Key: "AgentGone/agent_C", Summary: "agent_C is gone",
		SinceMs: 1_700_000_000_400, UpdatedMs: 1_700_000_000_450})
	st.Problems.LastID = 5

	st.Revs.Floor = 2
	st.Revs.Mod[state.WorkloadObject("web")] = 7
	st.Revs.Tombstones[state.WorkloadObject("old")] = 5
	st.Locks[state.ConfigObject("web_cfg")] = state.Lock{Owner: "cli-conn-1", Reason: "migration",
		SinceMs: 1_700_000_000_000, ExpiresMs: 1_700_000_060_000}
	st.Locks[state.WorkloadObject("web")] = state.Lock{Owner: "cli-conn-2", SinceMs: 1_700_000_000_100, ExpiresMs: 1_700_000_000_200}

	st.RecordRemoval("s3", 77, 31)
	st.RecordReplicaCert("s1", state.ReplicaCert{Serial: "1a2b", NotAfterMs: 1_800_000_000_000})
	st.RecordReplicaCert("s2", state.ReplicaCert{Serial: "3c4d"})
	st.Revoked = map[string]state.RevokedCert{"5e6f": {ID: "s3", NotAfterMs: 1_800_000_000_000, Index: 31},
		"7a8b": {ID: "s3", Index: 31}}
	st.SetClusterVersion(state.ClusterVersionProblemUpdates)
	return st, 42
}

const allRecordsGolden = "snapshot-all-records.golden"

// goldenSnapshot returns the golden snapshot in testdata/name, after
// writing buf there with -update-golden, and fails if buf differs.
func goldenSnapshot(t *testing.T, name string, buf []byte) []byte {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.WriteFile(path, buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, golden) {
		at := 0
		for at < min(len(buf), len(golden)) && buf[at] == golden[at] {
			at++
		}
		t.Fatalf("%s: the snapshot bytes changed (%d bytes, golden %d; first difference at byte %d, near %q): "+
			"a record's field was renamed, retyped, added or lost its json tag. Older releases read these bytes: "+
			"rerun with -update-golden only for a new record or field gated by a new cluster version (docs/upgrade.md)",
			name, len(buf), len(golden), at, buf[max(0, at-20):min(len(buf), at+20)])
	}
	return golden
}

// The golden snapshot holds every record type with every field set, as
// this version writes it: the same store must give the same bytes, and
// restoring them must give the same store and, written again, the same
// bytes. An older release reads these bytes, and a newer one must too.
func TestSnapshotGolden(t *testing.T) {
	st, index := allRecordsStore()
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, st, index); err != nil {
		t.Fatal(err)
	}
	golden := goldenSnapshot(t, allRecordsGolden, buf.Bytes())
	got, gotIndex, err := ReadSnapshot(bytes.NewReader(golden))
	if err != nil {
		t.Fatal(err)
	}
	if gotIndex != index {
		t.Fatalf("the golden restores at index %d, want %d", gotIndex, index)
	}
	if !reflect.DeepEqual(got, st) {
		t.Fatalf("the golden restores to\n%+v\nwant\n%+v", got, st)
	}
	var again bytes.Buffer
	if err := WriteSnapshot(&again, got, gotIndex); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), golden) {
		t.Fatalf("the golden, restored and written again, is %d bytes, not its %d", again.Len(), len(golden))
	}
}

// goldenRecords is the records of a snapshot, in order.
func goldenRecords(t *testing.T, data []byte) []snapRecord {
	t.Helper()
	r := bytes.NewReader(data[len(snapshotMagic):])
	for range 2 { // version, index
		if _, err := binary.ReadUvarint(r); err != nil {
			t.Fatal(err)
		}
	}
	var out []snapRecord
	for {
		b, err := r.ReadByte()
		if err != nil {
			t.Fatal("snapshot without end record")
		}
		if SnapshotType(b) == snapEnd {
			return out
		}
		n, err := binary.ReadUvarint(r)
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			t.Fatal(err)
		}
		out = append(out, snapRecord{SnapshotType(b), string(body)})
	}
}

// Every record type is in the golden: a new one fails here until the
// golden store holds it.
func TestSnapshotGoldenCoversEveryRecord(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", allRecordsGolden))
	if err != nil {
		t.Fatal(err)
	}
	seen := recordTypes(t, golden)
	for _, typ := range AllSnapshotTypes {
		if seen[typ] == 0 {
			t.Errorf("record type %d (%s) is not in %s: add it to allRecordsStore and rerun with -update-golden", typ, typ, allRecordsGolden)
		}
	}
	for typ := range seen {
		if _, known := snapNames[typ]; !known {
			t.Errorf("%s holds record type %d, which is not in AllSnapshotTypes", allRecordsGolden, typ)
		}
	}
}

// Each body of the golden decodes, refusing unknown keys, into its type
// in snapshotBodies and encodes back to the same bytes, so the tagged
// types are the ones written; and every schema field is set in some
// record, so the golden pins its key.
func TestSnapshotGoldenBodies(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", allRecordsGolden))
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	for i, rec := range goldenRecords(t, golden) {
		typ, ok := snapshotBodies[rec.t]
		if !ok {
			t.Fatalf("record %d: type %d has no body type", i+1, rec.t)
		}
		v := reflect.New(typ)
		dec := json.NewDecoder(strings.NewReader(rec.body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v.Interface()); err != nil {
			t.Fatalf("record %d (%s) does not decode into %s: %v\n%s", i+1, rec.t, typ, err, rec.body)
		}
		again, err := json.Marshal(v.Interface())
		if err != nil || string(again) != rec.body {
			t.Fatalf("record %d (%s) decoded into %s encodes to\n%s\nnot\n%s", i+1, rec.t, typ, again, rec.body)
		}
		markSet(v.Elem(), set)
	}
	for _, typ := range AllSnapshotTypes {
		for _, f := range recordSchema(snapshotBodies[typ]) {
			if _, skipped := jsonKey(f.field); !skipped && !set[f.String()] {
				t.Errorf("no record of %s sets %s (reached from record %d, %s): set it in allRecordsStore and rerun with -update-golden",
					allRecordsGolden, f, typ, typ)
			}
		}
	}
}

// markSet notes, as "pkg.Type.Field", every struct field v and what it
// holds set to a non-zero value.
func markSet(v reflect.Value, set map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			markSet(v.Elem(), set)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			markSet(v.Index(i), set)
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			markSet(it.Key(), set)
			markSet(it.Value(), set)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !v.Field(i).IsZero() {
				set[fmt.Sprintf("%s.%s", v.Type(), f.Name)] = true
			}
			if f.IsExported() || f.Anonymous {
				markSet(v.Field(i), set)
			}
		}
	}
}

const schemaGolden = "snapshot-schema.golden"

// The JSON shape of every record type, key by key, is pinned in
// testdata/snapshot-schema.golden: the key, the kind of value and
// omitempty, as encoding/json derives them from the tags. A renamed Go
// field or type changes nothing there; a changed key, kind or omitempty
// (which the golden snapshot, its fields set, shows only for a zero
// value) fails, naming the line.
func TestSnapshotSchemaGolden(t *testing.T) {
	var b strings.Builder
	b.WriteString("# The JSON of each snapshot record type (fsm/snapshot.go), as written by encoding/json:\n" +
		"# key path ([] an array element, {} a map value), kind (* may be null), tag options.\n" +
		"# Frozen: older releases read these records (docs/replication.md, \"Snapshot records\").\n")
	for _, typ := range AllSnapshotTypes {
		body := snapshotBodies[typ]
		fmt.Fprintf(&b, "\nrecord %d %s: %s\n", typ, typ, jsonKind(body))
		for _, line := range recordShape(body) {
			b.WriteString("  " + line + "\n")
		}
	}
	path := filepath.Join("testdata", schemaGolden)
	if *updateGolden {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, want := strings.Split(b.String(), "\n"), strings.Split(string(golden), "\n")
	for i := range max(len(got), len(want)) {
		g, w := "(none)", "(none)"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Fatalf("%s line %d: the records now say\n\t%s\nthe golden\n\t%s\n"+
				"older releases read these keys: a change is a new cluster version (docs/upgrade.md); "+
				"rerun with -update-golden only then", schemaGolden, i+1, g, w)
		}
	}
}

// recordShape lists the keys of t's JSON, depth first in the order
// encoding/json writes them: "path kind [options]".
func recordShape(t reflect.Type) []string {
	var out []string
	onPath := map[reflect.Type]bool{}
	var walk func(path string, t reflect.Type)
	walk = func(path string, t reflect.Type) {
		switch t.Kind() {
		case reflect.Pointer:
			walk(path, t.Elem())
		case reflect.Slice, reflect.Array:
			walk(path+"[]", t.Elem())
		case reflect.Map:
			walk(path+"{}", t.Elem())
		case reflect.Struct:
			if t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler) {
				return
			}
			if onPath[t] {
				out = append(out, path+" (recursive)")
				return
			}
			onPath[t] = true
			defer delete(onPath, t)
			for i := range t.NumField() {
				f := t.Field(i)
				tag, tagged := f.Tag.Lookup("json")
				if f.Anonymous && !tagged && (f.Type.Kind() == reflect.Struct || f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct) {
					walk(path, f.Type) // inline
					continue
				}
				key, skipped := jsonKey(f)
				if !f.IsExported() || skipped {
					continue
				}
				if key == "" {
					key = f.Name
				}
				if path != "" {
					key = path + "." + key
				}
				line := key + " " + jsonKind(f.Type)
				if _, opts, ok := strings.Cut(tag, ","); ok && opts != "" {
					line += " " + strings.ReplaceAll(opts, ",", " ") // omitempty, omitzero, string
				}
				out = append(out, line)
				walk(key, f.Type)
			}
		}
	}
	walk("", t)
	return out
}

// jsonKind is what a value of t is in JSON: string, bool, a Go numeric
// kind, object, any, []elem, map[key]elem, and * when it may be null.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + jsonKind(t.Elem())
	case reflect.Slice, reflect.Array:
		return "[]" + jsonKind(t.Elem())
	case reflect.Map:
		return "map[" + jsonKind(t.Key()) + "]" + jsonKind(t.Elem())
	case reflect.Struct:
		return "object"
	case reflect.Interface:
		return "any"
	}
	return t.Kind().String()
}
