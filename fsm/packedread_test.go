package fsm

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/grapnel-io/grapnel/state"
)

// packBody encodes a body as encodePacked does, without the type byte and
// without leaving renderings out, so every field is exercised.
func packBody(t testing.TB, r *UpdateDesiredStateRequest) []byte {
	t.Helper()
	var out []byte
	if err := codec.NewEncoderBytes(&out, packedHandle).Encode(r); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameAsGoMsgpack decodes buf both ways and fails unless readPacked either
// refuses it or gets exactly what go-msgpack gets.
func sameAsGoMsgpack(t testing.TB, buf []byte) bool {
	t.Helper()
	var fast, slow UpdateDesiredStateRequest
	if readPacked(buf, &fast) != nil {
		return false
	}
	if err := goMsgpackDecode(buf, &slow); err != nil {
		t.Fatalf("readPacked took a body go-msgpack refuses (%v): %x", err, buf)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("readPacked decoded\n%#v\ngo-msgpack\n%#v", fast, slow)
	}
	return true
}

// randomUpdate fills every field of an update, with nil, empty and full
// maps and slices, odd strings and config items of every kind.
func randomUpdate(rng *rand.Rand) UpdateDesiredStateRequest {
	str := func() string {
		switch rng.IntN(5) {
		case 0:
			return ""
		case 1:
			return strings.Repeat("x", rng.IntN(300)) // past fixstr and str8
		case 2:
			return "ünï\x00code"
		default:
			return fmt.Sprintf("s%d", rng.IntN(1000))
		}
	}
	strs := func() []string {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		out := make([]string, 1+rng.IntN(20))
		for i := range out {
			out[i] = str()
		}
		return out
	}
	smap := func() map[string]string {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return map[string]string{}
		}
		m := map[string]string{}
		for range 1 + rng.IntN(20) {
			m[str()] = str()
		}
		return m
	}
	inst := func() state.InstanceName {
		return state.InstanceName{WorkloadName: str(), AgentName: str(), ID: str()}
	}
	rules := func() []state.AccessRule {
		if rng.IntN(3) == 0 {
			return nil
		}
		out := make([]state.AccessRule, rng.IntN(3))
		for i := range out {
			out[i] = state.AccessRule{IsLogRule: rng.IntN(2) == 0, Operation: state.ReadWrite(str()), FilterMasks: strs(), WorkloadNames: strs()}
		}
		return out
	}
	workload := func() *state.Workload {
		if rng.IntN(5) == 0 {
			return nil
		}
		w := &state.Workload{Agent: str(), RestartPolicy: state.RestartPolicy(str()), Tags: smap(), Runtime: str(), RuntimeConfig: str(), Configs: smap(),
			ControlInterfaceAccess: state.ControlInterfaceAccess{AllowRules: rules(), DenyRules: rules()}}
		if rng.IntN(2) == 0 {
			w.Dependencies = map[string]state.AddCondition{}
			for range rng.IntN(4) {
				w.Dependencies[str()] = state.AddCondition(str())
			}
		}
		for range rng.IntN(3) {
			w.Files = append(w.Files, state.File{MountPoint: str(), Content: str(), Binary: rng.IntN(2) == 0})
		}
		return w
	}
	var value func(depth int) any
	value = func(depth int) any {
		switch k := rng.IntN(9); {
		case k == 0 || depth > 2:
			return str()
		case k == 1:
			return nil
		case k == 2:
			return rng.IntN(2) == 0
		case k == 3:
			return rng.Int64() - rng.Int64()
		case k == 4:
			return rng.Float64()
		case k == 5:
			return uint64(rng.IntN(300))
		case k == 6:
			l := make([]any, rng.IntN(4))
			for i := range l {
				l[i] = value(depth + 1)
			}
			return l
		default:
			m := map[string]any{}
			for range rng.IntN(4) {
				m[str()] = value(depth + 1)
			}
			return m
		}
	}
	u := state.DesiredUpdate{APIVersion: str(), DeleteWorkloads: strs(), DeleteConfigs: strs(), DeleteRendered: strs()}
	if rng.IntN(4) > 0 {
		u.PutWorkloads = map[string]*state.Workload{}
		for range rng.IntN(5) {
			u.PutWorkloads[str()] = workload()
		}
	}
	if rng.IntN(2) == 0 {
		u.PutConfigs = map[string]any{}
		for range rng.IntN(4) {
			u.PutConfigs[str()] = value(0)
		}
	}
	if rng.IntN(4) > 0 {
		u.PutRendered = map[string]state.Rendered{}
		for range rng.IntN(5) {
			u.PutRendered[str()] = state.Rendered{Instance: inst(), Workload: workload()}
		}
	}
	for range rng.IntN(4) {
		u.SetStates = append(u.SetStates, state.WorkloadState{Instance: inst(), State: state.ExecutionState{State: state.ExecState(str()), SubState: str(), AdditionalInfo: str()}})
	}
	for range rng.IntN(3) {
		u.DeleteStates = append(u.DeleteStates, inst())
	}
	if rng.IntN(2) == 0 {
		u.AgentTags = map[string]map[string]string{str(): smap(), str(): smap()}
	}
	return UpdateDesiredStateRequest{Update: u, Seq: rng.Uint64() >> rng.IntN(64)}
}

// readPacked decodes what go-msgpack decodes, for the rich update, the
// entry the golden file holds and 2,000 random updates.
func TestReadPackedMatchesGoMsgpack(t *testing.T) {
	rich := richUpdate(7)
	if !sameAsGoMsgpack(t, packBody(t, &rich)) {
		t.Fatal("readPacked refused the rich update")
	}
	entry, err := Encode(UpdateDesiredStatePackedType, &rich)
	if err != nil {
		t.Fatal(err)
	}
	if !sameAsGoMsgpack(t, entry[1:]) {
		t.Fatal("readPacked refused a packed entry")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		u := randomUpdate(rng)
		if !sameAsGoMsgpack(t, packBody(t, &u)) {
			t.Fatalf("update %d: readPacked refused a body go-msgpack wrote", i)
		}
	}
}

// A struct written by a newer binary with a field more still decodes, the
// extra field skipped, as go-msgpack does.
func TestReadPackedSkipsFieldsItDoesNotKnow(t *testing.T) {
	type newerRequest struct {
		Update state.DesiredUpdate
		Seq    uint64
		Extra  map[string][]int
	}
	rich := richUpdate(3)
	var buf []byte
	if err := codec.NewEncoderBytes(&buf, packedHandle).Encode(newerRequest{Update: rich.Update, Seq: 3, Extra: map[string][]int{"a": {1, -2}}}); err != nil {
		t.Fatal(err)
	}
	if !sameAsGoMsgpack(t, buf) {
		t.Fatal("readPacked refused a body with a field more")
	}
}

func FuzzReadPacked(f *testing.F) {
	rich := richUpdate(1)
	var buf []byte
	if err := codec.NewEncoderBytes(&buf, packedHandle).Encode(&rich); err != nil {
		f.Fatal(err)
	}
	f.Add(buf)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		u := randomUpdate(rng)
		var b []byte
		if err := codec.NewEncoderBytes(&b, packedHandle).Encode(&u); err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sameAsGoMsgpack(t, body)
	})
}

func BenchmarkReadPacked(b *testing.B) {
	rich := richUpdate(1)
	entry, err := Encode(UpdateDesiredStatePackedType, &rich)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("readPacked", func(b *testing.B) {
		for b.Loop() {
			var r UpdateDesiredStateRequest
			if err := readPacked(entry[1:], &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("go-msgpack", func(b *testing.B) {
		for b.Loop() {
			var r UpdateDesiredStateRequest
			if err := goMsgpackDecode(entry[1:], &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// packedWire must list the request's fields in the same order, with the
// same types except the renderings taken by pointer.
func TestPackedWireMatchesTheRequest(t *testing.T) {
	check := func(want, got reflect.Type) {
		t.Helper()
		if want.NumField() != got.NumField() {
			t.Fatalf("%s has %d fields, its wire form %d", want, want.NumField(), got.NumField())
		}
		for i := range want.NumField() {
			wf, gf := want.Field(i), got.Field(i)
			wantType := wf.Type
			if wf.Name == "PutRendered" {
				wantType = reflect.TypeOf(map[string]*state.Rendered{})
			}
			if wf.Name != gf.Name || (wf.Name != "Update" && wantType != gf.Type) {
				t.Fatalf("field %d: %s %s against %s %s", i, wf.Name, wantType, gf.Name, gf.Type)
			}
		}
	}
	check(reflect.TypeOf(UpdateDesiredStateRequest{}), reflect.TypeOf(packedWire{}))
	check(reflect.TypeOf(state.DesiredUpdate{}), reflect.TypeOf(packedWire{}.Update))
}

// Two templated workloads in one update keep their own renderings (the
// go-msgpack decode of type 8 gave both the last one's).
func TestTwoRenderingsStayApart(t *testing.T) {
	a := &state.Workload{Agent: "agent_A", Runtime: "podman", RuntimeConfig: "image: {{c.a}}", Configs: map[string]string{"c": "cfg"}}
	b := &state.Workload{Agent: "agent_B", Runtime: "podman", RuntimeConfig: "image: {{c.b}}", Configs: map[string]string{"c": "cfg"}}
	ra := &state.Workload{Agent: "agent_A", Runtime: "podman", RuntimeConfig: "image: AAA"}
	rb := &state.Workload{Agent: "agent_B", Runtime: "podman", RuntimeConfig: "image: BBB"}
	body := UpdateDesiredStateRequest{Seq: 1, Update: state.DesiredUpdate{
		PutWorkloads: map[string]*state.Workload{"a": a, "b": b},
		PutRendered: map[string]state.Rendered{
			"a": {Instance: state.NewInstanceName("a", "agent_A", ra.RuntimeConfig), Workload: ra},
			"b": {Instance: state.NewInstanceName("b", "agent_B", rb.RuntimeConfig), Workload: rb}},
	}}
	buf, err := Encode(UpdateDesiredStatePackedType, &body)
	if err != nil {
		t.Fatal(err)
	}
	for name, dec := range map[string]func([]byte, *UpdateDesiredStateRequest) error{"readPacked": readPacked, "go-msgpack": goMsgpackDecode} {
		var got UpdateDesiredStateRequest
		if err := dec(buf[1:], &got); err != nil {
			t.Fatal(err)
		}
		if a, b := got.Update.PutRendered["a"].Workload, got.Update.PutRendered["b"].Workload; a == nil || b == nil ||
			a.RuntimeConfig != "image: AAA" || b.RuntimeConfig != "image: BBB" {
			t.Fatalf("%s: renderings %+v and %+v", name, a, b)
		}
	}
}
