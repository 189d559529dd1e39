package state

import (
	"fmt"
	"maps"
	"sort"
	"strings"
)

// Object names address one workload or one config item of the desired
// state, for modification revisions and intent locks: "workload/NAME" and
// "config/KEY" (a top-level config key).
const (
	ObjectWorkloadPrefix = "workload/"
	ObjectConfigPrefix   = "config/"
)

// WorkloadObject is the object name of a workload.
func WorkloadObject(name string) string { return ObjectWorkloadPrefix + name }

// ConfigObject is the object name of a top-level config item.
func ConfigObject(key string) string { return ObjectConfigPrefix + key }

// ParseObject checks an object name: "workload/NAME" or "config/KEY" with
// a non-empty NAME or KEY.
func ParseObject(obj string) error {
	for _, p := range []string{ObjectWorkloadPrefix, ObjectConfigPrefix} {
		if rest, ok := strings.CutPrefix(obj, p); ok && rest != "" {
			return nil
		}
	}
	return fmt.Errorf("%w: object %q: name it workload/NAME or config/KEY", ErrInvalid, obj)
}

// MaxTombstones bounds the deletions whose revision the store keeps. Past
// it the oldest are dropped down to three quarters of it, and Floor rises
// to the newest revision dropped: an expected revision below Floor can no
// longer be checked against deletions and is refused.
const MaxTombstones = 1000

// Revisions is the modification revision of each workload and config item
// of the desired state (like etcd's mod_revision): the desired-state
// sequence number (Store.DesiredSeq) of the update that last put it, and of
// the update that deleted it for a deleted one (a tombstone). Everything is
// derived from the applied updates, so every replica holds the same.
type Revisions struct {
	// Mod is the revision of each object in the desired state.
	Mod map[string]uint64
	// Tombstones is the revision that deleted each object, at most
	// MaxTombstones of them.
	Tombstones map[string]uint64
	// Floor is the revision up to which changes may have gone unrecorded:
	// the newest tombstone dropped, or the sequence number of a snapshot
	// written before revisions existed. An object without an entry
	// changed at or before Floor.
	Floor uint64
}

// NewRevisions is an empty record.
func NewRevisions() *Revisions {
	return &Revisions{Mod: map[string]uint64{}, Tombstones: map[string]uint64{}}
}

// Clone is a copy sharing no map with r; an empty record for nil.
func (r *Revisions) Clone() *Revisions {
	if r == nil {
		return NewRevisions()
	}
	return &Revisions{Mod: maps.Clone(r.Mod), Tombstones: maps.Clone(r.Tombstones), Floor: r.Floor}
}

// record notes what the update numbered seq put and deleted.
func (r *Revisions) record(u *DesiredUpdate, seq uint64) {
	del := func(obj string) {
		delete(r.Mod, obj)
		r.Tombstones[obj] = seq
	}
	put := func(obj string) {
		r.Mod[obj] = seq
		delete(r.Tombstones, obj)
	}
	for _, n := range u.DeleteWorkloads {
		del(WorkloadObject(n))
	}
	for _, k := range u.DeleteConfigs {
		del(ConfigObject(k))
	}
	for n := range u.PutWorkloads {
		put(WorkloadObject(n))
	}
	for k := range u.PutConfigs {
		put(ConfigObject(k))
	}
	r.prune()
}

// prune drops the oldest tombstones once there are more than
// MaxTombstones, in one go down to three quarters, so that a run of
// deletions sorts once per MaxTombstones/4 of them.
func (r *Revisions) prune() {
	if len(r.Tombstones) <= MaxTombstones {
		return
	}
	type tomb struct {
		obj string
		rev uint64
	}
	all := make([]tomb, 0, len(r.Tombstones))
	for o, v := range r.Tombstones {
		all = append(all, tomb{o, v})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].rev != all[j].rev {
			return all[i].rev < all[j].rev
		}
		return all[i].obj < all[j].obj
	})
	for _, t := range all[:len(all)-MaxTombstones*3/4] {
		delete(r.Tombstones, t.obj)
		r.Floor = max(r.Floor, t.rev)
	}
}

// RevisionConflict refuses an update made at an expected revision when
// what it addresses changed after that revision. It names the object that changed after the expected
// revision, or says the expected revision is too old (Object empty) or
// not reached yet.
type RevisionConflict struct {
	Expected, Current uint64
	// Object and Changed: the first object (in name order) modified or
	// deleted after Expected, at revision Changed.
	Object  string
	Changed uint64
	Deleted bool
	// Floor is set when Expected is older than the changes kept.
	Floor uint64
}

func (e *RevisionConflict) Error() string {
	switch {
	case e.Expected > e.Current:
		return fmt.Sprintf("revision conflict: expected revision %d, but the desired state is at revision %d: read the state again", e.Expected, e.Current)
	case e.Object == "":
		return fmt.Sprintf("revision conflict: expected revision %d, the desired state is at revision %d, and changes up to revision %d are no longer recorded, so it cannot be told whether the update's objects changed since: read the state again", e.Expected, e.Current, e.Floor)
	case e.Deleted:
		return fmt.Sprintf("revision conflict: expected revision %d, the desired state is at revision %d: %s was deleted at revision %d: read the state again", e.Expected, e.Current, e.Object, e.Changed)
	}
	return fmt.Sprintf("revision conflict: expected revision %d, the desired state is at revision %d: %s changed at revision %d: read the state again", e.Expected, e.Current, e.Object, e.Changed)
}

// RevisionScope is the set of objects an update addresses: every object,
// or all workloads, all configs and single objects.
type RevisionScope struct {
	All, Workloads, Configs bool
	Objects                 map[string]bool
}

// ScopeOfMasks is the scope of an update with these update masks: no mask
// replaces the whole desired state; "desiredState" all of it,
// "desiredState.workloads" (".configs") every workload (config),
// "desiredState.workloads.NAME..." one workload, "desiredState.configs.KEY..."
// one config item. apiVersion and agent tags address no object.
func ScopeOfMasks(masks []string) RevisionScope {
	s := RevisionScope{Objects: map[string]bool{}}
	if len(masks) == 0 {
		s.All = true
		return s
	}
	for _, m := range masks {
		p := SplitMask(m)
		if len(p) == 0 || p[0] != "desiredState" {
			continue
		}
		if len(p) == 1 {
			s.All = true
			continue
		}
		switch {
		case p[1] == keyWorkloads && len(p) == 2:
			s.Workloads = true
		case p[1] == keyWorkloads:
			s.Objects[WorkloadObject(p[2])] = true
		case p[1] == keyConfigs && len(p) == 2:
			s.Configs = true
		case p[1] == keyConfigs:
			s.Objects[ConfigObject(p[2])] = true
		}
	}
	return s
}

func (s RevisionScope) has(obj string) bool {
	switch {
	case s.All, s.Objects[obj]:
		return true
	case s.Workloads:
		return strings.HasPrefix(obj, ObjectWorkloadPrefix)
	case s.Configs:
		return strings.HasPrefix(obj, ObjectConfigPrefix)
	}
	return false
}

// CheckExpected refuses, with a *RevisionConflict, an update made at the
// expected revision when an object of its scope was put or deleted after
// it, when expected is past current (the store's DesiredSeq), or when the
// scope's changes after expected may have gone unrecorded (expected below
// Floor; conservative: it may have changed nothing). Only the objects of
// the scope count: a change elsewhere does not conflict.
func (r *Revisions) CheckExpected(expected, current uint64, scope RevisionScope) error {
	if expected > current {
		return &RevisionConflict{Expected: expected, Current: current}
	}
	if expected == current {
		return nil
	}
	var first *RevisionConflict
	note := func(obj string, rev uint64, deleted bool) {
		if rev > expected && scope.has(obj) && (first == nil || obj < first.Object) {
			first = &RevisionConflict{Expected: expected, Current: current, Object: obj, Changed: rev, Deleted: deleted}
		}
	}
	if scope.All || scope.Workloads || scope.Configs {
		for o, v := range r.Mod {
			note(o, v, false)
		}
		for o, v := range r.Tombstones {
			note(o, v, true)
		}
	} else {
		// Only named objects: look them up instead of scanning.
		for o := range scope.Objects {
			if v, ok := r.Mod[o]; ok {
				note(o, v, false)
			}
			if v, ok := r.Tombstones[o]; ok {
				note(o, v, true)
			}
		}
	}
	if first != nil {
		return first
	}
	if expected < r.Floor && r.unknownSince(scope) {
		return &RevisionConflict{Expected: expected, Current: current, Floor: r.Floor}
	}
	return nil
}

// unknownSince reports whether the scope holds an object whose last change
// may lie below Floor unrecorded: any, for a scope over all workloads or
// configs (a dropped tombstone may be one of them); for single objects,
// one with neither a revision nor a tombstone.
func (r *Revisions) unknownSince(scope RevisionScope) bool {
	if scope.All || scope.Workloads || scope.Configs {
		return true
	}
	for o := range scope.Objects {
		_, put := r.Mod[o]
		_, deleted := r.Tombstones[o]
		if !put && !deleted {
			return true
		}
	}
	return false
}
