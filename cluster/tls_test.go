package cluster_test

import (
	"crypto/tls"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/internal/tlsreload"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/rpctest"
)

// replicaCerts issues a replica certificate per id from ca, as `grapnel
// certs` does (grapnel://replica/ID plus ank-server).
func replicaCerts(t *testing.T, ca *rpctest.CA) func(id string) *tlsreload.Store {
	var mu sync.Mutex
	stores := map[string]*tlsreload.Store{}
	return func(id string) *tlsreload.Store {
		mu.Lock()
		defer mu.Unlock()
		if s, ok := stores[id]; ok {
			return s
		}
		s, err := rpc.NewTLSStore(ca.IssueIdentity(t, "replica-"+id, identity.Replica, id, identity.ServerSAN))
		if err != nil {
			t.Fatal(err)
		}
		stores[id] = s
		return s
	}
}

// Requirement (issue 17, point 1): replicas form a cluster, elect and
// replicate over mutual TLS 1.3.
func TestTLSClusterReplicates(t *testing.T) {
	ca := rpctest.NewCA(t)
	c := clustertest.New(t, 3, clustertest.WithRaftTLS(replicaCerts(t, ca)))
	c.WaitLeader(waitLong)
	applyAgents(t, c, "tls", 5)
	want := c.WaitConverged()
	waitSameContent(t, c, want)
	for _, id := range c.IDs() {
		requireAgents(t, c, id, names("tls", 5)...)
	}
}

// dialOnly is a stream layer that only dials, for a raw Raft client.
type dialOnly struct {
	dial   func(addr string, timeout time.Duration) (net.Conn, error)
	closed chan struct{}
	once   sync.Once
}

func (d *dialOnly) Accept() (net.Conn, error) { <-d.closed; return nil, net.ErrClosed }
func (d *dialOnly) Close() error              { d.once.Do(func() { close(d.closed) }); return nil }
func (d *dialOnly) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (d *dialOnly) Dial(a raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return d.dial(string(a), timeout)
}

// inject sends target an AppendEntries from a made-up leader in a newer
// term carrying an AgentConnected "intruder" entry, through dial, as the
// attack of issue 17 did, and reports whether the replica answered
// success.
func inject(t *testing.T, c *clustertest.Cluster, id string, dial func(string, time.Duration) (net.Conn, error)) (bool, error) {
	t.Helper()
	n := c.Node(id)
	st := n.Stats()
	lastIndex, _ := strconv.ParseUint(st["last_log_index"], 10, 64)
	lastTerm, _ := strconv.ParseUint(st["last_log_term"], 10, 64)
	term, _ := strconv.ParseUint(st["term"], 10, 64)
	layer := &dialOnly{dial: dial, closed: make(chan struct{})}
	tr := raft.NewNetworkTransport(layer, 1, 2*time.Second, io.Discard)
	defer tr.Close()
	req := &raft.AppendEntriesRequest{
		RPCHeader:    raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte("127.0.0.1:1")},
		Term:         term + 1,
		PrevLogEntry: lastIndex, PrevLogTerm: lastTerm,
		Entries:           []*raft.Log{{Index: lastIndex + 1, Term: term + 1, Type: raft.LogCommand, Data: agentCmd(t, "intruder")}},
		LeaderCommitIndex: lastIndex + 1,
	}
	var resp raft.AppendEntriesResponse
	err := tr.AppendEntries(raft.ServerID(id), raft.ServerAddress(n.RaftAddress()), req, &resp)
	return err == nil && resp.Success, err
}

func plainDial(addr string, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, timeout)
}

// Requirement (issue 17, point 1): the Raft port refuses a plain client
// and a client holding a CA-signed certificate that is not a replica's
// (an agent's, an untyped one) or that of a replica outside its
// configuration: none gets an answer, and nothing they sent is applied.
// The insecure cluster is the control: there the same bytes are applied.
func TestTLSRaftPortRefusesIntruders(t *testing.T) {
	t.Run("control: insecure port applies the injected entry", func(t *testing.T) {
		c := clustertest.New(t, 1)
		c.WaitLeader(waitLong)
		// Retried: the replica's own entries may move its log between
		// reading its last index and the injection.
		c.WaitFor("the injected agent applied", waitLong, func() bool {
			_, _ = inject(t, c, "n1", plainDial)
			return slices.Contains(agents(c.FSM("n1")), "intruder")
		})
	})

	ca := rpctest.NewCA(t)
	agentFiles := ca.IssueIdentity(t, "agent", identity.Agent, "intruder")
	agentStore, err := rpc.NewTLSStore(agentFiles)
	if err != nil {
		t.Fatal(err)
	}
	untyped, err := rpc.NewTLSStore(ca.Issue(t, "untyped", "n1", identity.ServerSAN))
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := rpc.NewTLSStore(ca.IssueIdentity(t, "stranger", identity.Replica, "n9", identity.ServerSAN))
	if err != nil {
		t.Fatal(err)
	}
	withCert := func(s *tlsreload.Store) func(string, time.Duration) (net.Conn, error) {
		return func(addr string, timeout time.Duration) (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", addr, s.ClientConfig(identity.ServerSAN, tls.VersionTLS13, nil))
		}
	}
	c := clustertest.New(t, 1, clustertest.WithRaftTLS(replicaCerts(t, ca)))
	c.WaitLeader(waitLong)
	before, _ := c.Node("n1").RefusedHandshakes()
	for _, tc := range []struct {
		name string
		dial func(string, time.Duration) (net.Conn, error)
	}{
		{"no TLS", plainDial},
		{"agent certificate", withCert(agentStore)},
		{"untyped certificate naming the replica", withCert(untyped)},
		{"replica certificate of a replica outside the configuration", withCert(stranger)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := inject(t, c, "n1", tc.dial)
			if ok || err == nil {
				t.Fatalf("the replica answered (success %v, error %v)", ok, err)
			}
		})
	}
	// Each refusal is counted for /metrics (grapnel_raft_handshakes_refused_total).
	c.WaitFor("4 refused handshakes counted", waitLong, func() bool {
		after, _ := c.Node("n1").RefusedHandshakes()
		return after-before >= 4
	})
	holdsFor(t, time.Second, "no intruder agent", func() bool { return !slices.Contains(agents(c.FSM("n1")), "intruder") })
	if !c.Node("n1").IsLeader() {
		t.Fatal("the replica lost its leadership to an intruder")
	}
}
