package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// errNoLocksService explains a lock command without a connection to
// Grapnel's Locks service.
var errNoLocksService = errors.New("locks need Grapnel's locks service, which this connection does not reach")

// LockObjects turns the names of `grapnel lock` and `unlock` into object
// names: workload/NAME and config/KEY pass as they are; a bare NAME is
// the workload NAME.
func LockObjects(names []string) ([]string, error) {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if !strings.Contains(n, "/") {
			n = state.WorkloadObject(n)
		}
		if err := state.ParseObject(n); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadArgument, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// Lock takes (or renews) intent locks on the objects for ttl and prints
// them with their expiry.
func (s *Session) Lock(ctx context.Context, names []string, ttl time.Duration, reason string) error {
	if s.Locks == nil {
		return errNoLocksService
	}
	objs, err := LockObjects(names)
	if err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: --ttl: a lock needs a positive time to live, e.g. --ttl 10m", ErrBadArgument)
	}
	resp, err := s.Locks.Lock(ctx, &grapnelpb.LockRequest{Objects: objs, TtlMs: uint64(ttl.Milliseconds()), Reason: reason})
	if err != nil {
		return err
	}
	if !s.Quiet {
		for _, l := range resp.GetLocks() {
			fmt.Fprintf(s.Out, "locked %s by %s until %s\n", l.GetObject(), l.GetOwner(), lockTime(l.GetExpiresMs()))
		}
	}
	return nil
}

// Unlock releases the caller's locks on the objects; with force anyone's.
func (s *Session) Unlock(ctx context.Context, names []string, force bool) error {
	if s.Locks == nil {
		return errNoLocksService
	}
	objs, err := LockObjects(names)
	if err != nil {
		return err
	}
	if _, err := s.Locks.Unlock(ctx, &grapnelpb.UnlockRequest{Objects: objs, Force: force}); err != nil {
		return err
	}
	if !s.Quiet {
		fmt.Fprintf(s.Out, "unlocked %s\n", strings.Join(objs, ", "))
	}
	return nil
}

// lockHeaders are the columns of `get locks`.
var lockHeaders = []string{"OBJECT", "OWNER", "EXPIRES", "LEFT", "REASON"}

// LockTable lays out the locks, with the time each has left by the
// leader's clock when it answered.
func LockTable(resp *grapnelpb.ListLocksResponse) Table {
	t := Table{Headers: lockHeaders}
	for _, l := range resp.GetLocks() {
		left := time.Duration(l.GetExpiresMs()-resp.GetNowMs()) * time.Millisecond
		t.Rows = append(t.Rows, []string{l.GetObject(), l.GetOwner(), lockTime(l.GetExpiresMs()), left.Round(time.Second).String(), l.GetReason()})
	}
	return t
}

// GetLocks prints the locks in force as a table, YAML or JSON (a list of
// object, owner, reason, since and expires, RFC 3339 UTC).
func (s *Session) GetLocks(ctx context.Context, f string) error {
	if s.Locks == nil {
		return errNoLocksService
	}
	resp, err := s.Locks.List(ctx, &grapnelpb.ListLocksRequest{})
	if err != nil {
		return err
	}
	if f == PlanTable {
		fmt.Fprintln(s.Out, LockTable(resp).Render(s.Width, FitTruncate, len(lockHeaders)-1))
		return nil
	}
	list := []any{}
	for _, l := range resp.GetLocks() {
		m := map[string]any{"object": l.GetObject(), "owner": l.GetOwner(), "since": lockTime(l.GetSinceMs()), "expires": lockTime(l.GetExpiresMs())}
		if l.GetReason() != "" {
			m["reason"] = l.GetReason()
		}
		list = append(list, m)
	}
	v := map[string]any{"locks": list}
	order := func([]string) []string { return []string{"locks", "object", "owner", "since", "expires", "reason"} }
	var out string
	if f == PlanJSON {
		out, err = EncodeJSON(v, order, true)
		out += "\n"
	} else {
		out, err = EncodeYAML(v, order)
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(s.Out, out)
	return err
}

// lockTime prints a lock time (the leader's clock, Unix ms) in UTC.
func lockTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }
