package fsm

import (
	"errors"
	"fmt"
)

// The FSM's sentinel errors. Callers test them with errors.Is; the server
// maps them to answers in one place.
var (
	// ErrOutOfSequence is the response of an UpdateDesiredStatePackedType
	// entry that does not build on the stored desired state.
	ErrOutOfSequence = errors.New("the update does not build on the stored desired state")

	// ErrBadCommand is returned by Execute for a body that is not a
	// command this version applies, and by Encode for a body that cannot
	// be encoded.
	ErrBadCommand = errors.New("bad command")

	// ErrUnknownType is a command type this version does not know, or no
	// longer applies (a retired type), and may not skip.
	ErrUnknownType = errors.New("unknown command type")

	// ErrUndecodable is a command whose body does not decode into its
	// type's request.
	ErrUndecodable = errors.New("command does not decode")

	// ErrHalted is what every Apply returns once the FSM met a committed
	// entry it cannot apply (see HaltError).
	ErrHalted = errors.New("the state machine stopped applying")

	// ErrNewerFormat is a cluster version newer than this build reads
	// (state.MaxClusterVersion): an entry that raises it, or a snapshot
	// or data directory written at it.
	ErrNewerFormat = errors.New("written in a newer format than this build reads")

	// ErrBadSnapshot is a snapshot that is not Grapnel's, is damaged, or
	// comes from a version this one cannot read (see ReadSnapshot).
	ErrBadSnapshot = errors.New("not a valid Grapnel snapshot")
)

// HaltError is why the FSM stopped: a committed entry this replica's code
// cannot apply. The leader only proposes commands that its own code
// decodes and applies, so such an entry comes from a leader running a
// newer version (or from a damaged log), never from user input: the
// replica must be upgraded. It applies nothing after the entry, so that
// it never holds a state no other replica has.
type HaltError struct {
	Index uint64
	Type  MessageType
	Err   error
}

func (e *HaltError) Error() string {
	return fmt.Sprintf("entry %d (%s) cannot be applied by this version of grapnel-server: %v; "+
		"upgrade this replica to the version the leader runs: it applies nothing after this entry until then",
		e.Index, e.Type, e.Err)
}

// Unwrap makes errors.Is(err, ErrHalted) hold, and errors.Is the cause.
func (e *HaltError) Unwrap() []error { return []error{ErrHalted, e.Err} }
