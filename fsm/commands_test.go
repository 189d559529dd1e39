package fsm

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/state"
)

// messageTypeConsts is every constant of type MessageType that the
// package's source declares, by name, read from the source rather than
// from the table so that a constant added without an entry is seen. Only
// the package's own declarations are type-checked: the constants depend
// on nothing imported, so the imports are left out.
func messageTypeConsts(t *testing.T) map[string]MessageType {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: noImports{}, Error: func(error) {}}
	pkg, _ := conf.Check("fsm", fset, files, nil)
	out := map[string]MessageType{}
	for _, name := range pkg.Scope().Names() {
		c, ok := pkg.Scope().Lookup(name).(*types.Const)
		if !ok || c.Type().String() != "fsm.MessageType" || name == "IgnoreUnknownTypeFlag" {
			continue
		}
		v, exact := constantUint8(c)
		if !exact {
			t.Fatalf("the value of %s cannot be read: %s", name, c.Val())
		}
		out[name] = MessageType(v)
	}
	if len(out) == 0 {
		t.Fatal("no MessageType constant found in the source")
	}
	return out
}

// noImports refuses every import: see messageTypeConsts.
type noImports struct{}

func (noImports) Import(path string) (*types.Package, error) {
	return nil, fmt.Errorf("%s is not imported here", path)
}

func constantUint8(c *types.Const) (uint8, bool) {
	var v uint64
	_, err := fmt.Sscan(c.Val().ExactString(), &v)
	return uint8(v), err == nil && v <= 0xff
}

// Requirement (issue 33, point 2): the command table is the one place of
// a type. Every MessageType constant has exactly one entry, named as the
// constant; each type this version writes has a golden entry that
// decodes to it and applies; each retired one has neither decode nor
// execute and is refused with an error naming it, at the transport, on
// decode and on apply (a halt, not a panic).
func TestCommandTable(t *testing.T) {
	consts := messageTypeConsts(t)
	byNumber := map[MessageType]string{}
	for name, typ := range consts {
		if other, dup := byNumber[typ]; dup {
			t.Errorf("%s and %s are both %d: a number is never reused", name, other, typ)
		}
		byNumber[typ] = name
		c, ok := commands[typ]
		if !ok {
			t.Errorf("%s (%d) has no entry in the command table", name, typ)
			continue
		}
		if want := strings.TrimSuffix(name, "Type"); c.name != want {
			t.Errorf("%s (%d) is named %q in the table, want %q", name, typ, c.name, want)
		}
	}
	for typ, c := range commands {
		if _, ok := byNumber[typ]; !ok {
			t.Errorf("table entry %d (%s) has no MessageType constant", typ, c.name)
		}
		t.Run(c.name, func(t *testing.T) {
			switch {
			case c.retired != "":
				checkRetiredEntry(t, typ, c)
			case typ == BatchType:
				checkBatchEntry(t, c)
			default:
				checkLiveEntry(t, typ, c)
			}
		})
	}
}

func checkLiveEntry(t *testing.T, typ MessageType, c *command) {
	if c.decode == nil || c.execute == nil {
		t.Fatal("an entry that is not retired needs both decode and execute")
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "entry-"+c.name+".golden"))
	if err != nil {
		t.Fatalf("no golden entry: %v", err)
	}
	if MessageType(golden[0]) != typ {
		t.Fatalf("the golden entry is of type %d", golden[0])
	}
	got, body, err := Decode(golden)
	if err != nil || got != typ || body == nil || body.Type() != typ {
		t.Fatalf("the golden entry decodes as %s %T: %v", got, body, err)
	}
	if err := CheckType(golden); err != nil {
		t.Fatalf("the transport refuses the golden entry: %v", err)
	}
	if h, ok := New().Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: golden}).(*HaltError); ok {
		t.Fatalf("the golden entry halts the FSM: %v", h)
	}
	// A body of another type is refused, not applied as this one.
	var other Command = &AgentConnectedRequest{Name: "a"}
	if typ == AgentConnectedType {
		other = &AgentGoneRequest{Name: "a"}
	}
	if err, _ := c.execute(state.NewStore(), other, 1).(error); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("execute of a wrong body: %v", err)
	}
}

func checkBatchEntry(t *testing.T, c *command) {
	if c.decode != nil || c.execute != nil {
		t.Fatal("a batch is decoded and applied command by command (batch.go), not by its entry")
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "entry-Batch.golden"))
	if err != nil {
		t.Fatalf("no golden entry: %v", err)
	}
	cmds, err := decodeBatch(golden[1:])
	if err != nil || len(cmds) == 0 {
		t.Fatalf("the golden batch decodes to %d commands: %v", len(cmds), err)
	}
	if _, _, err := Decode(golden); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("Decode of a batch: %v", err)
	}
}

func checkRetiredEntry(t *testing.T, typ MessageType, c *command) {
	if c.decode != nil || c.execute != nil || c.refuse != nil || c.refresh != nil {
		t.Fatal("a retired entry keeps only its name and why it was retired")
	}
	if why, ok := typ.Retired(); !ok || why != c.retired {
		t.Fatalf("Retired says %q, %v", why, ok)
	}
	names := func(what string, err error) {
		t.Helper()
		msg := fmt.Sprint(err)
		if !errors.Is(err, ErrUnknownType) || !strings.Contains(msg, c.name) ||
			!strings.Contains(msg, fmt.Sprint(uint8(typ))) || !strings.Contains(msg, "retired: "+c.retired) {
			t.Fatalf("%s: %v, want an error naming %d (%s) and why it was retired", what, err, typ, c.name)
		}
	}
	_, body, err := Decode([]byte{byte(typ), '{', '}'})
	if body != nil {
		t.Fatalf("Decode returned a body: %v", body)
	}
	names("Decode", err)
	names("CheckType", CheckType([]byte{byte(typ)}))
	ok := mustEncode(t, &AgentConnectedRequest{Name: "a"})
	names("CheckType of a batch", CheckType(batchOf(t, ok, []byte{byte(typ)})))
	names("Apply", requireHalts(t, New(), []byte{byte(typ), '{', '}'}))
	names("Apply of a batch", requireHalts(t, New(), batchOf(t, ok, []byte{byte(typ)})))
}

// unusedTypes are a number without an entry in the command table that a
// replica may skip, and one it may not.
func unusedTypes(t *testing.T) (skippable, stopping MessageType) {
	t.Helper()
	for n := 1; n < 256; n++ {
		typ := MessageType(n)
		if _, ok := commands[typ]; ok {
			continue
		}
		if typ.Skippable() && skippable == 0 {
			skippable = typ
		}
		if !typ.Skippable() && stopping == 0 {
			stopping = typ
		}
	}
	if skippable == 0 || stopping == 0 {
		t.Fatal("every number has an entry")
	}
	return skippable, stopping
}

// A made-up type without an entry is refused as before the table: at the
// transport and on apply (a halt) unless its number says a replica may
// skip it; then it passes the transport, is skipped alone and in a batch,
// and the commands beside it apply.
func TestMadeUpTypesWithoutEntry(t *testing.T) {
	skippable, stopping := unusedTypes(t)
	ok := mustEncode(t, &AgentConnectedRequest{Name: "beside"})

	if err := CheckType([]byte{byte(stopping)}); !errors.Is(err, ErrUnknownType) || !strings.Contains(err.Error(), fmt.Sprint(uint8(stopping))) {
		t.Fatalf("CheckType of %d: %v", stopping, err)
	}
	if err := CheckType(batchOf(t, ok, []byte{byte(stopping)})); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("CheckType of %d in a batch: %v", stopping, err)
	}
	for _, data := range [][]byte{{byte(stopping), '{', '}'}, batchOf(t, ok, []byte{byte(stopping)})} {
		if h := requireHalts(t, New(), data); !errors.Is(h, ErrUnknownType) {
			t.Fatalf("halt %v", h)
		}
	}

	if err := CheckType([]byte{byte(skippable), 1}); err != nil {
		t.Fatalf("CheckType of %d: %v", skippable, err)
	}
	if err := CheckType(batchOf(t, ok, []byte{byte(skippable)})); err != nil {
		t.Fatalf("CheckType of %d in a batch: %v", skippable, err)
	}
	if _, body, err := Decode([]byte{byte(skippable), 1}); body != nil || err != nil {
		t.Fatalf("Decode of %d: %v, %v", skippable, body, err)
	}
	f := New()
	var observed []MessageType
	f.SetObserver(func(typ MessageType, _ uint64) { observed = append(observed, typ) })
	before := read(f)
	if resp := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte{byte(skippable), 1}}); resp != nil {
		t.Fatalf("a skippable type answered %v", resp)
	}
	if f.AppliedIndex() != 1 || !reflect.DeepEqual(read(f), before) || observed != nil {
		t.Fatalf("skipping changed the store or told the observer (applied %d, observed %v)", f.AppliedIndex(), observed)
	}
	resp := f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: batchOf(t, []byte{byte(skippable)}, ok)})
	if br, isBatch := resp.(BatchResponse); !isBatch || len(br) != 2 || br[0] != nil || br[1] != nil {
		t.Fatalf("a batch with a skippable type answered %#v", resp)
	}
	if _, in := read(f).Agents["beside"]; !in || !reflect.DeepEqual(observed, []MessageType{AgentConnectedType}) {
		t.Fatalf("the command beside the skipped one did not apply (observed %v)", observed)
	}
}

// An entry that raises the cluster version past what this build reads
// halts the FSM before any of it applies: alone, the applied index stays
// where it was; in a batch, the commands before it do not apply either.
func TestNewerClusterVersionHaltsTheWholeEntry(t *testing.T) {
	newer := mustEncode(t, &SetClusterVersionRequest{Version: state.MaxClusterVersion + 1})
	ok := mustEncode(t, &AgentConnectedRequest{Name: "before"})
	for name, data := range map[string][]byte{"alone": newer, "batch": batchOf(t, ok, newer)} {
		t.Run(name, func(t *testing.T) {
			f := New()
			apply(t, f, &AgentConnectedRequest{Name: "a"})
			h := requireHalts(t, f, data)
			if !errors.Is(h, ErrNewerFormat) || f.ClusterVersion() != state.ClusterVersionBaseline {
				t.Fatalf("halt %v, cluster version %d", h, f.ClusterVersion())
			}
		})
	}
}
