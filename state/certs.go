package state

import "slices"

// ReplicaCert is a certificate a replica of the configuration showed on
// the Raft port, as the leader recorded it: its serial (lower-case hex)
// and when it expires. The record lets any later leader revoke the
// certificates of a replica an operator removes, even one that is down
// and never talked to that leader.
type ReplicaCert struct {
	Serial     string `json:"s"`
	NotAfterMs int64  `json:"n,omitempty"`
}

// RevokedCert is a certificate revoked when an operator removed the
// replica that held it: its replica id, expiry and the Raft index of the
// removal. Every replica refuses it on the Raft and gRPC ports.
type RevokedCert struct {
	ID         string `json:"id"`
	NotAfterMs int64  `json:"n,omitempty"`
	Index      uint64 `json:"x"`
}

// MaxCertsPerReplica bounds the certificates recorded per replica id: the
// one in use and a few before it (rotations), which a removal revokes
// all. An older one that fell out was replaced long ago.
const MaxCertsPerReplica = 4

// RecordReplicaCert records that replica id showed certificate c. A
// serial already recorded or revoked changes nothing.
func (s *Store) RecordReplicaCert(id string, c ReplicaCert) {
	if _, revoked := s.Revoked[c.Serial]; revoked {
		return
	}
	have := s.ReplicaCerts[id]
	if slices.ContainsFunc(have, func(r ReplicaCert) bool { return r.Serial == c.Serial }) {
		return
	}
	if s.ReplicaCerts == nil {
		s.ReplicaCerts = map[string][]ReplicaCert{}
	}
	have = append(slices.Clone(have), c)
	if len(have) > MaxCertsPerReplica {
		have = have[len(have)-MaxCertsPerReplica:]
	}
	s.ReplicaCerts[id] = have
}

// RevokeReplica revokes every certificate recorded for replica id and
// those in seen (what the removing leader saw of it itself), at the
// removal's index, and drops the record. Revocations whose certificate
// expired before nowMs are dropped: an expired certificate fails the
// handshake anyway, so the set stays bounded over a vehicle's life.
func (s *Store) RevokeReplica(id string, seen []ReplicaCert, index uint64, nowMs int64) {
	certs := append(slices.Clone(s.ReplicaCerts[id]), seen...)
	delete(s.ReplicaCerts, id)
	if len(s.ReplicaCerts) == 0 {
		s.ReplicaCerts = nil
	}
	for serial, r := range s.Revoked {
		if r.NotAfterMs != 0 && r.NotAfterMs < nowMs {
			delete(s.Revoked, serial)
		}
	}
	for _, c := range certs {
		if c.Serial == "" || c.NotAfterMs != 0 && c.NotAfterMs < nowMs {
			continue
		}
		if s.Revoked == nil {
			s.Revoked = map[string]RevokedCert{}
		}
		s.Revoked[c.Serial] = RevokedCert{ID: id, NotAfterMs: c.NotAfterMs, Index: index}
	}
	if len(s.Revoked) == 0 {
		s.Revoked = nil
	}
}

// RevokedSerial returns the revocation of the certificate serial.
func (s *Store) RevokedSerial(serial string) (RevokedCert, bool) {
	r, ok := s.Revoked[serial]
	return r, ok
}

// cloneReplicaCerts copies the record; the slices are never changed in
// place (RecordReplicaCert appends to a copy).
func cloneReplicaCerts(m map[string][]ReplicaCert) map[string][]ReplicaCert {
	if m == nil {
		return nil
	}
	out := make(map[string][]ReplicaCert, len(m))
	for id, cs := range m {
		out[id] = cs
	}
	return out
}
