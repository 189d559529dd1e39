package process

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/runtime/process/shim"
	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

// UIDRange is the range of uids the agent gives its process workloads,
// one uid per workload name, each with the group of the same number. The
// zero value gives none: every workload runs as the agent's user unless
// its runtimeConfig names a user.
type UIDRange struct{ First, Last uint32 }

// DefaultUIDRange is the agent's --workload-uid-range: uids no
// distribution hands out to people or services of its own.
var DefaultUIDRange = UIDRange{First: 60000, Last: 60999}

// maxUIDRange bounds the size of a range, and so of the assignment file.
const maxUIDRange = 1 << 16

// IsZero reports whether no range is set.
func (r UIDRange) IsZero() bool { return r == UIDRange{} }

func (r UIDRange) String() string {
	if r.IsZero() {
		return "off"
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// ParseUIDRange reads "FIRST-LAST"; "off" is the zero range.
func ParseUIDRange(s string) (UIDRange, error) {
	s = strings.TrimSpace(s)
	if s == "off" {
		return UIDRange{}, nil
	}
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	last, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	r := UIDRange{First: uint32(first), Last: uint32(last)}
	switch {
	case !ok || err1 != nil || err2 != nil:
		return UIDRange{}, fmt.Errorf("%q: expected FIRST-LAST (two uids) or off", s)
	case r.First == 0:
		return UIDRange{}, fmt.Errorf("%q: uid 0 is root; the range must start above it", s)
	case r.Last < r.First:
		return UIDRange{}, fmt.Errorf("%q: the last uid is below the first", s)
	case r.Last-r.First >= maxUIDRange:
		return UIDRange{}, fmt.Errorf("%q: more than %d uids", s, maxUIDRange)
	case r.Last == ^uint32(0):
		return UIDRange{}, fmt.Errorf("%q: uid %d is not a valid user", s, r.Last)
	}
	return r, nil
}

// uidFile keeps the assignment of uids to workload names in the run
// folder, so that a workload keeps its uid across agent restarts and the
// files it wrote stay its own. It is written only when a workload gets a
// uid for the first time.
const uidFile = "workload-uids.json"

// uidTable assigns each workload name a uid of the range: the name's
// hash picks the first candidate, and the next free one is taken when a
// different workload holds it, so two workloads never share a uid.
type uidTable struct {
	path  string
	rng   UIDRange
	files durable.Files // where the file is written: durable.OS but in tests

	mu   sync.Mutex        // guards uids and the file
	uids map[string]uint32 // workload name → uid
}

type uidFileBody struct {
	Range     string            `json:"range"`
	Workloads map[string]uint32 `json:"workloads"`
}

// loadUIDTable reads the assignments kept in path; those outside rng (the
// range changed) are dropped and given again when asked for.
func loadUIDTable(path string, rng UIDRange) (*uidTable, error) {
	t := &uidTable{path: path, rng: rng, files: durable.OS, uids: map[string]uint32{}}
	var body uidFileBody
	err := shim.ReadJSON(path, &body)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("process runtime: the workloads' uids in %s: %w", path, err)
	}
	taken := map[uint32]bool{}
	for name, uid := range body.Workloads {
		if uid < rng.First || uid > rng.Last || taken[uid] {
			continue
		}
		taken[uid] = true
		t.uids[name] = uid
	}
	return t, nil
}

// owns reports whether uid is the one assigned to workload.
func (t *uidTable) owns(workload string, uid uint32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	got, ok := t.uids[workload]
	return ok && got == uid
}

// assign is the uid of workload, given now if it has none yet.
func (t *uidTable) assign(workload string) (uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if uid, ok := t.uids[workload]; ok {
		return uid, nil
	}
	size := uint64(t.rng.Last-t.rng.First) + 1
	if uint64(len(t.uids)) >= size {
		return 0, fmt.Errorf("process runtime: all %d uids of the range %s are given to workloads; widen --workload-uid-range", size, t.rng)
	}
	taken := make(map[uint32]bool, len(t.uids))
	for _, uid := range t.uids {
		taken[uid] = true
	}
	h := fnv.New64a()
	h.Write([]byte(workload))
	start := h.Sum64() % size
	var uid uint32
	for i := uint64(0); i < size; i++ {
		cand := t.rng.First + uint32((start+i)%size)
		if !taken[cand] {
			uid = cand
			break
		}
	}
	t.uids[workload] = uid
	body := uidFileBody{Range: t.rng.String(), Workloads: t.uids}
	if err := shim.WriteJSONTo(t.files, t.path, body); err != nil {
		delete(t.uids, workload)
		return 0, fmt.Errorf("process runtime: keeping the uid of workload %s: %w", workload, err)
	}
	return uid, nil
}

// Owner is the user the instance runs as (runtime.Owners): the user its
// runtimeConfig names, else a uid of its own from Config.UIDs; nil when
// it runs as the agent's user.
func (r *Runtime) Owner(inst state.InstanceName, w *state.Workload) (*runtime.Owner, error) {
	if w == nil {
		return nil, errors.New("process runtime: no workload")
	}
	pc, err := parseConfig(w.RuntimeConfig)
	if err != nil {
		return nil, err
	}
	return r.ownerOf(inst.WorkloadName, pc)
}

func (r *Runtime) ownerOf(workload string, pc *processConfig) (*runtime.Owner, error) {
	if pc.User != "" {
		o, err := r.namedUser(pc.User)
		if err == nil {
			err = r.checkNotAnothers(workload, pc.User, o)
		}
		return o, err
	}
	if err := r.checkOwnUID(); err != nil {
		return nil, err
	}
	if r.uids == nil {
		return nil, nil
	}
	uid, err := r.uids.assign(workload)
	if err != nil {
		return nil, err
	}
	return &runtime.Owner{UID: uid, GID: uid}, nil
}

// namedUser resolves runtimeConfig.user and checks that the agent's
// workload policy lets a workload name it and that the agent may start
// a process as that user. Whether a uid of the range is the workload's
// own is checkNotAnothers's question.
func (r *Runtime) namedUser(u string) (*runtime.Owner, error) {
	field := root + ".user"
	level := r.cfg.Policy
	if level == workloadpolicy.Restricted {
		return nil, configErr(field, "names a user, and this agent's --workload-policy is restricted: a workload runs under a uid of its own")
	}
	o, err := lookupUser(u)
	if err != nil {
		return nil, configErr(field, "%v", err)
	}
	switch {
	case o.UID == 0 && level != workloadpolicy.Privileged:
		return nil, configErr(field, "%q is root; that needs --workload-policy privileged, and this agent's is %s", u, level)
	case level == workloadpolicy.Baseline && !r.listed(o.UID):
		return nil, configErr(field, "%q (uid %d) is not one of this agent's --workload-users (%s); at --workload-policy baseline a workload names only those", u, o.UID, listedUsers(r.cfg.Users))
	case !r.canSetUID && o.UID == r.euid:
		return nil, nil // the agent's own user
	case !r.canSetUID:
		return nil, configErr(field, "%q is uid %d, but the agent runs as uid %d, not root, and cannot start a process as another user", u, o.UID, r.euid)
	}
	return o, nil
}

// listed reports whether uid is one of Config.Users, resolved now (a
// user may be created after the agent starts).
func (r *Runtime) listed(uid uint32) bool {
	for _, u := range r.cfg.Users {
		if o, err := lookupUser(u); err == nil && o.UID == uid {
			return true
		}
	}
	return false
}

func listedUsers(us []string) string {
	if len(us) == 0 {
		return "none"
	}
	return strings.Join(us, ", ")
}

// checkNotAnothers refuses a user that resolves to a uid of the range
// other than the workload's own: each uid of the range belongs to one
// workload (the one it is assigned to, or the next one it is given to),
// and a workload naming it would run as that workload, with its files,
// its control interface and its /proc (issue 27). It holds at every
// level of the policy.
func (r *Runtime) checkNotAnothers(workload, u string, o *runtime.Owner) error {
	rng := r.cfg.UIDs
	if o == nil || rng.IsZero() || o.UID < rng.First || o.UID > rng.Last {
		return nil
	}
	if r.uids != nil && r.uids.owns(workload, o.UID) {
		return nil
	}
	return configErr(root+".user", "%q is uid %d, in the agent's workload uid range %s: that uid belongs to another workload (each uid of --workload-uid-range is one workload's)", u, o.UID, rng)
}

// checkOwnUID refuses, at restricted, a workload that would not run
// under a uid of its own.
func (r *Runtime) checkOwnUID() error {
	if r.cfg.Policy != workloadpolicy.Restricted || r.uids != nil {
		return nil
	}
	return configErr(root, "at --workload-policy restricted a workload runs under a uid of its own, and this agent gives none (it has no --workload-uid-range or is not root)")
}

// lookupUser resolves a user name or uid; a uid without an entry in the
// user database gets the group of the same number.
func lookupUser(u string) (*runtime.Owner, error) {
	if n, err := strconv.ParseUint(u, 10, 32); err == nil {
		o := &runtime.Owner{UID: uint32(n), GID: uint32(n)}
		if pw, err := user.LookupId(u); err == nil {
			if g, err := strconv.ParseUint(pw.Gid, 10, 32); err == nil {
				o.GID = uint32(g)
			}
		}
		return o, nil
	}
	pw, err := user.Lookup(u)
	if err != nil {
		return nil, fmt.Errorf("no user %q on this host", u)
	}
	uid, err1 := strconv.ParseUint(pw.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(pw.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %q has no numeric uid and gid (%s:%s)", u, pw.Uid, pw.Gid)
	}
	return &runtime.Owner{UID: uint32(uid), GID: uint32(gid)}, nil
}

// ownDir makes dir (and its missing parents, 0700, their names synced)
// and gives it to owner with mode 0700: a directory no other workload
// can enter. A nil owner leaves it the agent's.
func ownDir(dir string, owner *runtime.Owner) error {
	if err := durable.MkdirMissing(dir, 0o700); err != nil {
		return err
	}
	return runtime.GiveFile(dir, owner, 0o700)
}

// traversable makes dirs (the run folder, <agent>_io) 0711: a workload
// under its own uid can pass through them to its own directories but
// cannot list them. It runs at every start of such a workload, on
// directories the agent made durable at its start, so it syncs and
// changes only what is missing: an inode changed for nothing would be
// one more journal commit for the start's next fsync.
func traversable(dirs ...string) error {
	for _, d := range dirs {
		if err := durable.MkdirMissing(d, runtime.PrivateDirMode); err != nil {
			return err
		}
		if err := runtime.GiveFile(d, nil, runtime.TraverseMode); err != nil {
			return err
		}
	}
	return nil
}

// uidPath is where the assignments of runFolder are kept.
func uidPath(runFolder string) string { return filepath.Join(runFolder, uidFile) }
