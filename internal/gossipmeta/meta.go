package gossipmeta

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hashicorp/memberlist"
)

// Member roles. Only servers enter Raft; the replicas ignore every other
// role, and agents join the pool only to listen.
const (
	// RoleServer is a grapnel-server replica.
	RoleServer = "server"
	// RoleAgent is a grapnel-agent that joined to hear of the replicas
	// and of the leader they see.
	RoleAgent = "agent"
)

// ErrBadMetadata is wrapped by every decoding error.
var ErrBadMetadata = errors.New("invalid gossip metadata")

// Meta is what a member announces in its memberlist metadata.
type Meta struct {
	Role        string
	RaftAddress string
	GRPCAddress string
	Version     string
	// Expect is the replica's --bootstrap-expect (0: none).
	Expect int
	// LeaderSeen is the leader id this member currently sees.
	LeaderSeen string
	// HasState says the replica's Raft has a log, a snapshot or a known
	// leader: bootstrap-expect never forms a cluster next to such a peer.
	HasState bool
	// Leaving says the member is leaving gracefully; its death that
	// follows is a leave.
	Leaving bool
	// AgentGossipAddress is where a replica serves the agents' gossip
	// pool, if it does; replicas join each other's so the agents see one
	// pool.
	AgentGossipAddress string
	// Incarnation tells one run of a replica from the next under the same
	// id (its start time in nanoseconds): the leader refuses to re-add
	// the run an operator removed, never a later one (0: not announced).
	Incarnation uint64
	// UIAddress is the replica's dashboard address (--ui-address), empty
	// when it serves none; a dashboard page moves to another replica's
	// with it when its own replica goes away.
	UIAddress string
	// ClusterVersion is the newest cluster version the replica's release
	// supports (state.MaxClusterVersion); 0 for a release that knows
	// none, which the leader counts as the baseline.
	ClusterVersion uint32
	// StorageFailed, when set, says the replica's storage failed a write
	// and why, in a few words (at most MaxStorageFailedLen bytes): it no
	// longer stores entries or votes until it has restarted on working
	// storage. Advisory, like all metadata: a release that does not know
	// the tag skips it.
	StorageFailed string
	// VoteHold, when set, says the replica lost Raft entries (a corrupt
	// entry cut out, or new flash) and holds its vote until it has caught
	// up, in a few words (at most MaxVoteHoldLen bytes). Advisory.
	VoteHold string
}

// MaxVoteHoldLen bounds Meta.VoteHold.
const MaxVoteHoldLen = 96

// MaxStorageFailedLen bounds Meta.StorageFailed, so that the metadata of
// a replica with long addresses still fits memberlist's limit.
const MaxStorageFailedLen = 160

// The encoding is a version byte, then tag, uvarint length, value per
// field. Tags are never reused; a decoder skips tags it does not know, so
// newer members may add fields without breaking older ones.
const version = 1

const (
	tagRole        = 1
	tagRaft        = 2
	tagGRPC        = 3
	tagVersion     = 4
	tagExpect      = 5
	tagLeader      = 6
	tagHasState    = 7
	tagLeaving     = 8
	tagAgentGossip = 9
	// tagIncarnation is issue 17 point 6 (replace never sticks).
	tagIncarnation = 10
	// tagUI is issue 18 (the dashboard's address).
	tagUI = 11
	// tagClusterVersion is issue 28 (the newest cluster version the
	// replica's release supports).
	tagClusterVersion = 12
	// tagStorageFailed is issue 29 point 3 (failed storage).
	tagStorageFailed = 13
	// tagVoteHold is issue 29 point 3 (corrupted data, replaced flash).
	tagVoteHold = 14
)

var fieldNames = map[byte]string{
	tagRole: "role", tagRaft: "raft_address", tagGRPC: "grpc_address", tagVersion: "version",
	tagExpect: "bootstrap_expect", tagLeader: "leader", tagHasState: "has_state", tagLeaving: "leaving",
	tagAgentGossip:    "agent_gossip_address",
	tagIncarnation:    "incarnation",
	tagUI:             "ui_address",
	tagClusterVersion: "cluster_version",
	tagStorageFailed:  "storage_failed",
	tagVoteHold:       "vote_hold",
}

// Encode returns the wire form, or an error when it would not fit in
// memberlist's metadata limit.
func (m Meta) Encode() ([]byte, error) {
	buf := []byte{version}
	str := func(tag byte, v string) {
		buf = append(buf, tag)
		buf = binary.AppendUvarint(buf, uint64(len(v)))
		buf = append(buf, v...)
	}
	str(tagRole, m.Role)
	str(tagRaft, m.RaftAddress)
	str(tagGRPC, m.GRPCAddress)
	str(tagVersion, m.Version)
	num := binary.AppendUvarint(nil, uint64(max(m.Expect, 0)))
	buf = append(buf, tagExpect, byte(len(num)))
	buf = append(buf, num...)
	str(tagLeader, m.LeaderSeen)
	buf = append(buf, tagHasState, 1, boolByte(m.HasState))
	if m.Leaving {
		buf = append(buf, tagLeaving, 1, 1)
	}
	if m.AgentGossipAddress != "" {
		str(tagAgentGossip, m.AgentGossipAddress)
	}
	if m.Incarnation != 0 {
		num := binary.AppendUvarint(nil, m.Incarnation)
		buf = append(buf, tagIncarnation, byte(len(num)))
		buf = append(buf, num...)
	}
	if m.UIAddress != "" {
		str(tagUI, m.UIAddress)
	}
	if m.ClusterVersion != 0 {
		num := binary.AppendUvarint(nil, uint64(m.ClusterVersion))
		buf = append(buf, tagClusterVersion, byte(len(num)))
		buf = append(buf, num...)
	}
	if m.StorageFailed != "" {
		if len(m.StorageFailed) > MaxStorageFailedLen {
			return nil, fmt.Errorf("gossip metadata: storage_failed is %d bytes, over %d", len(m.StorageFailed), MaxStorageFailedLen)
		}
		str(tagStorageFailed, m.StorageFailed)
	}
	if m.VoteHold != "" {
		if len(m.VoteHold) > MaxVoteHoldLen {
			return nil, fmt.Errorf("gossip metadata: vote_hold is %d bytes, over %d", len(m.VoteHold), MaxVoteHoldLen)
		}
		str(tagVoteHold, m.VoteHold)
	}
	if len(buf) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("gossip metadata is %d bytes, over memberlist's %d-byte limit: "+
			"shorten raft_address (%d), grpc_address (%d) or version (%d)",
			len(buf), memberlist.MetaMaxSize, len(m.RaftAddress), len(m.GRPCAddress), len(m.Version))
	}
	return buf, nil
}

// Decode parses metadata; errors name the field and wrap ErrBadMetadata.
func Decode(b []byte) (Meta, error) {
	var m Meta
	if len(b) == 0 {
		return m, fmt.Errorf("%w: field version: empty metadata", ErrBadMetadata)
	}
	if b[0] == 0 {
		return m, fmt.Errorf("%w: field version: 0 is not a valid version", ErrBadMetadata)
	}
	seen := map[byte]bool{}
	for rest := b[1:]; len(rest) > 0; {
		tag := rest[0]
		name := fieldNames[tag]
		if name == "" {
			name = fmt.Sprintf("tag %d", tag)
		}
		n, k := binary.Uvarint(rest[1:])
		if k <= 0 {
			return m, fmt.Errorf("%w: field %s: bad length", ErrBadMetadata, name)
		}
		rest = rest[1+k:]
		if n > uint64(len(rest)) {
			return m, fmt.Errorf("%w: field %s: truncated (%d of %d bytes)", ErrBadMetadata, name, len(rest), n)
		}
		val := rest[:n]
		rest = rest[n:]
		seen[tag] = true
		if err := m.set(tag, name, val); err != nil {
			return m, err
		}
	}
	for _, tag := range []byte{tagRole, tagRaft} {
		if !seen[tag] {
			return m, fmt.Errorf("%w: field %s: missing", ErrBadMetadata, fieldNames[tag])
		}
	}
	if m.Role == RoleServer && m.RaftAddress == "" {
		return m, fmt.Errorf("%w: field raft_address: empty for a server", ErrBadMetadata)
	}
	return m, nil
}

// set stores one field's value; unknown tags are skipped.
func (m *Meta) set(tag byte, name string, val []byte) error {
	switch tag {
	case tagRole:
		m.Role = string(val)
	case tagRaft:
		m.RaftAddress = string(val)
	case tagGRPC:
		m.GRPCAddress = string(val)
	case tagVersion:
		m.Version = string(val)
	case tagLeader:
		m.LeaderSeen = string(val)
	case tagAgentGossip:
		m.AgentGossipAddress = string(val)
	case tagUI:
		m.UIAddress = string(val)
	case tagStorageFailed:
		m.StorageFailed = string(val)
	case tagVoteHold:
		m.VoteHold = string(val)
	case tagExpect:
		v, k := binary.Uvarint(val)
		if k <= 0 || k != len(val) || v > 1<<16 {
			return fmt.Errorf("%w: field %s: not a small unsigned number", ErrBadMetadata, name)
		}
		m.Expect = int(v)
	case tagIncarnation:
		v, k := binary.Uvarint(val)
		if k <= 0 || k != len(val) {
			return fmt.Errorf("%w: field %s: not an unsigned number", ErrBadMetadata, name)
		}
		m.Incarnation = v
	case tagClusterVersion:
		v, k := binary.Uvarint(val)
		if k <= 0 || k != len(val) || v > 1<<32-1 {
			return fmt.Errorf("%w: field %s: not a cluster version", ErrBadMetadata, name)
		}
		m.ClusterVersion = uint32(v)
	case tagHasState, tagLeaving:
		if len(val) != 1 || val[0] > 1 {
			return fmt.Errorf("%w: field %s: not a boolean", ErrBadMetadata, name)
		}
		if tag == tagHasState {
			m.HasState = val[0] == 1
		} else {
			m.Leaving = val[0] == 1
		}
	}
	return nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
