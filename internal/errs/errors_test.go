package errs

import (
	"errors"
	"fmt"
	"testing"
)

func TestNotLeaderError(t *testing.T) {
	tests := []struct {
		err  *NotLeaderError
		text string
	}{
		{&NotLeaderError{LeaderID: "n2", LeaderAddress: "10.0.0.2:25551"}, "not the leader; the leader is n2 at 10.0.0.2:25551"},
		{&NotLeaderError{LeaderID: "n2"}, "not the leader"},
	}
	for _, tc := range tests {
		if !errors.Is(fmt.Errorf("apply: %w", tc.err), ErrNotLeader) {
			t.Errorf("%v is not ErrNotLeader", tc.err)
		}
		if tc.err.Error() != tc.text {
			t.Errorf("text = %q, want %q", tc.err.Error(), tc.text)
		}
	}
}

// WithText keeps the sentinel for errors.Is and reads exactly the text.
func TestWithText(t *testing.T) {
	err := WithText(ErrBadFirstMessage, "No AgentHello received.")
	if !errors.Is(err, ErrBadFirstMessage) || err.Error() != "No AgentHello received." {
		t.Fatalf("WithText = %q, is %v", err, errors.Is(err, ErrBadFirstMessage))
	}
}
