package faultnet

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Freezer forwards TCP to a target and can stop passing bytes without
// closing anything: a peer that hangs, or a network that drops everything,
// while the TCP connection still looks open. Only an application-level
// heartbeat notices it.
type Freezer struct {
	lis    net.Listener
	target string
	frozen atomic.Bool

	mu    sync.Mutex // guards conns
	conns []net.Conn
}

// NewFreezer listens on a loopback port and forwards every connection to
// target until Close.
func NewFreezer(target string) (*Freezer, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &Freezer{lis: lis, target: target}
	go f.accept()
	return f, nil
}

// Addr is the address to dial instead of the target.
func (f *Freezer) Addr() string { return f.lis.Addr().String() }

// Freeze stops passing bytes (what arrives is dropped); Thaw resumes.
func (f *Freezer) Freeze() { f.frozen.Store(true) }

// Thaw passes bytes again.
func (f *Freezer) Thaw() { f.frozen.Store(false) }

// Close stops listening and closes every forwarded connection.
func (f *Freezer) Close() {
	f.lis.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
}

func (f *Freezer) accept() {
	for {
		in, err := f.lis.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", f.target)
		if err != nil {
			in.Close()
			continue
		}
		f.mu.Lock()
		f.conns = append(f.conns, in, out)
		f.mu.Unlock()
		go f.pipe(out, in)
		go f.pipe(in, out)
	}
}

// pipe copies src to dst, dropping what it reads while frozen.
func (f *Freezer) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !f.frozen.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			return
		}
	}
}
