package fsm

import (
	"maps"

	"github.com/grapnel-io/grapnel/state"
)

// RemovedRun implements cluster.RemovalLedger: the recorded removal of
// replica id (state.RemovedReplica).
func (f *FSM) RemovedRun(id string) (incarnation, index uint64, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, ok := f.store.Removal(id)
	return r.Incarnation, r.Index, ok
}

// RemovalEntry implements cluster.RemovalLedger: the ReplicaRemovalType
// entry that records the removal of run incarnation of replica id (0:
// no run is known) and revokes its certificates, certs besides those
// recorded, at the leader's time nowMs; or, with forget, drops the run's
// record (revocations stay).
func (f *FSM) RemovalEntry(id string, incarnation uint64, forget bool, certs []state.ReplicaCert, nowMs int64) ([]byte, error) {
	if forget {
		return Encode(&ReplicaRemovalRequest{ID: id, Forget: true})
	}
	return Encode(&ReplicaRemovalRequest{ID: id, Incarnation: incarnation, Certs: certs, TimeMs: nowMs})
}

// RecordedCerts implements cluster.RemovalLedger: the certificates
// recorded for replica id (ReplicaCertificateType).
func (f *FSM) RecordedCerts(id string) []state.ReplicaCert {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.store.ReplicaCerts[id]
}

// CertificateEntry implements cluster.RemovalLedger: the
// ReplicaCertificateType entry that records certificate c of replica id.
func (f *FSM) CertificateEntry(id string, c state.ReplicaCert) ([]byte, error) {
	return Encode(&ReplicaCertificateRequest{ID: id, Cert: c})
}

// RevokedCert implements cluster.RemovalLedger: the revocation of the
// certificate serial, read without the lock (every handshake and call
// asks).
func (f *FSM) RevokedCert(serial string) (state.RevokedCert, bool) {
	m := f.revoked.Load()
	if m == nil {
		return state.RevokedCert{}, false
	}
	r, ok := (*m)[serial]
	return r, ok
}

// copyRevokedLocked makes the lock-free copy of the store's revoked
// certificates.
func (f *FSM) copyRevokedLocked() {
	if len(f.store.Revoked) == 0 {
		f.revoked.Store(nil)
		return
	}
	m := maps.Clone(f.store.Revoked)
	f.revoked.Store(&m)
}
