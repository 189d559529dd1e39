// Package pki makes the certificates and gossip keys a secured chaos
// campaign runs with: one CA; a replica certificate per replica
// (grapnel://replica/ID and the DNS name ank-server that clients verify),
// an agent certificate per agent, an operator certificate for the
// campaign's own clients and observer; and, for the intruder, an agent
// certificate of a name no agent has (the wrong role for everything it
// tries), a certificate from a CA nobody trusts, a replica certificate
// of a replica never admitted, and two commander certificates (one named
// as the operator is). The certificates are the ones `grapnel certs`
// makes (internal/certs), one directory each.
package pki

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/grapnel-io/grapnel/internal/certs"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/rpc"
)

// Set is the files of one campaign.
type Set struct {
	Dir string
	// CA is the trusted CA certificate's file.
	CA string
	// Replicas, Agents and Operator are by name.
	Replicas map[string]rpc.TLSFiles
	Agents   map[string]rpc.TLSFiles
	Operator rpc.TLSFiles
	// WrongRole is an agent certificate of the name IntruderAgent, signed
	// by the CA; Foreign one signed by another CA (with the campaign's CA
	// to verify the replicas by).
	WrongRole rpc.TLSFiles
	Foreign   rpc.TLSFiles
	// StrayReplica is a replica certificate of the CA for IntruderReplica,
	// a replica no cluster ever admitted.
	StrayReplica rpc.TLSFiles
	// Commander is a commander certificate named IntruderCommander: the
	// role that reads and changes the desired state but may not widen a
	// workload's privileges. Impostor is a commander certificate named as
	// the operator is (OperatorName), which must not own her locks.
	Commander rpc.TLSFiles
	Impostor  rpc.TLSFiles
	// GossipKey is the replicas' gossip key file.
	GossipKey string
	// Removed are the certificates of replicas an operator removed
	// (Reissue keeps them): revoked, the intruder tries them.
	Removed []rpc.TLSFiles

	validity time.Duration
	mu       sync.Mutex // guards Replicas and Removed after Make
}

// The names of the intruder's certificates, and the operator's.
const (
	IntruderAgent     = "intruder_agent"
	IntruderReplica   = "intruder_replica"
	IntruderCommander = "intruder_cmd"
	OperatorName      = "chaos"
)

// The CAs' directories under Set.Dir.
const (
	caDir      = "ca"
	foreignDir = "foreign-ca"
)

// Make writes a Set into dir for the replica and agent names.
func Make(dir string, replicas, agents []string, validity time.Duration) (*Set, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	now := time.Now()
	// The CAs outlive what they sign by a margin: certs.Issue refuses a
	// certificate that would expire after its CA.
	for _, ca := range []string{caDir, foreignDir} {
		if err := certs.NewCA(filepath.Join(dir, ca), now, validity+time.Hour); err != nil {
			return nil, err
		}
	}
	s := &Set{Dir: dir, CA: filepath.Join(dir, caDir, certs.CACert), Replicas: map[string]rpc.TLSFiles{},
		Agents: map[string]rpc.TLSFiles{}, validity: validity}
	var err error
	for _, r := range replicas {
		if s.Replicas[r], err = s.issue(caDir, "replica-"+r, identity.Replica, r); err != nil {
			return nil, err
		}
	}
	for _, a := range agents {
		if s.Agents[a], err = s.issue(caDir, "agent-"+a, identity.Agent, a); err != nil {
			return nil, err
		}
	}
	if s.Operator, err = s.issue(caDir, "operator", identity.Operator, OperatorName); err != nil {
		return nil, err
	}
	if s.WrongRole, err = s.issue(caDir, "wrong-role", identity.Agent, IntruderAgent); err != nil {
		return nil, err
	}
	if s.StrayReplica, err = s.issue(caDir, "stray-replica", identity.Replica, IntruderReplica); err != nil {
		return nil, err
	}
	if s.Commander, err = s.issue(caDir, "commander", identity.Commander, IntruderCommander); err != nil {
		return nil, err
	}
	if s.Impostor, err = s.issue(caDir, "impostor", identity.Commander, OperatorName); err != nil {
		return nil, err
	}
	if s.Foreign, err = s.issue(foreignDir, "foreign", identity.Operator, "intruder"); err != nil {
		return nil, err
	}
	// The intruder trusts the replicas' CA, so that it is the replica
	// that has to refuse the foreign certificate.
	s.Foreign.CA = s.CA
	s.GossipKey = filepath.Join(dir, "gossip.key")
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.GossipKey, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, err
	}
	return s, nil
}

// Replica returns the files of replica name, issuing them on first use:
// a replaced replica comes back under a new name.
func (s *Set) Replica(name string) (rpc.TLSFiles, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.Replicas[name]; ok {
		return f, nil
	}
	f, err := s.issue(caDir, "replica-"+name, identity.Replica, name)
	if err != nil {
		return rpc.TLSFiles{}, err
	}
	s.Replicas[name] = f
	return f, nil
}

// Reissue gives replica name a new certificate, as the unit that replaces
// a removed one gets (the removal revoked the old one), into a directory
// of generation gen. The old one joins Removed.
func (s *Set) Reissue(name string, gen int) (rpc.TLSFiles, error) {
	f, err := s.issue(caDir, fmt.Sprintf("replica-%s-g%d", name, gen), identity.Replica, name)
	if err != nil {
		return rpc.TLSFiles{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.Replicas[name]; ok {
		s.Removed = append(s.Removed, old)
	}
	s.Replicas[name] = f
	return f, nil
}

// RemovedReplicas is a copy of Removed.
func (s *Set) RemovedReplicas() []rpc.TLSFiles {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rpc.TLSFiles(nil), s.Removed...)
}

// ServerFlags are the TLS and gossip key flags of replica name, as
// grapnel-server takes them.
func (s *Set) ServerFlags(name string) ([]string, error) {
	f, err := s.Replica(name)
	if err != nil {
		return nil, err
	}
	return []string{"--ca_pem", f.CA, "--crt_pem", f.Cert, "--key_pem", f.Key, "--gossip-key-file", s.GossipKey}, nil
}

// issue has the CA in ca sign one identity into its own directory, as
// `grapnel certs issue` does.
func (s *Set) issue(ca, sub string, role identity.Role, name string) (rpc.TLSFiles, error) {
	out := filepath.Join(s.Dir, sub)
	if err := certs.Issue(filepath.Join(s.Dir, ca), out, certs.Request{Role: role, Name: name, Validity: s.validity}, time.Now()); err != nil {
		return rpc.TLSFiles{}, err
	}
	return rpc.TLSFiles{CA: filepath.Join(out, certs.CACert), Cert: filepath.Join(out, certs.Cert), Key: filepath.Join(out, certs.Key)}, nil
}
