package fsm

import (
	"errors"

	"github.com/grapnel-io/grapnel/state"
)

// readPacked decodes a packed body as goMsgpackDecode does, without
// reflection: every replica decodes every update, and go-msgpack spent
// most of a decode finding its way through the types. Config items
// (values of any type) are handed to go-msgpack, so they come out exactly
// as before. It accepts exactly what the types allow; on anything else it
// returns errUnexpected and the caller decodes the body with go-msgpack
// instead, so a surprise costs time, never a different result.
// TestReadPackedMatchesGoMsgpack and FuzzReadPacked hold it to
// goMsgpackDecode's results.
func readPacked(buf []byte, r *UpdateDesiredStateRequest) error {
	d := &mpReader{b: buf}
	n, ok := d.arrayLen()
	if !ok {
		return errUnexpected
	}
	for i := range n {
		switch i {
		case 0:
			d.desiredUpdate(&r.Update)
		case 1:
			r.Seq = d.uint()
		default:
			d.skip()
		}
	}
	if d.err == nil && d.i != len(d.b) {
		d.err = errUnexpected
	}
	return d.err
}

// errUnexpected is any input readPacked leaves to go-msgpack.
var errUnexpected = errors.New("packed body: unexpected encoding")

// mpReader reads msgpack. After the first error every read returns a zero
// value and err stays set.
type mpReader struct {
	b   []byte
	i   int
	err error
}

func (d *mpReader) fail() { d.err = errUnexpected; d.i = len(d.b) }

// next returns n bytes and moves past them.
func (d *mpReader) next(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.b)-d.i {
		d.fail()
		return nil
	}
	p := d.b[d.i : d.i+n]
	d.i += n
	return p
}

func (d *mpReader) peek() byte {
	if d.err != nil || d.i >= len(d.b) {
		d.fail()
		return 0
	}
	return d.b[d.i]
}

// isNil moves past a nil.
func (d *mpReader) isNil() bool {
	if d.peek() == 0xc0 && d.err == nil {
		d.i++
		return true
	}
	return false
}

// be reads an n-byte big-endian unsigned integer (n is 1, 2, 4 or 8).
func (d *mpReader) be(n int) uint64 {
	var v uint64
	for _, b := range d.next(n) {
		v = v<<8 | uint64(b)
	}
	return v
}

// length reads a container or string length of n bytes, bounded by what
// is left so a corrupt length cannot ask for a huge allocation.
func (d *mpReader) length(n int) int {
	l := d.be(n)
	if l > uint64(len(d.b)-d.i) {
		d.fail()
		return 0
	}
	return int(l)
}

// arrayLen reads an array header; ok is false for nil (and on error).
func (d *mpReader) arrayLen() (int, bool) { return d.header(0x90, 0xdc, 0xdd) }

// mapLen reads a map header; ok is false for nil (and on error).
func (d *mpReader) mapLen() (int, bool) { return d.header(0x80, 0xde, 0xdf) }

// header reads a container header: fix is the first of its 16 fixed-size
// codes, c16 and c32 the codes with a 2- and 4-byte length.
func (d *mpReader) header(fix, c16, c32 byte) (int, bool) {
	if d.isNil() {
		return 0, false
	}
	c := d.peek()
	if d.err != nil {
		return 0, false
	}
	d.i++
	switch {
	case c >= fix && c <= fix+0x0f:
		return int(c & 0x0f), true
	case c == c16:
		return d.length(2), d.err == nil
	case c == c32:
		return d.length(4), d.err == nil
	}
	d.fail()
	return 0, false
}

// str reads a string (str or bin); nil is "".
func (d *mpReader) str() string {
	if d.isNil() {
		return ""
	}
	c := d.peek()
	if d.err != nil {
		return ""
	}
	d.i++
	var n int
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = int(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		n = d.length(1)
	case c == 0xda || c == 0xc5:
		n = d.length(2)
	case c == 0xdb || c == 0xc6:
		n = d.length(4)
	default:
		d.fail()
		return ""
	}
	return string(d.next(n))
}

// uint reads a non-negative integer; nil is 0.
func (d *mpReader) uint() uint64 {
	if d.isNil() {
		return 0
	}
	c := d.peek()
	if d.err != nil {
		return 0
	}
	d.i++
	switch {
	case c <= 0x7f:
		return uint64(c)
	case c >= 0xcc && c <= 0xcf:
		return d.be(1 << (c - 0xcc))
	case c >= 0xd0 && c <= 0xd3:
		// A signed encoding of a value that is not negative.
		n := 1 << (c - 0xd0)
		if v := d.be(n); v>>(8*n-1) == 0 {
			return v
		}
	}
	d.fail()
	return 0
}

// bool reads a boolean; nil is false.
func (d *mpReader) bool() bool {
	if d.isNil() {
		return false
	}
	switch d.peek() {
	case 0xc2:
		d.i++
		return false
	case 0xc3:
		d.i++
		return true
	}
	d.fail()
	return false
}

// skip moves past one value of any type. It counts the values still to
// skip instead of recursing, so that a body nested a million levels deep
// costs a loop, not a stack.
func (d *mpReader) skip() {
	for left := 1; left > 0 && d.err == nil; left-- {
		c := d.peek()
		if d.err != nil {
			return
		}
		d.i++
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c >= 0x80 && c <= 0x8f:
			left += 2 * int(c&0x0f)
		case c >= 0x90 && c <= 0x9f:
			left += int(c & 0x0f)
		case c >= 0xa0 && c <= 0xbf:
			d.next(int(c & 0x1f))
		case c == 0xc4 || c == 0xd9:
			d.next(d.length(1))
		case c == 0xc5 || c == 0xda:
			d.next(d.length(2))
		case c == 0xc6 || c == 0xdb:
			d.next(d.length(4))
		case c == 0xc7:
			d.next(d.length(1) + 1)
		case c == 0xc8:
			d.next(d.length(2) + 1)
		case c == 0xc9:
			d.next(d.length(4) + 1)
		case c == 0xca:
			d.next(4)
		case c == 0xcb:
			d.next(8)
		case c >= 0xcc && c <= 0xcf:
			d.next(1 << (c - 0xcc))
		case c >= 0xd0 && c <= 0xd3:
			d.next(1 << (c - 0xd0))
		case c >= 0xd4 && c <= 0xd8:
			d.next(1 + 1<<(c-0xd4))
		case c == 0xdc:
			left += d.children(d.length(2), 1)
		case c == 0xdd:
			left += d.children(d.length(4), 1)
		case c == 0xde:
			left += d.children(d.length(2), 2)
		case c == 0xdf:
			left += d.children(d.length(4), 2)
		default:
			d.fail()
		}
	}
}

// children is the number of values n entries of per values each hold; a
// count the rest of the body cannot hold (each value takes a byte at
// least) fails the read.
func (d *mpReader) children(n, per int) int {
	if d.err != nil || n > (len(d.b)-d.i)/per {
		d.fail()
		return 0
	}
	return n * per
}

// strings reads a []string: nil stays nil, an empty array is empty.
func (d *mpReader) strings() []string {
	n, ok := d.arrayLen()
	if !ok {
		return nil
	}
	out := make([]string, 0, n)
	for range n {
		out = append(out, d.str())
	}
	return out
}

// stringMap reads a map[string]string.
func (d *mpReader) stringMap() map[string]string {
	n, ok := d.mapLen()
	if !ok {
		return nil
	}
	out := make(map[string]string, n)
	for range n {
		k := d.str()
		out[k] = d.str()
	}
	return out
}

// structLen reads a struct's array header: its fields in declaration
// order; nil is a zero struct. Callers skip the elements past the fields
// they know, which a newer binary added.
func (d *mpReader) structLen() int {
	n, _ := d.arrayLen()
	return n
}

func (d *mpReader) desiredUpdate(u *state.DesiredUpdate) {
	for i := range d.structLen() {
		switch i {
		case 0:
			u.APIVersion = d.str()
		case 1:
			if n, ok := d.mapLen(); ok {
				u.PutWorkloads = make(map[string]*state.Workload, n)
				for range n {
					k := d.str()
					u.PutWorkloads[k] = d.workloadPtr()
				}
			}
		case 2:
			u.DeleteWorkloads = d.strings()
		case 3:
			u.PutConfigs = d.configs()
		case 4:
			u.DeleteConfigs = d.strings()
		case 5:
			if n, ok := d.mapLen(); ok {
				u.PutRendered = make(map[string]state.Rendered, n)
				for range n {
					k := d.str()
					u.PutRendered[k] = d.rendered()
				}
			}
		case 6:
			u.DeleteRendered = d.strings()
		case 7:
			if n, ok := d.arrayLen(); ok {
				u.SetStates = make([]state.WorkloadState, n)
				for j := range u.SetStates {
					d.workloadState(&u.SetStates[j])
				}
			}
		case 8:
			if n, ok := d.arrayLen(); ok {
				u.DeleteStates = make([]state.InstanceName, n)
				for j := range u.DeleteStates {
					d.instance(&u.DeleteStates[j])
				}
			}
		case 9:
			if n, ok := d.mapLen(); ok {
				u.AgentTags = make(map[string]map[string]string, n)
				for range n {
					k := d.str()
					u.AgentTags[k] = d.stringMap()
				}
			}
		default:
			d.skip()
		}
	}
}

func (d *mpReader) rendered() state.Rendered {
	var r state.Rendered
	for i := range d.structLen() {
		switch i {
		case 0:
			d.instance(&r.Instance)
		case 1:
			r.Workload = d.workloadPtr()
		default:
			d.skip()
		}
	}
	return r
}

func (d *mpReader) workloadState(ws *state.WorkloadState) {
	for i := range d.structLen() {
		switch i {
		case 0:
			d.instance(&ws.Instance)
		case 1:
			for j := range d.structLen() {
				switch j {
				case 0:
					ws.State.State = state.ExecState(d.str())
				case 1:
					ws.State.SubState = d.str()
				case 2:
					ws.State.AdditionalInfo = d.str()
				default:
					d.skip()
				}
			}
		default:
			d.skip()
		}
	}
}

// configs hands the config items to go-msgpack: their values may be of
// any type, and go-msgpack decides what type each becomes.
func (d *mpReader) configs() map[string]any {
	start := d.i
	d.skip()
	if d.err != nil {
		return nil
	}
	var m map[string]any
	if err := msgpackDecode(d.b[start:d.i], &m); err != nil {
		d.fail()
		return nil
	}
	return m
}

func (d *mpReader) instance(in *state.InstanceName) {
	for i := range d.structLen() {
		switch i {
		case 0:
			in.WorkloadName = d.str()
		case 1:
			in.AgentName = d.str()
		case 2:
			in.ID = d.str()
		default:
			d.skip()
		}
	}
}

func (d *mpReader) workloadPtr() *state.Workload {
	if d.isNil() {
		return nil
	}
	w := &state.Workload{}
	for i := range d.structLen() {
		switch i {
		case 0:
			w.Agent = d.str()
		case 1:
			w.RestartPolicy = state.RestartPolicy(d.str())
		case 2:
			if n, ok := d.mapLen(); ok {
				w.Dependencies = make(map[string]state.AddCondition, n)
				for range n {
					k := d.str()
					w.Dependencies[k] = state.AddCondition(d.str())
				}
			}
		case 3:
			w.Tags = d.stringMap()
		case 4:
			w.Runtime = d.str()
		case 5:
			w.RuntimeConfig = d.str()
		case 6:
			for j := range d.structLen() {
				switch j {
				case 0:
					w.ControlInterfaceAccess.AllowRules = d.rules()
				case 1:
					w.ControlInterfaceAccess.DenyRules = d.rules()
				default:
					d.skip()
				}
			}
		case 7:
			w.Configs = d.stringMap()
		case 8:
			if n, ok := d.arrayLen(); ok {
				w.Files = make([]state.File, n)
				for j := range w.Files {
					d.file(&w.Files[j])
				}
			}
		default:
			d.skip()
		}
	}
	return w
}

func (d *mpReader) file(f *state.File) {
	for i := range d.structLen() {
		switch i {
		case 0:
			f.MountPoint = d.str()
		case 1:
			f.Content = d.str()
		case 2:
			f.Binary = d.bool()
		default:
			d.skip()
		}
	}
}

func (d *mpReader) rules() []state.AccessRule {
	n, ok := d.arrayLen()
	if !ok {
		return nil
	}
	out := make([]state.AccessRule, n)
	for j := range out {
		r := &out[j]
		for i := range d.structLen() {
			switch i {
			case 0:
				r.IsLogRule = d.bool()
			case 1:
				r.Operation = state.ReadWrite(d.str())
			case 2:
				r.FilterMasks = d.strings()
			case 3:
				r.WorkloadNames = d.strings()
			default:
				d.skip()
			}
		}
	}
	return out
}
