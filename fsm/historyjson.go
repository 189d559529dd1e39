package fsm

import (
	"bytes"
	"encoding/json"
	"math"
	"unicode/utf8"

	"github.com/grapnel-io/grapnel/state"
)

// The history's records are most of a full snapshot (256 KiB by default)
// and encoding/json decoded them at about 70 MB/s: 3–4 ms of a replica's
// start before its first answer. decodeTx and decodeTransition read the
// exact form json.Marshal writes them in, several times faster. Anything
// else (whitespace, null, a key they do not know or see twice, an escape
// or a number they do not read, bytes that are not UTF-8) makes them give
// up, and json.Unmarshal decides as before: the result never differs from
// the standard decoder's (FuzzHistoryRecords).

// decodeTx decodes a SnapTx body, or reports false.
func decodeTx(b []byte) (*state.Tx, bool) {
	r := jreader{b: b}
	tx := &state.Tx{}
	r.object(func(key []byte) bool {
		switch string(key) {
		case "s":
			tx.Seq = r.uint(math.MaxUint64)
		case "i":
			tx.Index = r.uint(math.MaxUint64)
		case "t":
			tx.TimeMs = r.int64()
		case "k":
			tx.Kind = state.TxKind(r.str())
		case "r":
			tx.Requester = r.str()
		case "m":
			tx.UpdateMask = r.strs()
		case "why":
			tx.Reason = r.str()
		case "n":
			tx.Count = uint32(r.uint(math.MaxUint32))
		case "w":
			tx.Workloads = []state.TxWorkload{}
			r.array(func() {
				tx.Workloads = append(tx.Workloads, r.txWorkload())
			})
		case "c":
			tx.Configs = []state.TxConfig{}
			r.array(func() {
				var c state.TxConfig
				r.object(func(key []byte) bool {
					switch string(key) {
					case "k":
						c.Key = r.str()
					case "o":
						c.Op = state.TxOp(r.str())
					default:
						return false
					}
					return true
				})
				tx.Configs = append(tx.Configs, c)
			})
		case "v":
			tx.APIVersion = r.str()
		default:
			return false
		}
		return true
	})
	return tx, r.done()
}

func (r *jreader) txWorkload() state.TxWorkload {
	var w state.TxWorkload
	r.object(func(key []byte) bool {
		switch string(key) {
		case "n":
			w.Name = r.str()
		case "o":
			w.Op = state.TxOp(r.str())
		case "i":
			w.Instance = r.str()
		case "p":
			w.OldInstance = r.str()
		case "f":
			w.Changes = []state.FieldChange{}
			r.array(func() {
				var c state.FieldChange
				r.object(func(key []byte) bool {
					switch string(key) {
					case "f":
						c.Field = r.str()
					case "o":
						c.Old = r.str()
					case "n":
						c.New = r.str()
					default:
						return false
					}
					return true
				})
				w.Changes = append(w.Changes, c)
			})
		case "st":
			w.States = r.strs()
		default:
			return false
		}
		return true
	})
	return w
}

// decodeTransition decodes a SnapTransition body, or reports false.
func decodeTransition(b []byte) (*state.Transition, bool) {
	r := jreader{b: b}
	t := &state.Transition{}
	r.object(func(key []byte) bool {
		switch string(key) {
		case "i":
			t.Index = r.uint(math.MaxUint64)
		case "t":
			t.TimeMs = r.int64()
		case "Instance":
			r.object(func(key []byte) bool {
				switch string(key) {
				case "WorkloadName":
					t.Instance.WorkloadName = r.str()
				case "AgentName":
					t.Instance.AgentName = r.str()
				case "ID":
					t.Instance.ID = r.str()
				default:
					return false
				}
				return true
			})
		case "State":
			r.object(func(key []byte) bool {
				switch string(key) {
				case "State":
					t.State.State = state.ExecState(r.str())
				case "SubState":
					t.State.SubState = r.str()
				case "AdditionalInfo":
					t.State.AdditionalInfo = r.str()
				default:
					return false
				}
				return true
			})
		default:
			return false
		}
		return true
	})
	return t, r.done()
}

// restoreHistoryRecord decodes a SnapTx or SnapTransition body into st,
// by json.Unmarshal when the fast reader gives up.
func restoreHistoryRecord(st *state.Store, t SnapshotType, body []byte) error {
	if t == SnapTx {
		tx, ok := decodeTx(body)
		if !ok {
			tx = &state.Tx{}
			if err := json.Unmarshal(body, tx); err != nil {
				return err
			}
		}
		st.History.Restore(tx, nil)
		return nil
	}
	tr, ok := decodeTransition(body)
	if !ok {
		tr = &state.Transition{}
		if err := json.Unmarshal(body, tr); err != nil {
			return err
		}
	}
	st.History.Restore(nil, tr)
	return nil
}

// jreader reads the JSON json.Marshal writes. Once failed it reads
// nothing more; the caller checks done.
type jreader struct {
	b      []byte
	i      int
	failed bool
}

func (r *jreader) fail() { r.failed, r.i = true, len(r.b) }

// next consumes c, or fails.
func (r *jreader) next(c byte) bool {
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	r.fail()
	return false
}

func (r *jreader) peek(c byte) bool { return r.i < len(r.b) && r.b[r.i] == c }

// done reports whether everything was read, and nothing failed.
func (r *jreader) done() bool { return !r.failed && r.i == len(r.b) }

// object reads {"key":value,...}; field reads one value and says whether
// it knows the key. A key seen twice fails: encoding/json merges some
// repeated values, and json.Marshal never writes one.
func (r *jreader) object(field func(key []byte) bool) {
	if !r.next('{') {
		return
	}
	if r.peek('}') {
		r.i++
		return
	}
	var buf [8][]byte
	seen := buf[:0]
	for !r.failed {
		key := r.key()
		for _, k := range seen {
			if bytes.Equal(k, key) {
				r.fail()
				return
			}
		}
		seen = append(seen, key)
		if r.failed || !field(key) {
			r.fail()
			return
		}
		if r.peek(',') {
			r.i++
			continue
		}
		r.next('}')
		return
	}
}

// key reads "key": of plain ASCII letters; the key is the reader's
// bytes, for comparing, not keeping.
func (r *jreader) key() []byte {
	if !r.next('"') {
		return nil
	}
	start := r.i
	for r.i < len(r.b) {
		c := r.b[r.i]
		if c == '"' {
			key := r.b[start:r.i]
			r.i++
			if r.next(':') && len(key) > 0 {
				return key
			}
			break
		}
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			break
		}
		r.i++
	}
	r.fail()
	return nil
}

// array reads [v,...], elem reading each value; [] is an empty slice, as
// json.Unmarshal makes it.
func (r *jreader) array(elem func()) {
	if !r.next('[') {
		return
	}
	if r.peek(']') {
		r.i++
		return
	}
	for !r.failed {
		elem()
		if r.peek(',') {
			r.i++
			continue
		}
		r.next(']')
		return
	}
}

func (r *jreader) strs() []string {
	out := []string{}
	r.array(func() { out = append(out, r.str()) })
	return out
}

// uint reads an unsigned integer up to limit.
func (r *jreader) uint(limit uint64) uint64 {
	start := r.i
	var n uint64
	for r.i < len(r.b) && '0' <= r.b[r.i] && r.b[r.i] <= '9' {
		d := uint64(r.b[r.i] - '0')
		if n > (limit-d)/10 {
			r.fail()
			return 0
		}
		n = n*10 + d
		r.i++
	}
	// No digits, or a leading zero (not JSON), or a fraction or exponent
	// (json.Unmarshal refuses them for an integer).
	if r.i == start || r.b[start] == '0' && r.i-start > 1 || r.i < len(r.b) && (r.b[r.i] == '.' || r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		r.fail()
		return 0
	}
	return n
}

func (r *jreader) int64() int64 {
	if r.peek('-') {
		r.i++
		n := r.uint(1 << 63)
		return int64(-n) // -(1<<63) wraps to itself, math.MinInt64
	}
	return int64(r.uint(math.MaxInt64))
}

// str reads a string. The escapes json.Marshal writes are read; a
// surrogate escape, a control character or bytes that are not UTF-8
// (json.Unmarshal replaces them) fail.
func (r *jreader) str() string {
	if !r.next('"') {
		return ""
	}
	start := r.i
	ascii := true
	for r.i < len(r.b) {
		switch c := r.b[r.i]; {
		case c == '"':
			s := r.b[start:r.i]
			r.i++
			if !ascii && !utf8.Valid(s) {
				r.fail()
				return ""
			}
			return string(s)
		case c == '\\':
			return r.escaped(start)
		case c < 0x20:
			r.fail()
			return ""
		case c >= utf8.RuneSelf:
			ascii = false
			r.i++
		default:
			r.i++
		}
	}
	r.fail()
	return ""
}

// escaped reads the rest of a string from its first escape on; start is
// the string's first byte.
func (r *jreader) escaped(start int) string {
	// The decoded string is no longer than the quoted one: find its end
	// for one allocation, then copy the runs between escapes whole.
	end := r.i
	for end < len(r.b) && r.b[end] != '"' {
		if r.b[end] == '\\' {
			end++
		}
		end++
	}
	out := make([]byte, 0, min(end, len(r.b))-start)
	out = append(out, r.b[start:r.i]...)
	for r.i < len(r.b) {
		run := r.i
		for run < len(r.b) && r.b[run] != '"' && r.b[run] != '\\' && r.b[run] >= 0x20 {
			run++
		}
		out = append(out, r.b[r.i:run]...)
		r.i = run
		if r.i == len(r.b) {
			break
		}
		switch c := r.b[r.i]; {
		case c == '"':
			r.i++
			if !utf8.Valid(out) {
				r.fail()
				return ""
			}
			return string(out)
		case c < 0x20:
			r.fail()
			return ""
		}
		if r.i+1 >= len(r.b) {
			break
		}
		e := r.b[r.i+1]
		r.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if r.i+4 > len(r.b) {
				r.fail()
				return ""
			}
			var v rune
			for _, h := range r.b[r.i : r.i+4] {
				switch {
				case '0' <= h && h <= '9':
					v = v<<4 | rune(h-'0')
				case 'a' <= h && h <= 'f':
					v = v<<4 | rune(h-'a'+10)
				case 'A' <= h && h <= 'F':
					v = v<<4 | rune(h-'A'+10)
				default:
					r.fail()
					return ""
				}
			}
			if utf8.RuneLen(v) < 0 { // a surrogate: json pairs them
				r.fail()
				return ""
			}
			r.i += 4
			out = utf8.AppendRune(out, v)
		default:
			r.fail()
			return ""
		}
	}
	r.fail()
	return ""
}
