package cluster

import (
	"errors"
	"testing"

	"github.com/grapnel-io/grapnel/cluster/gossipmeta"
)

// The wire format is tested in gossipmeta; these tests check that the
// replica's view of it is the same format.

func TestMeta_RoundTrip(t *testing.T) {
	tests := []memberMeta{
		{Role: RoleServer, RaftAddress: "10.0.0.1:25561", GRPCAddress: "10.0.0.1:25551", Version: "1.2.3",
			Expect: 3, LeaderSeen: "ecu-a", HasState: true, Leaving: true},
		{Role: gossipmeta.RoleAgent, RaftAddress: ""},
	}
	for _, want := range tests {
		b, err := want.encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeMeta(b)
		if err != nil {
			t.Fatalf("decode %+v: %v", want, err)
		}
		if got != want {
			t.Fatalf("round trip: got %+v, want %+v", got, want)
		}
		// An agent encodes with gossipmeta directly; a replica reads it.
		direct, err := gossipmeta.Meta(want).Encode()
		if err != nil || string(direct) != string(b) {
			t.Fatalf("gossipmeta encodes %v, the replica %v (%v)", direct, b, err)
		}
	}
}

func TestMeta_DecodeErrorWrapsErrBadMetadata(t *testing.T) {
	if _, err := decodeMeta([]byte{0}); !errors.Is(err, ErrBadMetadata) {
		t.Fatalf("err = %v, want ErrBadMetadata", err)
	}
}
