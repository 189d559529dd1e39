package gossipmeta

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
)

func TestRoundTrip(t *testing.T) {
	tests := []Meta{
		{Role: RoleServer, RaftAddress: "10.0.0.1:25561", GRPCAddress: "10.0.0.1:25551", Version: "1.2.3",
			Expect: 3, LeaderSeen: "ecu-a", HasState: true, Leaving: true, AgentGossipAddress: "10.0.0.1:25573",
			Incarnation: 1795000000123456789},
		{Role: RoleServer, RaftAddress: "[::1]:1"},
		{Role: RoleServer, RaftAddress: "10.0.0.2:25561", UIAddress: "10.0.0.2:25581"},
		{Role: RoleServer, RaftAddress: "10.0.0.3:25561", ClusterVersion: 1},
		{Role: RoleServer, RaftAddress: "10.0.0.4:25561", StorageFailed: "append log entries wal/1.wal: no space left on device"},
		{Role: RoleAgent, RaftAddress: "", Version: "1.0.0", Leaving: true},
	}
	for _, want := range tests {
		b, err := want.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("decode %+v: %v", want, err)
		}
		if got != want {
			t.Fatalf("round trip: got %+v, want %+v", got, want)
		}
	}
}

// The tag numbers are the wire format replicas of earlier versions read:
// they must never change.
func TestTagNumbersAreStable(t *testing.T) {
	b, err := Meta{Role: "r", RaftAddress: "a", GRPCAddress: "g", Version: "v", Expect: 3, LeaderSeen: "l", HasState: true, Leaving: true, Incarnation: 300, UIAddress: "u", ClusterVersion: 1, StorageFailed: "s"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{1, 1, 1, 'r', 2, 1, 'a', 3, 1, 'g', 4, 1, 'v', 5, 1, 3, 6, 1, 'l', 7, 1, 1, 8, 1, 1, 10, 2, 0xac, 0x02, 11, 1, 'u', 12, 1, 1, 13, 1, 's'}
	if string(b) != string(want) {
		t.Fatalf("encoding changed:\n got %v\nwant %v", b, want)
	}
}

// Newer members may append fields; older ones skip unknown tags.
func TestSkipsUnknownTags(t *testing.T) {
	b, err := Meta{Role: RoleServer, RaftAddress: "a:1", Expect: 5}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, 99, 3, 'x', 'y', 'z')
	b[0] = 7
	got, err := Decode(b)
	if err != nil || got.Expect != 5 || got.RaftAddress != "a:1" {
		t.Fatalf("got %+v, %v", got, err)
	}
}

// Decoding errors wrap ErrBadMetadata and name the field.
func TestDecodeErrorsNameTheField(t *testing.T) {
	good, err := Meta{Role: RoleServer, RaftAddress: "a:1", Version: "v"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		buf   []byte
		field string
	}{
		{"empty", nil, "version"},
		{"version zero", []byte{0}, "version"},
		{"truncated role", []byte{1, tagRole, 10, 's'}, "role"},
		{"bad length", []byte{1, tagRaft, 0x80}, "raft_address"},
		{"missing raft address", []byte{1, tagRole, 6, 's', 'e', 'r', 'v', 'e', 'r'}, "raft_address"},
		{"missing role", []byte{1, tagRaft, 3, 'a', ':', '1'}, "role"},
		{"bad expect", []byte{1, tagRole, 0, tagRaft, 0, tagExpect, 2, 0x80, 0x80}, "bootstrap_expect"},
		{"bad has_state", []byte{1, tagRole, 0, tagRaft, 0, tagHasState, 1, 2}, "has_state"},
		{"bad incarnation", []byte{1, tagRole, 0, tagRaft, 0, tagIncarnation, 2, 0x80, 0x80}, "incarnation"},
		{"bad cluster version", []byte{1, tagRole, 0, tagRaft, 0, tagClusterVersion, 2, 0x80, 0x80}, "cluster_version"},
		{"bad leaving", []byte{1, tagRole, 0, tagRaft, 0, tagLeaving, 2, 1, 1}, "leaving"},
		{"empty raft address of a server", []byte{1, tagRole, 6, 's', 'e', 'r', 'v', 'e', 'r', tagRaft, 0}, "raft_address"},
		{"truncated good", good[:len(good)-1], "has_state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.buf)
			if !errors.Is(err, ErrBadMetadata) {
				t.Fatalf("err = %v, want ErrBadMetadata", err)
			}
			if !strings.Contains(err.Error(), "field "+tt.field) {
				t.Fatalf("err %q does not name field %s", err, tt.field)
			}
		})
	}
}

func TestTooLargeIsRefused(t *testing.T) {
	m := Meta{Role: RoleServer, RaftAddress: "a:1", GRPCAddress: strings.Repeat("h", memberlist.MetaMaxSize)}
	_, err := m.Encode()
	if err == nil || !strings.Contains(err.Error(), "grpc_address") {
		t.Fatalf("err = %v, want a size error naming grpc_address", err)
	}
}

// Requirement (issue 29 point 3): a replica whose storage failed says so
// in its metadata; the reason is bounded so that the metadata of a
// replica with long addresses still fits memberlist's limit, and a longer
// one is refused naming the field.
func TestStorageFailedIsBounded(t *testing.T) {
	long := "[fd00:1234:5678:9abc:def0:1234:5678:9abc]:25561" // the longest numeric address
	m := Meta{Role: RoleServer, RaftAddress: long, GRPCAddress: long, UIAddress: long, AgentGossipAddress: long,
		Version: "0.4.0-rc.1+abcdef", LeaderSeen: strings.Repeat("r", 32), Expect: 5, HasState: true, Incarnation: 1 << 62, ClusterVersion: 1,
		StorageFailed: strings.Repeat("e", MaxStorageFailedLen)}
	b, err := m.Encode()
	if err != nil {
		t.Fatalf("metadata with the longest storage_failed does not fit: %v", err)
	}
	if got, err := Decode(b); err != nil || got != m {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	m.StorageFailed += "e"
	if _, err := m.Encode(); err == nil || !strings.Contains(err.Error(), "storage_failed") {
		t.Fatalf("err = %v, want a size error naming storage_failed", err)
	}
}
