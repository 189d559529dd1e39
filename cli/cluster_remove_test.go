package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// removeAnswers is a ClusterClient whose RemoveReplica gives the answers
// in turn (a nil error answers the response); other calls are not used.
type removeAnswers struct {
	grapnelpb.ClusterClient
	errs  []error
	resps []*grapnelpb.RemoveReplicaResponse
	calls int
}

func (f *removeAnswers) RemoveReplica(_ context.Context, in *grapnelpb.RemoveReplicaRequest, _ ...grpc.CallOption) (*grapnelpb.RemoveReplicaResponse, error) {
	i := min(f.calls, len(f.errs)-1)
	f.calls++
	if f.errs[i] != nil {
		return nil, rpc.ToStatus(f.errs[i])
	}
	return f.resps[i], nil
}

// Issue 17 point 6: `grapnel cluster remove` that meets a leadership
// change asks again (removal is idempotent) and reports what the retry
// found; refusals that a retry would not change are not retried.
func TestRemove_RetriesWhileTheOutcomeIsUnknown(t *testing.T) {
	unknown := fmt.Errorf("%w: leadership was lost while removing %q", errs.ErrOutcomeUnknown, "r2")
	quorum := fmt.Errorf("%w: after removing %q only 0 of 2 voters would be alive", errs.ErrQuorum, "r2")
	ok := &grapnelpb.RemoveReplicaResponse{}
	gone := &grapnelpb.RemoveReplicaResponse{AlreadyRemoved: true}
	tests := []struct {
		name      string
		errs      []error
		resps     []*grapnelpb.RemoveReplicaResponse
		wantCalls int
		wantErr   error
		wantSaid  string
	}{
		{"outcome unknown, the retry finds it removed", []error{unknown, nil}, []*grapnelpb.RemoveReplicaResponse{nil, gone}, 2, nil, "already removed"},
		{"no leader, then removed", []error{errs.ErrNoLeader, errs.ErrNotLeader, nil}, []*grapnelpb.RemoveReplicaResponse{nil, nil, ok}, 3, nil, "removed replica r2"},
		{"a refusal is not retried", []error{quorum}, []*grapnelpb.RemoveReplicaResponse{nil}, 1, errs.ErrQuorum, ""},
		{"bounded", []error{unknown}, []*grapnelpb.RemoveReplicaResponse{nil}, removeAttempts, errs.ErrOutcomeUnknown, "attempt 2 of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &removeAnswers{errs: tt.errs, resps: tt.resps}
			var out, said bytes.Buffer
			// The pauses pass on a fake clock, as soon as each is set.
			fake := clock.NewFake(time.Unix(0, 0))
			done := make(chan struct{})
			go func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					if fake.Pending() > 0 {
						fake.Advance(2 * time.Second)
					}
					runtime.Gosched()
				}
			}()
			err := (&Cluster{Client: f, Out: &out, Err: &said, Clock: fake}).Remove(context.Background(), "r2")
			close(done)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(rpc.FromStatus(err), tt.wantErr) {
				t.Fatalf("Remove: %v, want %v", err, tt.wantErr)
			}
			if f.calls != tt.wantCalls {
				t.Fatalf("%d calls, want %d", f.calls, tt.wantCalls)
			}
			if !strings.Contains(said.String(), tt.wantSaid) {
				t.Fatalf("said %q, want it to contain %q", said.String(), tt.wantSaid)
			}
		})
	}
}
