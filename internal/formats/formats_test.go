package formats

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/state"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/rpc"
	_ "github.com/grapnel-io/grapnel/rpc/controlapi"
	_ "github.com/grapnel-io/grapnel/rpc/grapnelpb"
	_ "github.com/grapnel-io/grapnel/rpc/grpcapi"
)

// Requirement (issue 28, point 1): the formats list every Raft entry type
// fsm knows, with its number, name and whether it is skippable or
// retired, and none it does not: a type added to fsm without a line here
// fails.
func TestEntriesAreFSMs(t *testing.T) {
	var want []EntryType
	for _, typ := range fsm.MessageTypes() {
		_, retired := typ.Retired()
		want = append(want, EntryType{Number: uint8(typ), Name: typ.String(), Skippable: typ.Skippable(), Retired: retired})
	}
	if !slices.Equal(Entries, want) {
		t.Fatalf("formats.Entries differ from fsm's entry types:\n got %v\nwant %v", Entries, want)
	}
}

// The snapshot's record types and format versions are fsm's.
func TestRecordsAreFSMs(t *testing.T) {
	var want []RecordType
	for _, typ := range fsm.AllSnapshotTypes {
		want = append(want, RecordType{Number: uint8(typ), Name: typ.String()})
	}
	slices.SortFunc(want, func(a, b RecordType) int { return int(a.Number) - int(b.Number) })
	if !slices.Equal(Records, want) {
		t.Fatalf("formats.Records differ from fsm's record types:\n got %v\nwant %v", Records, want)
	}
	if SnapshotVersion != fsm.SnapshotVersion || !slices.Equal(SnapshotVersionsRead, fsm.SnapshotVersionsRead) {
		t.Fatalf("snapshot versions %d (reads %v), fsm writes %d and reads %v", SnapshotVersion, SnapshotVersionsRead,
			fsm.SnapshotVersion, fsm.SnapshotVersionsRead)
	}
}

func wire(kind string) []WireAddition {
	var out []WireAddition
	for _, w := range Wire {
		if w.Kind == kind {
			out = append(out, w)
		}
	}
	return out
}

// Every field from 1000 on in the Ankaios messages is a Grapnel addition
// and is listed; every field listed exists with that number.
func TestFieldsAreTheProtos(t *testing.T) {
	var want []string
	for _, pkg := range []string{"ank_base", "grpc_api", "control_api"} {
		protoregistry.GlobalFiles.RangeFilesByPackage(protoreflect.FullName(pkg), func(f protoreflect.FileDescriptor) bool {
			var walk func(ms protoreflect.MessageDescriptors)
			walk = func(ms protoreflect.MessageDescriptors) {
				for i := 0; i < ms.Len(); i++ {
					m := ms.Get(i)
					for j := 0; j < m.Fields().Len(); j++ {
						if fd := m.Fields().Get(j); fd.Number() >= 1000 {
							want = append(want, fmt.Sprintf("%s.%s = %d", m.FullName(), fd.Name(), fd.Number()))
						}
					}
					walk(m.Messages())
				}
			}
			walk(f.Messages())
			return true
		})
	}
	if len(want) == 0 {
		t.Fatal("no Ankaios message registered; the test reads the wrong registry")
	}
	var got []string
	for _, w := range wire(KindField) {
		got = append(got, w.Name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("fields listed %v, Grapnel fields in the Ankaios protos %v", got, want)
	}
}

// Every metadata key rpc/wire declares is listed, and nothing else.
func TestMetadataIsRPCWire(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../../rpc/wire/metadata.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && strings.HasSuffix(n.Name, "Key") {
					v, _ := strconv.Unquote(lit.Value)
					want = append(want, v)
				}
			}
		}
	}
	if len(want) < 6 {
		t.Fatalf("found only %v in rpc/wire/metadata.go", want)
	}
	var got []string
	for _, w := range wire(KindMetadata) {
		got = append(got, w.Name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("metadata listed %v, rpc/wire declares %v", got, want)
	}
}

// The error reasons are rpc's, in its order.
func TestReasonsAreRPCs(t *testing.T) {
	r := wire(KindReasons)
	if len(r) != 1 || !slices.Equal(r[0].Items, rpc.ErrorReasons()) {
		t.Fatalf("reasons listed %v, rpc has %v", r, rpc.ErrorReasons())
	}
}

// Every service of package grapnel is listed with its methods in order.
func TestServicesAreTheProtos(t *testing.T) {
	var want []WireAddition
	protoregistry.GlobalFiles.RangeFilesByPackage("grapnel", func(f protoreflect.FileDescriptor) bool {
		for i := 0; i < f.Services().Len(); i++ {
			s := f.Services().Get(i)
			w := WireAddition{Kind: KindService, Name: string(s.FullName())}
			for j := 0; j < s.Methods().Len(); j++ {
				w.Items = append(w.Items, string(s.Methods().Get(j).Name()))
			}
			want = append(want, w)
		}
		return true
	})
	got := wire(KindService)
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("services listed %v, package grapnel has %v", got, want)
	}
	for i := range want {
		if got[i].Name != want[i].Name || !slices.Equal(got[i].Items, want[i].Items) {
			t.Errorf("service %d: listed %s %v, the proto has %s %v", i, got[i].Name, got[i].Items, want[i].Name, want[i].Items)
		}
	}
}

// Text has the cluster version line, and one line per entry type, record
// type and wire addition under three headings.
func TestText(t *testing.T) {
	text := Text()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if want := 4 + len(Entries) + len(Records) + len(Wire); len(lines) != want {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), want, text)
	}
	for _, e := range Entries {
		if !strings.Contains(text, fmt.Sprintf(" %d %s", e.Number, e.Name)) {
			t.Errorf("entry type %d %s missing", e.Number, e.Name)
		}
	}
	for _, want := range []string{"cluster version 2 (supports 0 to 2)\n", "  138 HistoryNotes skippable\n", "   18 SetClusterVersion\n", "    1 UpdateDesiredState retired\n", "    2 AgentConnected\n",
		"snapshot format 2 (restores 1, 2), record types:\n", "   20 RevokedCert\n",
		"  field grpc_api.AgentHello.grapnelRelease = 1002 (the agent's release)\n",
		"  service grapnel.Cluster: Status Watch", " TOO_MANY_STREAMS "} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}
}

func TestClusterVersionIsState(t *testing.T) {
	if ClusterVersion != state.MaxClusterVersion {
		t.Errorf("formats.ClusterVersion %d, state.MaxClusterVersion %d", ClusterVersion, state.MaxClusterVersion)
	}
}
