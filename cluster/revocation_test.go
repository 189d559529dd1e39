package cluster_test

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/internal/tlsreload"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/rpctest"
	"github.com/grapnel-io/grapnel/state"
)

// reissuable hands each replica its certificate, and a new one (a new
// serial, same id) after reissue: the unit that replaces a removed one.
type reissuable struct {
	t      *testing.T
	ca     *rpctest.CA
	mu     sync.Mutex
	stores map[string]*tlsreload.Store
	gen    atomic.Int64 // names each certificate's files apart
}

func (r *reissuable) certs(id string) *tlsreload.Store {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.stores[id]; ok {
		return s
	}
	s, err := rpc.NewTLSStore(r.ca.IssueIdentity(r.t, "replica-"+id+"-"+strconv.FormatInt(r.gen.Add(1), 10), identity.Replica, id, identity.ServerSAN))
	if err != nil {
		r.t.Fatal(err)
	}
	r.stores[id] = s
	return s
}

func (r *reissuable) reissue(id string) {
	r.mu.Lock()
	delete(r.stores, id)
	r.mu.Unlock()
}

func serialOf(s *tlsreload.Store) string { return identity.Serial(s.Current().Leaf) }

// Requirement (issue 27, hole 1): an operator's removal revokes the
// removed replica's certificate on every replica, even when the replica
// is down and the leader that removes it never talked to it: the leader
// records each member's certificate in the replicated state. The removed
// key then opens nothing: a fresh run with it on a wiped disk is never
// admitted. The same unit with a new certificate is.
func TestRemovalRevokesTheReplicasCertificate(t *testing.T) {
	r := &reissuable{t: t, ca: rpctest.NewCA(t), stores: map[string]*tlsreload.Store{}}
	c := clustertest.New(t, 3, clustertest.WithRaftTLS(r.certs))
	c.WaitFor("three voters", waitLong, func() bool {
		v, _, ok := c.LeaderConfiguration()
		return ok && len(v) == 3
	})
	ids := c.IDs()
	for _, id := range ids {
		c.WaitFor(id+" records every member's certificate", waitLong, func() bool {
			for _, m := range ids {
				got := c.FSM(id).RecordedCerts(m)
				if !slices.ContainsFunc(got, func(rc state.ReplicaCert) bool { return rc.Serial == serialOf(r.certs(m)) }) {
					return false
				}
			}
			return true
		})
	}

	// The removed replica is down, and the leader that removes it is
	// one that may never have dialled it: leadership moves first.
	victim := c.Followers()[0].ID()
	oldSerial := serialOf(r.certs(victim))
	c.Stop(victim)
	var other string
	for _, id := range c.Running() {
		if id != c.WaitLeader(waitLong).ID() {
			other = id
		}
	}
	if err := onLeader(c, func(l *cluster.Node) error {
		if l.ID() != other {
			if err := l.TransferLeadership(other); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Logf("moving leadership to %s: %v (removing on whichever leads)", other, err)
	}
	if err := onLeader(c, func(l *cluster.Node) error {
		_, err := l.RemoveReplica(victim, 5*time.Second)
		return err
	}); err != nil {
		t.Fatalf("removing %s: %v", victim, err)
	}
	for _, id := range c.Running() {
		c.WaitFor(id+" revokes "+victim+"'s certificate", waitLong, func() bool {
			rev, ok := c.FSM(id).RevokedCert(oldSerial)
			return ok && rev.ID == victim
		})
	}

	// The stolen key: a fresh run on a wiped disk with the old
	// certificate announces itself through gossip and is never added.
	c.Wipe(victim)
	c.Restart(victim)
	inConfig := func() bool {
		v, nv, ok := c.LeaderConfiguration()
		return ok && (slices.Contains(v, victim) || slices.Contains(nv, victim))
	}
	holdsFor(t, 3*time.Second, victim+" with its revoked certificate kept out", func() bool { return !inConfig() })

	// The replacement unit: a new certificate for the same id.
	c.Stop(victim)
	c.Wipe(victim)
	r.reissue(victim)
	c.Restart(victim)
	waitVoter(c, victim)
	waitSettled(t, c, 3)
}
