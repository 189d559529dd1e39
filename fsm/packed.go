package fsm

import (
	"fmt"
	"maps"
	"reflect"
	"sync"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/grapnel-io/grapnel/state"
)

// packedHandle is the msgpack configuration of packed bodies. Strings stay
// strings and maps inside config items decode as map[string]any, as they
// do from JSON, so a packed entry applies exactly like its JSON form.
// Structs are arrays of their fields in declaration order (half the size
// of field names, and faster to decode), so the structs of a body
// (state.DesiredUpdate and everything it holds) may only ever gain fields
// at their end: an older entry then decodes with the new fields zero.
// TestPackedFormatIsStable holds an entry written in this format. Map keys
// are sorted so that the same body always encodes to the same bytes. A
// handle caches type information and is safe for concurrent use once set
// up.
var packedHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.WriteExt = true
	h.StructToArray = true
	h.Canonical = true
	h.RawToString = true
	h.MapType = reflect.TypeOf(map[string]any(nil))
	return h
}()

// encodePacked writes the type byte and the msgpack body of an
// UpdateDesiredStateRequest. A rendered workload that is the workload's
// own spec (in PutWorkloads, mapping no config, so rendering copies it) is
// sent without its Workload; decodePacked rebuilds it. The caller's body
// is not changed.
func encodePacked(t MessageType, body any) ([]byte, error) {
	var r *UpdateDesiredStateRequest
	switch b := body.(type) {
	case *UpdateDesiredStateRequest:
		r = b
	case UpdateDesiredStateRequest:
		r = &b
	default:
		return nil, fmt.Errorf("encode %s: %w: body is %T", t, ErrBadCommand, body)
	}
	out := *r
	if len(r.Update.PutRendered) > 0 {
		out.Update.PutRendered = maps.Clone(r.Update.PutRendered)
		for n, rw := range out.Update.PutRendered {
			if w, ok := r.Update.PutWorkloads[n]; ok && w != nil && len(w.Configs) == 0 {
				rw.Workload = nil
				out.Update.PutRendered[n] = rw
			}
		}
	}
	// The type byte goes first; the encoder appends after it, in the same
	// array unless the body outgrows it.
	buf := make([]byte, 1, 1024)
	buf[0] = byte(t)
	packed := buf[1:1]
	enc := encoders.Get().(*codec.Encoder)
	defer encoders.Put(enc)
	enc.ResetBytes(&packed)
	if err := enc.Encode(&out); err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	if len(packed) > 0 && &packed[0] == &buf[1:2][0] {
		return buf[:1+len(packed)], nil
	}
	return append(buf[:1], packed...), nil
}

// encoders and decoders keep go-msgpack's per-call setup (buffers, type
// caches) across calls.
var (
	encoders = sync.Pool{New: func() any { return codec.NewEncoderBytes(nil, packedHandle) }}
	decoders = sync.Pool{New: func() any { return codec.NewDecoderBytes(nil, packedHandle) }}
)

// decodePacked decodes a packed body into r and rebuilds the rendered
// workloads left out: each is a copy of its spec.
func decodePacked(buf []byte, r *UpdateDesiredStateRequest) error {
	if readPacked(buf, r) != nil {
		*r = UpdateDesiredStateRequest{}
		if err := goMsgpackDecode(buf, r); err != nil {
			return err
		}
	}
	for n, rw := range r.Update.PutRendered {
		if rw.Workload != nil {
			continue
		}
		w, ok := r.Update.PutWorkloads[n]
		if !ok || w == nil {
			return fmt.Errorf("rendered workload %q has neither a body nor a spec", n)
		}
		rw.Workload = w.Clone()
		r.Update.PutRendered[n] = rw
	}
	return nil
}

// goMsgpackDecode decodes a packed body with go-msgpack, for what
// readPacked leaves to it. go-msgpack decodes every element of a map of
// structs into one reused value, so a pointer inside the struct
// (Rendered.Workload) ends up shared by all elements, holding the last
// one's content: two templated workloads in one update got the same
// rendering. packedWire takes the renderings by pointer, which go-msgpack
// allocates anew for each element.
func goMsgpackDecode(buf []byte, r *UpdateDesiredStateRequest) error {
	var w packedWire
	if err := msgpackDecode(buf, &w); err != nil {
		return err
	}
	u := w.Update
	*r = UpdateDesiredStateRequest{Seq: w.Seq, Update: state.DesiredUpdate{
		APIVersion: u.APIVersion, PutWorkloads: u.PutWorkloads, DeleteWorkloads: u.DeleteWorkloads,
		PutConfigs: u.PutConfigs, DeleteConfigs: u.DeleteConfigs, DeleteRendered: u.DeleteRendered,
		SetStates: u.SetStates, DeleteStates: u.DeleteStates, AgentTags: u.AgentTags,
	}}
	if u.PutRendered != nil {
		r.Update.PutRendered = make(map[string]state.Rendered, len(u.PutRendered))
		for n, rw := range u.PutRendered {
			if rw != nil {
				r.Update.PutRendered[n] = *rw
			} else {
				r.Update.PutRendered[n] = state.Rendered{}
			}
		}
	}
	return nil
}

// msgpackDecode decodes buf into v with a pooled go-msgpack decoder.
func msgpackDecode(buf []byte, v any) error {
	dec := decoders.Get().(*codec.Decoder)
	dec.ResetBytes(buf)
	err := dec.Decode(v)
	dec.ResetBytes(nil)
	decoders.Put(dec)
	return err
}

// packedWire is UpdateDesiredStateRequest field for field, with the
// renderings by pointer (see goMsgpackDecode).
// TestPackedWireMatchesTheRequest keeps the fields in step.
type packedWire struct {
	Update struct {
		APIVersion      string
		PutWorkloads    map[string]*state.Workload
		DeleteWorkloads []string
		PutConfigs      map[string]any
		DeleteConfigs   []string
		PutRendered     map[string]*state.Rendered
		DeleteRendered  []string
		SetStates       []state.WorkloadState
		DeleteStates    []state.InstanceName
		AgentTags       map[string]map[string]string
	}
	Seq uint64
}
