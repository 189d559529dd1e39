package faultnet

import (
	"errors"
	"fmt"
	"net"
	"sync"
)

// ErrCut is returned when dialing across a cut link.
var ErrCut = errors.New("faultnet: link cut")

// Network decides which replicas can reach each other. The zero value is
// not usable; call New.
type Network struct {
	mu sync.Mutex
	// owner maps a listening address (host:port) to the replica id.
	owner map[string]string
	// group is the current partition: replicas in different groups are
	// cut; a replica in no group reaches everyone not isolated.
	group map[string]int
	// isolated replicas reach nobody.
	isolated map[string]bool
	// cuts are single links cut with Cut.
	cuts  map[[2]string]bool
	conns map[*conn]struct{}
	// frozen replicas' Raft connections wait until the channel closes
	// (Freeze).
	frozen map[string]chan struct{}
}

// New returns a network with every link up.
func New() *Network {
	return &Network{
		owner: map[string]string{}, group: map[string]int{}, isolated: map[string]bool{},
		cuts: map[[2]string]bool{}, conns: map[*conn]struct{}{}, frozen: map[string]chan struct{}{},
	}
}

// Partition splits the replicas into groups that cannot reach each other,
// replacing any earlier partition. Replicas named in no group keep reaching
// everyone.
func (n *Network) Partition(groups ...[]string) {
	n.mu.Lock()
	n.group = map[string]int{}
	for i, g := range groups {
		for _, id := range g {
			n.group[id] = i
		}
	}
	n.mu.Unlock()
	n.closeCut()
}

// Isolate cuts id off from every other replica.
func (n *Network) Isolate(id string) {
	n.mu.Lock()
	n.isolated[id] = true
	n.mu.Unlock()
	n.closeCut()
}

// Cut cuts the single link between a and b, both ways.
func (n *Network) Cut(a, b string) {
	n.mu.Lock()
	n.cuts[pairKey(a, b)] = true
	n.mu.Unlock()
	n.closeCut()
}

// Heal restores every link.
func (n *Network) Heal() {
	n.mu.Lock()
	n.group = map[string]int{}
	n.isolated = map[string]bool{}
	n.cuts = map[[2]string]bool{}
	n.mu.Unlock()
}

// Connected says whether a and b can reach each other. An empty id (an
// address no replica registered) is reachable unless the other end is
// isolated.
func (n *Network) Connected(a, b string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.connectedLocked(a, b)
}

func (n *Network) connectedLocked(a, b string) bool {
	if a == b {
		return true
	}
	if n.isolated[a] || n.isolated[b] {
		return false
	}
	if a == "" || b == "" {
		return true
	}
	ga, okA := n.group[a]
	gb, okB := n.group[b]
	if okA && okB && ga != gb {
		return false
	}
	return !n.cuts[pairKey(a, b)]
}

// register records that id listens on addr.
func (n *Network) register(id, addr string) {
	n.mu.Lock()
	n.owner[addr] = id
	n.mu.Unlock()
}

// ownerOf is the replica listening on addr, or "".
func (n *Network) ownerOf(addr string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.owner[addr]
}

// dial connects from id to addr (owned by peer) unless the link is cut, and
// tracks the connection so a later cut closes it.
func (n *Network) dial(from, peer, addr string, dial func() (net.Conn, error)) (net.Conn, error) {
	if !n.Connected(from, peer) {
		return nil, fmt.Errorf("%w: %s -> %s (%s)", ErrCut, from, peer, addr)
	}
	c, err := dial()
	if err != nil {
		return nil, err
	}
	tc := &conn{Conn: newStalling(c, n, from), nw: n, from: from, to: peer}
	n.mu.Lock()
	n.conns[tc] = struct{}{}
	ok := n.connectedLocked(from, peer)
	n.mu.Unlock()
	if !ok {
		// Cut while dialing.
		tc.Close()
		return nil, fmt.Errorf("%w: %s -> %s (%s)", ErrCut, from, peer, addr)
	}
	return tc, nil
}

// closeCut closes every tracked connection whose link is now cut.
func (n *Network) closeCut() {
	n.mu.Lock()
	var doomed []*conn
	for c := range n.conns {
		if !n.connectedLocked(c.from, c.to) {
			doomed = append(doomed, c)
		}
	}
	n.mu.Unlock()
	for _, c := range doomed {
		c.Close()
	}
}

func (n *Network) forget(c *conn) {
	n.mu.Lock()
	delete(n.conns, c)
	n.mu.Unlock()
}

func pairKey(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// conn is a dialed connection the network can close on a cut.
type conn struct {
	net.Conn
	nw       *Network
	from, to string
	once     sync.Once
}

func (c *conn) Close() error {
	var err error
	c.once.Do(func() {
		c.nw.forget(c)
		err = c.Conn.Close()
	})
	return err
}
