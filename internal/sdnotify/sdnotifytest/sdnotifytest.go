// Package sdnotifytest is systemd's notify socket as tests see it: a
// unixgram socket that records every datagram a process under test sends
// (READY=1, STATUS=..., WATCHDOG=1). Tests only; nothing a product binary
// links.
package sdnotifytest

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Socket records what arrives at its Path.
type Socket struct {
	// Path is the socket's address, for NOTIFY_SOCKET.
	Path string

	mu   sync.Mutex
	msgs []string
}

// Listen opens a socket in a short temporary directory (sun_path holds
// 108 bytes) and records until the test ends. It does not set
// NOTIFY_SOCKET: a test sets it for itself (t.Setenv) or for the
// processes it starts.
func Listen(t testing.TB) *Socket {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &Socket{Path: filepath.Join(dir, "notify")}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: s.Path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.msgs = append(s.msgs, string(buf[:n]))
			s.mu.Unlock()
		}
	}()
	return s
}

// Messages is every datagram so far, in order.
func (s *Socket) Messages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.msgs...)
}

// Count is how many datagrams were exactly msg.
func (s *Socket) Count(msg string) int {
	n := 0
	for _, m := range s.Messages() {
		if m == msg {
			n++
		}
	}
	return n
}

// Status is the last STATUS= text, empty before any.
func (s *Socket) Status() string {
	msgs := s.Messages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(msgs[i], "STATUS="); ok {
			return v
		}
	}
	return ""
}
