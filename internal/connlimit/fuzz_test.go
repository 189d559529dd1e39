package connlimit_test

import (
	"net"
	"testing"

	"github.com/grapnel-io/grapnel/internal/connlimit"
)

// FuzzCapsMatchTheModel drives a wrapped loopback listener with a
// sequence of connects (from one of four sources) and closes (once or
// twice, of any connection held), and checks every outcome and the open
// count against a plain model of the two caps.
func FuzzCapsMatchTheModel(f *testing.F) {
	f.Add(uint8(2), uint8(3), []byte{0, 0, 0, 1, 2, 0x40, 0, 0x80, 0x80, 2})
	f.Add(uint8(1), uint8(1), []byte{0, 1, 0x40, 1, 0x40, 0x40, 0})
	f.Add(uint8(0), uint8(2), []byte{3, 3, 3, 0x81, 3})
	f.Add(uint8(3), uint8(0), []byte{0, 0, 0, 0, 1, 0x42, 0})
	f.Fuzz(func(t *testing.T, perSource, total uint8, ops []byte) {
		lim := connlimit.Limits{PerSource: int(perSource % 5), Total: int(total % 7)}
		if len(ops) > 40 {
			ops = ops[:40]
		}
		s := serve(t, connlimit.Config{Limits: lim})
		type held struct {
			server net.Conn
			src    string
		}
		var open []held
		bySource := map[string]int{}
		for _, op := range ops {
			switch {
			case op&0x40 != 0 && len(open) > 0: // close one, twice when 0x80 is set
				i := int(op&0x3f) % len(open)
				h := open[i]
				h.server.Close()
				if op&0x80 != 0 {
					h.server.Close()
				}
				open = append(open[:i], open[i+1:]...)
				bySource[h.src]--
			default:
				src := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"}[op%4]
				want := (lim.PerSource == 0 || bySource[src] < lim.PerSource) && (lim.Total == 0 || len(open) < lim.Total)
				sc := s.expect(t, src, want)
				if want {
					open = append(open, held{sc, src})
					bySource[src]++
				}
			}
			if got := s.l.Open(); got != len(open) {
				t.Fatalf("after op %#x: open %d, the model has %d", op, got, len(open))
			}
		}
	})
}
