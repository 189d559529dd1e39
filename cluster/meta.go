package cluster

import "github.com/grapnel-io/grapnel/cluster/gossipmeta"

// RoleServer is the gossip role of a grapnel-server replica. Other roles
// (agents that join the pool to learn the leader) never enter Raft.
const RoleServer = gossipmeta.RoleServer

// ErrBadMetadata is wrapped by every gossip metadata decoding error.
var ErrBadMetadata = gossipmeta.ErrBadMetadata

// memberMeta is what a replica announces in its memberlist metadata; the
// wire format lives in gossipmeta, which agents read too.
type memberMeta gossipmeta.Meta

// encode returns the wire form, or an error when it would not fit in
// memberlist's metadata limit.
func (m memberMeta) encode() ([]byte, error) { return gossipmeta.Meta(m).Encode() }

// decodeMeta parses metadata; errors name the field and wrap
// ErrBadMetadata.
func decodeMeta(b []byte) (memberMeta, error) {
	m, err := gossipmeta.Decode(b)
	return memberMeta(m), err
}
