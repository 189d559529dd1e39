package errs

import (
	"errors"
	"fmt"
)

// ErrNotLeader is returned by a replica that is not the Raft leader for
// work only the leader does, and by a leader that lost leadership while
// the work was under way (cluster.FoldRaftError folds Raft's errors into
// it). A replica that knows the leader answers a *NotLeaderError, so that
// the caller can go there directly.
var ErrNotLeader = errors.New("not the leader")

// ErrNoLeader means the cluster has no leader right now (an election is
// running or quorum is lost); retrying later may succeed.
var ErrNoLeader = errors.New("no leader")

// ErrUnsupportedProtocol means the peer speaks an Ankaios protocol version
// whose major differs from rpc.ProtocolVersion. Clients stop instead of
// reconnecting when they see it.
var ErrUnsupportedProtocol = errors.New("unsupported protocol version")

// ErrBadFirstMessage means a stream did not open with the hello message its
// service expects (AgentHello or CommanderHello).
var ErrBadFirstMessage = errors.New("bad first message")

// ErrUnauthenticated means the peer's certificate does not allow what it
// asked for, e.g. an agent name missing from the certificate's SAN.
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrPermissionDenied means the peer is who its certificate says, but its
// role does not hold the right the call needs (rpc/authz); nothing was
// changed.
var ErrPermissionDenied = errors.New("permission denied")

// ErrShuttingDown means the replica is stopping; the caller should use
// another one.
var ErrShuttingDown = errors.New("shutting down")

// ErrLeaderChanged ends a stream that a follower proxied to the leader
// when leadership moves: the client reconnects, as after a failover.
var ErrLeaderChanged = errors.New("the leader changed")

// ErrUnknownReplica names a replica that is not in the cluster's Raft
// configuration.
var ErrUnknownReplica = errors.New("no such replica in the cluster")

// ErrNoVoteHold refuses a repair of a replica that holds no vote: it
// lost no entries, or caught up already (cluster.Node.ReleaseVoteHold).
var ErrNoVoteHold = errors.New("the replica holds no vote")

// ErrOtherReplica refuses a call that only the replica it names can
// answer, sent to another one.
var ErrOtherReplica = errors.New("the call names another replica")

// ErrOutcomeUnknown means the leader lost leadership after proposing a
// change and before it committed: the change may or may not take effect.
// Only an idempotent call may be retried blindly (cluster remove is).
var ErrOutcomeUnknown = errors.New("outcome unknown; retry")

// ErrQuorum refuses an operator action that would leave the cluster
// without a quorum of voters (or a leader that would remove itself).
var ErrQuorum = errors.New("the action would lose the quorum")

// ErrAvailability refuses an agent mode that would leave a placed
// workload with fewer instances than it has, as no other eligible agent
// has room for them (docs/placement.md, MAMID's rule); nothing changed.
var ErrAvailability = errors.New("the change would lower a workload's instances")

// ErrBadSnapshot refuses a snapshot restore whose upload is not a
// complete, undamaged Grapnel snapshot; nothing was changed.
var ErrBadSnapshot = errors.New("not a valid Grapnel snapshot")

// ErrSnapshotTooLarge refuses a snapshot upload over the replica's size
// cap; nothing was changed.
var ErrSnapshotTooLarge = errors.New("snapshot too large")

// ErrMessageTooLarge means a message would exceed MaxMessageBytes, which
// gRPC would refuse on either side; the server answers with it instead.
var ErrMessageTooLarge = errors.New("message too large")

// ErrStateChanged refuses an update made on condition that the desired
// state is still at the sequence number its plan was made at, when it is
// not; nothing was changed.
var ErrStateChanged = errors.New("the desired state changed since the plan")

// ErrTooManyStreams refuses an Ankaios stream over a replica's caps: too
// many streams of the caller's identity, or of all callers together, are
// open (issue 27). The caller backs off and retries; nothing was changed.
var ErrTooManyStreams = errors.New("too many streams")

// ErrBusy refuses work the leader has no room for now (more dry-runs
// than it plans at once and lets wait); nothing was done, and the same
// call may succeed shortly.
var ErrBusy = errors.New("busy")

// ErrAgentNotConnected refuses a request for an agent that has no stream
// open to the leader.
var ErrAgentNotConnected = errors.New("agent not connected")

// ErrReleaseBehind refuses what needs a cluster version that a replica's
// release does not support yet (docs/upgrade.md): the message names the
// replicas still on the older release.
var ErrReleaseBehind = errors.New("a replica runs an older release")

// NotLeaderError is ErrNotLeader with the leader this replica sees, so a
// client can redirect without asking around. With a LeaderAddress it maps
// to FailedPrecondition ("not here, go there"); without one to
// Unavailable, as the bare ErrNotLeader ("try again later"). Only
// leader-aware clients get it: an unmodified Ankaios client stops for good
// on FailedPrecondition, so a follower proxies those instead.
type NotLeaderError struct {
	LeaderID      string
	LeaderAddress string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderAddress == "" {
		return ErrNotLeader.Error()
	}
	return fmt.Sprintf("%s; the leader is %s at %s", ErrNotLeader, e.LeaderID, e.LeaderAddress)
}

// Is makes errors.Is(err, ErrNotLeader) hold.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// WithText returns an error that is kind for errors.Is but reads exactly
// text, for messages that must keep the upstream wording.
func WithText(kind error, text string) error { return &textError{kind: kind, text: text} }

type textError struct {
	kind error
	text string
}

func (e *textError) Error() string { return e.text }
func (e *textError) Unwrap() error { return e.kind }

// ErrUnknownAgent refuses an operator's call about an agent the cluster
// knows nothing of (state.Store.KnowsAgent): most likely a typo.
var ErrUnknownAgent = errors.New("no such agent")

// ErrNoSuchTransaction is a history sequence number that was never
// recorded or has been pruned (docs/history.md).
var ErrNoSuchTransaction = errors.New("no such transaction in the history")

// ErrLocked refuses a change to a workload or config item that another
// owner holds an intent lock on (docs/locks.md), as HTTP's 423 Locked
// does; nothing was changed.
var ErrLocked = errors.New("locked")

// ErrRevisionConflict refuses an update made at an expected revision
// when what it addresses changed after that revision (docs/locks.md);
// nothing was changed.
var ErrRevisionConflict = errors.New("revision conflict")

// Classify returns an error that reads as err and is both kind and err
// for errors.Is and errors.As: it gives an error of a pure package (which
// may not import this one) its sentinel.
func Classify(kind, err error) error {
	if err == nil {
		return nil
	}
	return &classified{kind: kind, err: err}
}

type classified struct{ kind, err error }

func (e *classified) Error() string   { return e.err.Error() }
func (e *classified) Unwrap() []error { return []error{e.kind, e.err} }
