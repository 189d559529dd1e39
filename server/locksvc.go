package server

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc/authz"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// Bounds of a lock request: a lock is for a change in progress, not a
// freeze for good (MaxLockTTL), and a request names a handful of objects.
const (
	MaxLockTTL        = 7 * 24 * time.Hour
	maxLockObjects    = 1000
	maxLockReasonLen  = 256
	maxLockOwnerBytes = 256
)

// locksService answers Grapnel's Locks service (docs/locks.md): intent
// locks on workloads and config items, taken and released by replicated
// commands that the leader times by its clock. Calls run on the leader
// loop, like the Plan service's; a follower forwards them.
type locksService struct {
	grapnelpb.UnimplementedLocksServer
	p *planService
}

// RegisterLocks adds Grapnel's Locks service to a gRPC server, authorized
// as the Plan service is.
func (s *Server) RegisterLocks(g grpc.ServiceRegistrar) {
	grapnelpb.RegisterLocksServer(g, &locksService{p: &planService{s: s}})
}

// declaredOwner is the lock owner a client declares (wire.OwnerKey),
// which counts only without TLS (Server.lockOwner).
func declaredOwner(ctx context.Context) string { return wire.Owner(ctx) }

// lockCall is a Locks service call on the leader loop.
type lockCall struct {
	take, release bool // neither: list
	objects       []string
	ttl           time.Duration
	reason        string
	force         bool
}

// checkObjects validates the objects of a request and drops duplicates.
func checkObjects(objs []string) ([]string, error) {
	if len(objs) == 0 {
		return nil, fmt.Errorf("%w: objects: name at least one, workload/NAME or config/KEY", state.ErrInvalid)
	}
	if len(objs) > maxLockObjects {
		return nil, fmt.Errorf("%w: objects: %d, at most %d in one request", state.ErrInvalid, len(objs), maxLockObjects)
	}
	for _, o := range objs {
		if err := state.ParseObject(o); err != nil {
			return nil, err
		}
	}
	out := slices.Clone(objs)
	slices.Sort(out)
	return slices.Compact(out), nil
}

func checkOwner(owner string) error {
	switch {
	case owner == "":
		return fmt.Errorf("%w: owner: the call names no lock owner: connect with a client certificate, or declare one (grapnel --owner NAME)", state.ErrInvalid)
	case len(owner) > maxLockOwnerBytes:
		return fmt.Errorf("%w: owner: %d bytes, at most %d", state.ErrInvalid, len(owner), maxLockOwnerBytes)
	}
	return nil
}

// Lock takes or renews the caller's locks.
func (ls *locksService) Lock(ctx context.Context, req *grapnelpb.LockRequest) (*grapnelpb.LockResponse, error) {
	objs, err := checkObjects(req.GetObjects())
	if err != nil {
		return nil, err
	}
	ttl := time.Duration(req.GetTtlMs()) * time.Millisecond
	switch {
	case req.GetTtlMs() == 0:
		return nil, fmt.Errorf("%w: ttl: a lock needs a time to live (grapnel lock --ttl 10m)", state.ErrInvalid)
	case ttl > MaxLockTTL || req.GetTtlMs() > uint64(MaxLockTTL/time.Millisecond):
		return nil, fmt.Errorf("%w: ttl: %v, at most %v", state.ErrInvalid, ttl, MaxLockTTL)
	case len(req.GetReason()) > maxLockReasonLen:
		return nil, fmt.Errorf("%w: reason: %d bytes, at most %d", state.ErrInvalid, len(req.GetReason()), maxLockReasonLen)
	}
	owner := ls.p.s.lockOwner(ctx)
	if err := checkOwner(owner); err != nil {
		return nil, err
	}
	var fwd *grapnelpb.LockResponse
	a, err := ls.p.onLeader(ctx, &planCall{owner: owner, lock: &lockCall{take: true, objects: objs, ttl: ttl, reason: req.GetReason()}},
		func(ctx context.Context, cc grpc.ClientConnInterface) (err error) {
			fwd, err = grapnelpb.NewLocksClient(cc).Lock(ctx, req)
			return err
		})
	if fwd != nil || err != nil {
		return fwd, err
	}
	return &grapnelpb.LockResponse{Locks: a.locks}, nil
}

// Unlock releases the caller's locks, or with force anyone's.
func (ls *locksService) Unlock(ctx context.Context, req *grapnelpb.UnlockRequest) (*grapnelpb.UnlockResponse, error) {
	objs, err := checkObjects(req.GetObjects())
	if err != nil {
		return nil, err
	}
	owner := ls.p.s.lockOwner(ctx)
	if err := checkOwner(owner); err != nil {
		return nil, err
	}
	if req.GetForce() {
		// Releasing another owner's lock is cluster administration.
		if err := ls.p.s.authorize(ctx, authz.UnlockForce); err != nil {
			return nil, err
		}
	}
	var fwd *grapnelpb.UnlockResponse
	_, err = ls.p.onLeader(ctx, &planCall{owner: owner, lock: &lockCall{release: true, objects: objs, force: req.GetForce()}},
		func(ctx context.Context, cc grpc.ClientConnInterface) (err error) {
			fwd, err = grapnelpb.NewLocksClient(cc).Unlock(ctx, req)
			return err
		})
	if fwd != nil || err != nil {
		return fwd, err
	}
	return &grapnelpb.UnlockResponse{}, nil
}

// List answers the locks in force by the leader's clock.
func (ls *locksService) List(ctx context.Context, req *grapnelpb.ListLocksRequest) (*grapnelpb.ListLocksResponse, error) {
	var fwd *grapnelpb.ListLocksResponse
	a, err := ls.p.onLeader(ctx, &planCall{lock: &lockCall{}},
		func(ctx context.Context, cc grpc.ClientConnInterface) (err error) {
			fwd, err = grapnelpb.NewLocksClient(cc).List(ctx, req)
			return err
		})
	if fwd != nil || err != nil {
		return fwd, err
	}
	return &grapnelpb.ListLocksResponse{Locks: a.locks, NowMs: a.nowMs}, nil
}

// lockCall handles a Locks service call on the leader loop: it checks the
// request against the projected locks by the leader's clock now and
// proposes the command, which carries that time, so that every replica
// prunes and compares with it; the caller is answered once it commits.
func (l *leader) lockCall(c *planCall) {
	lc := c.lock
	now := l.clock.Now().UnixMilli()
	locks := l.projected.store.Locks
	answer := func(a planAnswer) { c.reply <- a }
	refuse := func(err error) { l.pipe.ordered(func() { answer(planAnswer{err: err}) }) }
	var cmd fsm.Command
	switch {
	case lc.take:
		if err := state.CheckLocks(locks, lc.objects, c.owner, now, l.s.keyedOwners()); err != nil {
			refuse(errs.Classify(errs.ErrLocked, err))
			return
		}
		if err := l.checkLockCount(locks, lc.objects, now); err != nil {
			refuse(err)
			return
		}
		cmd = &fsm.LockObjectsRequest{Objects: lc.objects, Owner: c.owner, Reason: lc.reason, NowMs: now, ExpiresMs: now + lc.ttl.Milliseconds()}
	case lc.release:
		if !lc.force {
			if err := state.CheckRelease(locks, lc.objects, c.owner, now, l.s.keyedOwners()); err != nil {
				refuse(errs.Classify(errs.ErrLocked, err))
				return
			}
		}
		cmd = &fsm.UnlockObjectsRequest{Objects: lc.objects, Owner: c.owner, NowMs: now, Force: lc.force}
	default:
		infos := lockInfos(locks, nil, now)
		l.pipe.ordered(func() { answer(planAnswer{locks: infos, nowMs: now}) })
		return
	}
	l.propose(cmd, func(any, uint64) {
		answer(planAnswer{locks: lockInfos(l.projected.store.Locks, lc.objects, now), nowMs: now})
	}, func(err error) {
		answer(planAnswer{err: fmt.Errorf("the lock change failed: %w", err)})
	})
}

// DefaultMaxLocks bounds the intent locks the cluster holds. A lock may
// name an object that does not exist yet, so nothing else bounded them,
// and every lock call, list and dry-run costs the leader loop time in
// proportion (1.5 µs per held lock per call; 100,000 held: 0.15 s;
// issue 27). Every workload and config item the default limits allow
// (1,000 each) can be locked at once, five times over.
const DefaultMaxLocks = 10000

// checkLockCount refuses a lock call that would make the cluster hold
// more than the configured number of locks in force at nowMs; renewing
// a lock one holds adds none.
func (l *leader) checkLockCount(locks state.Locks, objects []string, nowMs int64) error {
	held := 0
	for o := range locks {
		if _, ok := locks.Held(o, nowMs); ok {
			held++
		}
	}
	added := 0
	for _, o := range objects {
		if _, ok := locks.Held(o, nowMs); !ok {
			added++
		}
	}
	if limit := l.s.cfg.MaxLocks; held+added > limit {
		return state.LimitError("objects", fmt.Sprintf("the intent locks held with this call's %d new ones", added), "max_locks", held+added, limit)
	}
	return nil
}

// lockInfos are the locks in force at nowMs, of the objects given (all if
// nil), in object order.
func lockInfos(locks state.Locks, objects []string, nowMs int64) []*grapnelpb.LockInfo {
	out := []*grapnelpb.LockInfo{}
	for _, o := range state.SortedKeys(locks) {
		lk, ok := locks.Held(o, nowMs)
		if !ok || objects != nil && !slices.Contains(objects, o) {
			continue
		}
		out = append(out, &grapnelpb.LockInfo{Object: o, Owner: lk.Owner, Reason: lk.Reason, SinceMs: lk.SinceMs, ExpiresMs: lk.ExpiresMs})
	}
	return out
}
