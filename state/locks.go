package state

import (
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"
)

// Lock is an intent lock on one object (a workload or a config item): an
// update from anyone but Owner that changes the object is refused until
// ExpiresMs. The times are the leader's clock when it took the lock, as
// replicated, in Unix milliseconds: every replica compares them with the
// time a leader puts into the next lock command or uses to plan, never
// with its own clock, so a failover neither loses nor extends a lock.
type Lock struct {
	Owner     string `json:"owner"`
	Reason    string `json:"reason,omitempty"`
	SinceMs   int64  `json:"sinceMs"`
	ExpiresMs int64  `json:"expiresMs"`
}

// Expired reports whether the lock is over at nowMs.
func (l Lock) Expired(nowMs int64) bool { return nowMs >= l.ExpiresMs }

// Locks are the intent locks by object name ("workload/NAME",
// "config/KEY"). Expired locks stay until the next lock command prunes
// them: expiry writes nothing.
type Locks map[string]Lock

// Clone is a copy of l.
func (l Locks) Clone() Locks { return maps.Clone(l) }

// Held is the lock on obj at nowMs, if one is held.
func (l Locks) Held(obj string, nowMs int64) (Lock, bool) {
	lk, ok := l[obj]
	if !ok || lk.Expired(nowMs) {
		return Lock{}, false
	}
	return lk, true
}

// prune drops the locks expired at nowMs.
func (l Locks) prune(nowMs int64) {
	for o, lk := range l {
		if lk.Expired(nowMs) {
			delete(l, o)
		}
	}
}

// LockedError refuses a change to an object another owner holds an
// intent lock on (HTTP's 423 Locked); it names the object and the lock.
type LockedError struct {
	Object string
	Lock   Lock
	// Releasing is set when Releasing tried to release another's lock.
	Releasing string
}

func (e *LockedError) Error() string {
	s := fmt.Sprintf("%s is locked by %s until %s", e.Object, e.Lock.Owner,
		time.UnixMilli(e.Lock.ExpiresMs).UTC().Format(time.RFC3339))
	if e.Lock.Reason != "" {
		s += " (" + e.Lock.Reason + ")"
	}
	if e.Releasing != "" {
		s += "; " + e.Releasing + " may release it only with force"
	}
	return s
}

// SameOwner reports whether a lock held by held belongs to owner. Owners
// are role/name keys from cluster version 1 on ("operator/alice"); the
// previous release, and a leader before the upgrade is finalized, name
// them by the certificate's name alone ("alice"). Once keyed, a lock
// taken under the bare name is still its owner's, and a stream opened
// before the raise still owns the locks its holder takes after it: the
// bare name matches the name part of a key. Before, the previous
// release's rule holds: the same text.
func SameOwner(held, owner string, keyed bool) bool {
	if held == owner {
		return true
	}
	if !keyed {
		return false
	}
	_, heldName, heldKeyed := strings.Cut(held, "/")
	_, ownerName, ownerKeyed := strings.Cut(owner, "/")
	switch {
	case heldKeyed && !ownerKeyed:
		return heldName == owner
	case ownerKeyed && !heldKeyed:
		return ownerName == held
	}
	return false
}

// CheckLocks refuses, with a *LockedError for the first object in name
// order, a change by owner to objects another owner holds a lock on at
// nowMs. The owner's own locks let it through (SameOwner, keyed from
// cluster version 1); so does an expired lock.
func CheckLocks(l Locks, objects []string, owner string, nowMs int64, keyed bool) error {
	if len(l) == 0 {
		return nil
	}
	objs := append([]string(nil), objects...)
	sort.Strings(objs)
	for _, o := range objs {
		if lk, ok := l.Held(o, nowMs); ok && !SameOwner(lk.Owner, owner, keyed) {
			return &LockedError{Object: o, Lock: lk}
		}
	}
	return nil
}

// TakeLocks locks objects for owner from nowMs to expiresMs, after
// dropping the locks expired at nowMs. It changes nothing and returns a
// *LockedError when another owner holds one of them. The owner's own
// lock is renewed with the new expiry and reason.
func (s *Store) TakeLocks(objects []string, owner, reason string, nowMs, expiresMs int64) error {
	if err := CheckLocks(s.Locks, objects, owner, nowMs, s.KeyedOwners()); err != nil {
		return err
	}
	if s.Locks == nil {
		s.Locks = Locks{}
	}
	s.Locks.prune(nowMs)
	for _, o := range objects {
		s.Locks[o] = Lock{Owner: owner, Reason: reason, SinceMs: nowMs, ExpiresMs: expiresMs}
	}
	return nil
}

// ReleaseLocks removes owner's locks on objects, after dropping the locks
// expired at nowMs. A lock of another owner is removed only with force;
// without, nothing changes and the error names it. An object without a
// lock is no error: releasing twice is harmless.
func (s *Store) ReleaseLocks(objects []string, owner string, nowMs int64, force bool) error {
	if !force {
		if err := CheckRelease(s.Locks, objects, owner, nowMs, s.KeyedOwners()); err != nil {
			return err
		}
	}
	s.Locks.prune(nowMs)
	for _, o := range objects {
		delete(s.Locks, o)
	}
	return nil
}

// CheckRelease refuses, with a *LockedError, owner's release of a lock
// another owner holds at nowMs.
func CheckRelease(l Locks, objects []string, owner string, nowMs int64, keyed bool) error {
	if err := CheckLocks(l, objects, owner, nowMs, keyed); err != nil {
		le := err.(*LockedError)
		le.Releasing = owner
		return le
	}
	return nil
}
