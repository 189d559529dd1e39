package bench

import (
	"fmt"
	"net"
)

// FreeAddrs returns n distinct loopback addresses host:port that were free
// a moment ago. All listeners are open at once, so the n ports differ;
// another process may still take one before it is used, which a benchmark
// accepts.
func FreeAddrs(n int) ([]string, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}
