package faultnet

import (
	"net"
	"sync"
)

// Freeze makes replica id's Raft traffic stand still as a stopped
// process's does (SIGSTOP): its connections stay open and new ones to
// it are taken, as its kernel takes them, but it reads and writes
// nothing until Thaw, and what reaches it waits, not lost. Only Raft
// connections freeze; its gossip goes on.
func (n *Network) Freeze(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.frozen[id] == nil {
		n.frozen[id] = make(chan struct{})
	}
}

// Thaw lets a frozen replica's Raft traffic go on where it stopped.
func (n *Network) Thaw(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ch := n.frozen[id]; ch != nil {
		close(ch)
		delete(n.frozen, id)
	}
}

// waitThawed blocks while id is frozen; false if done closed first.
func (n *Network) waitThawed(id string, done <-chan struct{}) bool {
	n.mu.Lock()
	ch := n.frozen[id]
	n.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-done:
		return false
	}
}

// stalling is a connection seen from replica local: while local is
// frozen its reads and writes wait. A read already waiting in the
// kernel when the freeze comes holds what it got until the thaw.
type stalling struct {
	net.Conn
	nw     *Network
	local  string
	closed chan struct{}
	once   sync.Once
}

func newStalling(c net.Conn, nw *Network, local string) *stalling {
	return &stalling{Conn: c, nw: nw, local: local, closed: make(chan struct{})}
}

func (c *stalling) Read(b []byte) (int, error) {
	if !c.nw.waitThawed(c.local, c.closed) {
		return 0, net.ErrClosed
	}
	n, err := c.Conn.Read(b)
	if !c.nw.waitThawed(c.local, c.closed) {
		return 0, net.ErrClosed
	}
	return n, err
}

func (c *stalling) Write(b []byte) (int, error) {
	if !c.nw.waitThawed(c.local, c.closed) {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

func (c *stalling) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}
