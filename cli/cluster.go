package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// ErrBadArgument is a command-line argument the verb cannot use.
var ErrBadArgument = errors.New("bad argument")

// Cluster runs the operator verbs against the Cluster service of the
// leader (or, for members, of any replica).
type Cluster struct {
	Client grapnelpb.ClusterClient
	Out    io.Writer
	Err    io.Writer
	Quiet  bool
	// Clock paces the retries of Remove; nil is the system clock.
	Clock clock.Clock
}

// memberColumns are the columns of `cluster members`. RELEASE is the
// release the member's gossip metadata announces (empty while gossip does
// not know it), as `get agents` shows the agents'.
var memberColumns = []string{"ID", "ROLE", "VOTER", "HEALTHY", "LAST CONTACT", "GRPC", "RAFT", "GOSSIP", "RELEASE"}

// Members prints the replica set as a table, JSON or YAML.
func (c *Cluster) Members(ctx context.Context, output string) error {
	st, err := c.Client.Status(ctx, &grapnelpb.StatusRequest{})
	if err != nil {
		return err
	}
	switch output {
	case "table", "":
		t := Table{Headers: memberColumns}
		for _, m := range st.GetMembers() {
			role := m.GetRole()
			if m.GetLeader() {
				role = "leader"
			}
			t.Rows = append(t.Rows, []string{
				m.GetId(), role, strconv.FormatBool(m.GetVoter()), strconv.FormatBool(m.GetHealthy()),
				lastContactText(m.GetLastContactMs()), m.GetGrpcAddress(), m.GetRaftAddress(),
				m.GetGossipAddress(), m.GetVersion(),
			})
		}
		_, err := io.WriteString(c.Out, t.Render(0, FitNone, -1)+"\n")
		if err == nil && !c.Quiet {
			leader := st.GetLeaderId()
			if leader == "" {
				leader = "none known"
			}
			_, err = fmt.Fprintf(c.Out, "leader: %s, term %d, commit index %d (as seen by %s)\n",
				leader, st.GetTerm(), st.GetCommitIndex(), st.GetReplicaId())
			if err == nil && len(st.GetAttachedAgents()) > 0 {
				_, err = fmt.Fprintf(c.Out, "agents attached to %s: %s\n", st.GetReplicaId(), strings.Join(st.GetAttachedAgents(), ", "))
			}
		}
		return err
	case "json", "yaml":
		return WriteTree(c.Out, output, statusTree(st), nil)
	}
	return fmt.Errorf("%w: -o %q: use table, json or yaml", ErrBadArgument, output)
}

func lastContactText(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

func statusTree(st *grapnelpb.StatusResponse) state.Tree {
	members := []any{}
	for _, m := range st.GetMembers() {
		members = append(members, map[string]any{
			"id": m.GetId(), "role": m.GetRole(), "leader": m.GetLeader(), "voter": m.GetVoter(),
			"healthy": m.GetHealthy(), "lastContactMs": m.GetLastContactMs(),
			"grpcAddress": m.GetGrpcAddress(), "raftAddress": m.GetRaftAddress(),
			"gossipAddress": m.GetGossipAddress(), "gossipStatus": m.GetGossipStatus(),
			// "version" is the same text, kept for scripts written
			// before the release was called so.
			"release": m.GetVersion(), "version": m.GetVersion(), "leaderSeen": m.GetLeaderSeen(),
		})
	}
	agents := []any{}
	for _, a := range st.GetAttachedAgents() {
		agents = append(agents, a)
	}
	return state.Tree{
		"replicaId": st.GetReplicaId(), "leaderId": st.GetLeaderId(), "attachedAgents": agents,
		"leaderGrpcAddress": st.GetLeaderGrpcAddress(), "term": st.GetTerm(),
		"commitIndex": st.GetCommitIndex(), "appliedIndex": st.GetAppliedIndex(), "members": members,
	}
}

// removeAttempts bounds Remove's retries; the context bounds them too.
const removeAttempts = 10

// Remove takes a replica out of the cluster. Removal is idempotent, so
// when leadership changes under it (the outcome is unknown) or no leader
// answers, it asks again, on the next leader, with a growing pause, up to
// removeAttempts times: the retry either removes the replica or finds it
// already removed.
func (c *Cluster) Remove(ctx context.Context, id string) error {
	if !state.ValidName(id) {
		return fmt.Errorf("%w: replica id %q uses only [a-zA-Z0-9_-]", ErrBadArgument, id)
	}
	pause := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		resp, err := c.Client.RemoveReplica(ctx, &grapnelpb.RemoveReplicaRequest{Id: id})
		if err == nil {
			if resp.GetAlreadyRemoved() {
				c.info("replica %s is not in the cluster's configuration (already removed)", id)
			} else {
				c.info("removed replica %s from the cluster", id)
			}
			return nil
		}
		if !removeRetryable(err) || attempt == removeAttempts {
			return err
		}
		c.info("removing %s: %v; asking again in %v (attempt %d of %d)", id, rpc.FromStatus(err), pause, attempt+1, removeAttempts)
		t := clock.NewTimer(c.clock(), pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("removing %s: %w (last answer: %v)", id, ctx.Err(), err)
		case <-t.C:
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// removeRetryable: the leader changed or is unknown, or the removal's
// outcome is unknown; asking again is safe because removal is idempotent.
func removeRetryable(err error) bool {
	err = rpc.FromStatus(err)
	if errors.Is(err, errs.ErrOutcomeUnknown) || errors.Is(err, errs.ErrNotLeader) ||
		errors.Is(err, errs.ErrNoLeader) || errors.Is(err, errs.ErrLeaderChanged) {
		return true
	}
	return status.Code(err) == codes.Unavailable
}

func (c *Cluster) clock() clock.Clock {
	if c.Clock != nil {
		return c.Clock
	}
	return clock.Real()
}

// Add approves a replica: the leader adds id at raftAddress as a
// non-voter, and autopilot promotes it once healthy.
func (c *Cluster) Add(ctx context.Context, id, raftAddress string) error {
	if !state.ValidName(id) {
		return fmt.Errorf("%w: replica id %q uses only [a-zA-Z0-9_-]", ErrBadArgument, id)
	}
	if _, _, err := net.SplitHostPort(raftAddress); err != nil {
		return fmt.Errorf("%w: Raft address %q is not host:port (the replica's --raft-address)", ErrBadArgument, raftAddress)
	}
	if _, err := c.Client.AddReplica(ctx, &grapnelpb.AddReplicaRequest{Id: id, RaftAddress: raftAddress}); err != nil {
		return err
	}
	c.info("added replica %s (%s) as non-voter; it becomes a voter once healthy", id, raftAddress)
	return nil
}

// TransferLeadership moves leadership to id, or to any up-to-date voter.
func (c *Cluster) TransferLeadership(ctx context.Context, to string) error {
	resp, err := c.Client.TransferLeadership(ctx, &grapnelpb.TransferLeadershipRequest{To: to})
	if err != nil {
		return err
	}
	c.info("leadership transferred to %s", resp.GetNewLeaderId())
	return nil
}

// SnapshotSave writes a snapshot of the replicated state to file, through
// a temporary file so that a failed save never leaves a partial one, and
// durably: a power cut after it said "saved" keeps the file.
func (c *Cluster) SnapshotSave(ctx context.Context, file string) error {
	stream, err := c.Client.SnapshotSave(ctx, &grapnelpb.SnapshotSaveRequest{})
	if err != nil {
		return err
	}
	n, err := saveSnapshot(durable.OS, file, func() ([]byte, error) {
		chunk, err := stream.Recv()
		return chunk.GetData(), err
	})
	if err != nil {
		return err
	}
	c.info("saved snapshot to %s (%d bytes)", file, n)
	return nil
}

// saveSnapshot replaces file with the chunks recv returns until io.EOF,
// and returns how many bytes it wrote. Nothing received is an error,
// and leaves file as it was.
func saveSnapshot(files durable.Files, file string, recv func() ([]byte, error)) (int64, error) {
	var n int64
	err := files.Replace(file, 0o600, func(w io.Writer) error {
		for {
			data, err := recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			m, err := w.Write(data)
			n += int64(m)
			if err != nil {
				return err
			}
		}
		if n == 0 {
			return errors.New("the server sent an empty snapshot")
		}
		return nil
	})
	return n, err
}

// snapshotChunk is the size of one streamed piece of a snapshot.
const snapshotChunk = 64 << 10

// SnapshotRestore replaces the cluster's state with the snapshot in file.
func (c *Cluster) SnapshotRestore(ctx context.Context, file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	stream, err := c.Client.SnapshotRestore(ctx)
	if err != nil {
		return err
	}
	buf := make([]byte, snapshotChunk)
	for {
		n, rerr := f.Read(buf)
		if n > 0 {
			if err := stream.Send(&grapnelpb.SnapshotChunk{Data: append([]byte(nil), buf[:n]...)}); err != nil {
				_, cerr := stream.CloseAndRecv()
				if cerr != nil {
					return cerr
				}
				return err
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return err
	}
	c.info("restored snapshot %s (cluster index %d)", file, resp.GetIndex())
	return nil
}

func (c *Cluster) info(format string, args ...any) {
	if c.Quiet || c.Err == nil {
		return
	}
	fmt.Fprintf(c.Err, format+"\n", args...)
}
