// Package deploy holds the shipped configuration, systemd units and
// examples; it has no Go code. Its test follows docs/deploy.md as written:
// the shell blocks marked `sh test=...` are run, not copied, so the guide
// cannot drift from what is tested.
package deploy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/internal/sdnotify/sdnotifytest"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/state"
)

// guidePath is the guide the test follows.
const guidePath = "../docs/deploy.md"

// guideNet is the network the guide's units live on; the test moves it
// onto a /24 of loopback addresses of its own (all of 127.0.0.0/8 reaches
// lo on Linux), so the guide's ports are used as written.
const guideNet = "10.0.0."

// unitPaths are the absolute paths on a unit that the test moves into
// that unit's directory: in the commands run there, in the configuration
// files the guide installed, and in each unit's ExecStart.
var unitPaths = []string{"/etc/grapnel", "/etc/systemd", "/etc/default", "/usr/local/bin", "/usr/lib/sysusers.d", "/var/lib/grapnel", "/run/grapnel"}

// block is one fenced block of the guide marked for the test.
type block struct {
	kind string // operator, replica, agent, check
	line int    // where it starts in the guide, for messages
	text string
}

var fence = regexp.MustCompile("(?ms)^```sh test=(\\w+)\n(.*?)^```")

// guideBlocks returns the guide's marked blocks in order.
func guideBlocks(t *testing.T, doc string) []block {
	t.Helper()
	var out []block
	for _, m := range fence.FindAllStringSubmatchIndex(doc, -1) {
		out = append(out, block{kind: doc[m[2]:m[3]], line: strings.Count(doc[:m[0]], "\n") + 1, text: doc[m[4]:m[5]]})
	}
	kinds := map[string]int{}
	for _, b := range out {
		kinds[b.kind]++
	}
	for _, k := range []string{"operator", "replica", "agent", "check"} {
		if kinds[k] != 1 {
			t.Fatalf("%s: %d blocks marked test=%s, want 1 (marks: %v)", guidePath, kinds[k], k, kinds)
		}
	}
	return out
}

// assignment is NAME=VALUE NAME=VALUE, the first line of a block run once
// per unit; its comment lists the other units the same way.
var assignment = regexp.MustCompile(`\b([A-Z]+)=([\w.]*\w)\s+([A-Z]+)=([\w.]*\w)`)

// perUnit returns the block once per unit its first line names: that
// line replaced by one unit's assignment each time, as the guide tells a
// reader to do.
func perUnit(t *testing.T, b block) []string {
	t.Helper()
	first, rest, _ := strings.Cut(b.text, "\n")
	ms := assignment.FindAllStringSubmatch(first, -1)
	if len(ms) == 0 {
		t.Fatalf("%s:%d: the test=%s block does not start with NAME=VALUE NAME=VALUE: %q", guidePath, b.line, b.kind, first)
	}
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%s=%s %s=%s\n%s", m[1], m[2], m[3], m[4], rest))
	}
	return out
}

// shims stand in for what the test's host cannot do as the guide's units
// would: reach a unit (ssh, scp into the unit's directory), build (the
// test built the binaries), and systemd (users, owners, units enabled,
// recorded for the test to check and start). Each refuses what the guide
// could not do on a real unit either: a missing source, a target
// directory that does not exist, a unit that was not installed, a user
// no sysusers file creates.
const shims = `
unit_root() {
  local host=$1
  [[ $host == "$GUIDE_NET"* ]] || { echo "ssh/scp: no unit $host on the guide's network" >&2; return 2; }
  local root=$GUIDE_UNITS/$host
  mkdir -p "$root"/{usr/local/bin,usr/lib/sysusers.d,etc/systemd/system,etc/default,var/lib,run}
  echo "$root"
}
onunit() {
  local root=$1 cmd=$2 p
  for p in $GUIDE_PATHS; do cmd=${cmd//"$p"/"$root$p"}; done
  echo "$cmd"
}
make() {
  [[ "$*" == build ]] || { echo "make shim: only 'make build' (got make $*)" >&2; return 2; }
  local b; for b in grapnel-server grapnel-agent grapnel-process-shim grapnel; do
    [[ -x bin/$b ]] || { echo "make build: bin/$b missing" >&2; return 1; }; done
}
scp() {
  local opts=() args=() a
  for a in "$@"; do case $a in -r|-p|-rp|-pr) opts+=("$a");; -*) echo "scp shim: option $a" >&2; return 2;; *) args+=("$a");; esac; done
  local dst=${args[-1]}; unset 'args[-1]'
  [[ $dst == root@*:/* ]] || { echo "scp shim: destination $dst is not root@HOST:/PATH" >&2; return 2; }
  local host=${dst#root@}; host=${host%%:*}
  local root; root=$(unit_root "$host") || return
  local path=$root${dst#*:}
  if [[ $path == */ && ! -d $path ]]; then echo "scp: ${dst#*:}: No such file or directory" >&2; return 1; fi
  cp "${opts[@]}" -- "${args[@]}" "$path"
}
ssh() {
  [[ $# -ge 2 && $1 == root@* ]] || { echo "ssh shim: want ssh root@HOST COMMAND" >&2; return 2; }
  local host=${1#root@}; shift
  local root; root=$(unit_root "$host") || return
  GUIDE_ROOT=$root bash -c "source \"$GUIDE_SHIMS\"; set -euo pipefail; cd \"$root\"; $(onunit "$root" "$*")"
}
systemd-sysusers() {
  local f n=0 name
  for f in "$GUIDE_ROOT"/usr/lib/sysusers.d/*.conf; do
    [[ -f $f ]] || continue
    for name in $(awk '$1 == "u" {print $2}' "$f"); do
      grep -q "^$name " "$GUIDE_ROOT/.users" 2>/dev/null || echo "$name $GUIDE_UID" >> "$GUIDE_ROOT/.users"
    done
    n=$((n+1))
  done
  [[ $n -gt 0 ]] || { echo "systemd-sysusers: no sysusers.d file" >&2; return 1; }
}
chown() {
  local opts=() args=() a
  for a in "$@"; do case $a in -R) opts+=(-R);; -*) echo "chown shim: option $a" >&2; return 2;; *) args+=("$a");; esac; done
  local spec=${args[0]}; unset 'args[0]'
  [[ $spec == *: && $spec != *:*:* ]] || { echo "chown shim: owner $spec is not USER: (the user and its group)" >&2; return 2; }
  local uid; uid=$(awk -v u="${spec%:}" '$1 == u {print $2}' "$GUIDE_ROOT/.users" 2>/dev/null)
  [[ -n $uid ]] || { echo "chown: invalid user: '$spec'" >&2; return 1; }
  command chown "${opts[@]}" "$uid:$uid" -- "${args[@]}"
}
systemctl() {
  case "$*" in
  daemon-reload) return 0;;
  "enable --now "*)
    local u=$3; [[ $u == *.service ]] || u=$u.service
    [[ -f $GUIDE_ROOT/etc/systemd/system/$u ]] || { echo "Failed to enable unit: Unit file $u does not exist." >&2; return 1; }
    echo "$u" >> "$GUIDE_ROOT/.enabled";;
  *) echo "systemctl shim: $*" >&2; return 2;;
  esac
}
`

// env is what the guide's commands run with: the shims' settings.
type env struct {
	src, units, shimsPath, net string
	// uid is the uid (and gid) systemd-sysusers gives a unit's user.
	uid int
}

// onNet moves the guide's network onto the test's, in plain text and in
// the escaped form a sed expression holds.
func (e env) onNet(s string) string {
	s = strings.ReplaceAll(s, guideNet, e.net)
	return strings.ReplaceAll(s, regexp.QuoteMeta(guideNet), regexp.QuoteMeta(e.net))
}

// onUnit moves the unit paths of s into root.
func onUnit(root, s string) string {
	for _, p := range unitPaths {
		s = strings.ReplaceAll(s, p, root+p)
	}
	return s
}

// run runs one block's text with bash on the operator's machine (the
// checkout), failing the test with the block's place and its output.
func (e env) run(t *testing.T, ctx context.Context, b block, text string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "bash", "-c", "source \"$GUIDE_SHIMS\"; set -euo pipefail\n"+e.onNet(text))
	cmd.Dir = e.src
	cmd.Env = append(os.Environ(), "GUIDE_SHIMS="+e.shimsPath, "GUIDE_UNITS="+e.units, "GUIDE_NET="+e.net,
		"GUIDE_PATHS="+strings.Join(unitPaths, " "), fmt.Sprintf("GUIDE_UID=%d", e.uid))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s:%d (test=%s): %v\n--- block as run\n%s\n--- output\n%s", guidePath, b.line, b.kind, err, e.onNet(text), out)
	}
	return string(out)
}

// unitFile is what the test reads of a systemd unit to start it as
// systemd would.
type unitFile struct {
	name, path string
	service    map[string][]string
}

func readUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{name: filepath.Base(path), path: path, service: map[string][]string{}}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = line
		case section == "[Service]":
			k, v, _ := strings.Cut(line, "=")
			u.service[k] = append(u.service[k], v)
		}
	}
	return u
}

func (u unitFile) one(t *testing.T, key string) string {
	t.Helper()
	v := u.service[key]
	if len(v) != 1 {
		t.Fatalf("%s: %d %s= lines, want 1", u.path, len(v), key)
	}
	return v[0]
}

// verifyUnit runs systemd-analyze verify on the unit as installed on its
// unit, its binaries moved into the unit's directory (verify checks that
// ExecStart is executable), with the drop-ins given (verify reads those
// in NAME.d/ next to the unit). Any complaint fails the test.
func verifyUnit(t *testing.T, u unitFile, root, dir string, dropIns ...string) {
	t.Helper()
	data, err := os.ReadFile(u.path)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(dir, u.name)
	if err := os.WriteFile(copyPath, []byte(strings.ReplaceAll(string(data), "/usr/local/bin/", root+"/usr/local/bin/")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range dropIns {
		data, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(copyPath+".d", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(copyPath+".d", filepath.Base(d)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("systemd-analyze", "verify", copyPath).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify %s (installed from the guide) with drop-ins %v: %v\n%s", u.name, dropIns, err, out)
	}
}

// unitUser is the uid systemd-sysusers gave user on the unit at root
// (the guide runs it before it enables a unit with User=).
func unitUser(t *testing.T, root, user string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, ".users"))
	if err != nil {
		t.Fatalf("User=%s, but systemd-sysusers made no user on %s: %v", user, filepath.Base(root), err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		var name string
		var uid int
		if n, _ := fmt.Sscanf(line, "%s %d", &name, &uid); n == 2 && name == user {
			return uid
		}
	}
	t.Fatalf("User=%s, but systemd-sysusers made no such user on %s", user, filepath.Base(root))
	return 0
}

// procUID is the real uid process pid runs as.
func procUID(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			var uid int
			if _, err := fmt.Sscan(rest, &uid); err != nil {
				t.Fatalf("/proc/%d/status: %q: %v", pid, line, err)
			}
			return uid
		}
	}
	t.Fatalf("/proc/%d/status: no Uid line", pid)
	return 0
}

// started is one unit's main process and its notify socket.
type started struct {
	unit   string
	proc   *bench.Process
	notify *sdnotifytest.Socket
	log    string
	uid    int // the unit's User=, 0 without one
}

// startUnit does what systemd does for u before and at its start: the
// StateDirectory and RuntimeDirectory with their modes, NOTIFY_SOCKET for
// Type=notify, then ExecStart as written, its paths moved into root.
func startUnit(t *testing.T, u unitFile, root string) *started {
	t.Helper()
	dirs := func(key, base string) {
		mode := os.FileMode(0o755)
		if m := u.service[key+"Mode"]; len(m) == 1 {
			var v uint32
			if _, err := fmt.Sscanf(m[0], "%o", &v); err != nil {
				t.Fatalf("%s: %sMode=%s: %v", u.path, key, m[0], err)
			}
			mode = os.FileMode(v)
		}
		for _, v := range u.service[key] {
			for _, d := range strings.Fields(v) {
				p := filepath.Join(root, base, d)
				if err := os.MkdirAll(p, mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(p, mode); err != nil {
					t.Fatal(err)
				}
				// Process workloads run as uids of their own and must pass
				// through the test's temporary directories to theirs.
				if err := bench.Passable(p); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	dirs("StateDirectory", "/var/lib")
	dirs("RuntimeDirectory", "/run")
	if typ := u.one(t, "Type"); typ != "notify" {
		t.Fatalf("%s: Type=%s; the test waits for READY=1 of Type=notify", u.path, typ)
	}
	args := strings.Fields(onUnit(root, u.one(t, "ExecStart")))
	if len(args) == 0 {
		t.Fatalf("%s: empty ExecStart", u.path)
	}
	// The test splits ExecStart on blanks, as systemd does for a line
	// without quotes, prefixes or variables; it refuses what it would
	// start otherwise than systemd.
	if strings.ContainsAny(args[0][:1], "-@+!:") || strings.ContainsAny(u.one(t, "ExecStart"), `"'\$%`) {
		t.Fatalf("%s: ExecStart=%s: quotes, prefixes, variables and specifiers are not started as systemd would here; extend startUnit", u.path, u.one(t, "ExecStart"))
	}
	if _, err := os.Stat(args[0]); err != nil {
		t.Fatalf("%s: ExecStart=%s: %v (the guide did not install it)", u.path, u.one(t, "ExecStart"), err)
	}
	sock := sdnotifytest.Listen(t)
	// systemd starts the process in / with the unit's umask, as its
	// User= when one is set: the uid systemd-sysusers gave that user.
	umask := "0022"
	if m := u.service["UMask"]; len(m) == 1 {
		umask = m[0]
	}
	uid := 0
	if user := u.service["User"]; len(user) == 1 {
		uid = unitUser(t, root, user[0])
		for _, key := range []string{"StateDirectory", "RuntimeDirectory"} {
			for _, v := range u.service[key] {
				for _, d := range strings.Fields(v) {
					if err := os.Chown(filepath.Join(root, map[string]string{"StateDirectory": "var/lib", "RuntimeDirectory": "run"}[key], d), uid, uid); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		// The user passes through the test's directories to the unit's
		// files, and may send to the notify socket.
		if err := bench.Passable(filepath.Join(root, "etc")); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Dir(sock.Path), 0o711); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(sock.Path, 0o666); err != nil {
			t.Fatal(err)
		}
		args = append([]string{"/usr/bin/setpriv", fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", uid), "--clear-groups"}, args...)
	}
	envs := []string{"NOTIFY_SOCKET=" + sock.Path}
	for _, f := range u.service["EnvironmentFile"] {
		optional := strings.HasPrefix(f, "-")
		data, err := os.ReadFile(onUnit(root, strings.TrimPrefix(f, "-")))
		if err != nil {
			if optional && os.IsNotExist(err) {
				continue
			}
			t.Fatalf("%s: EnvironmentFile=%s: %v", u.path, f, err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if line = strings.TrimSpace(line); line != "" && line[0] != '#' && strings.Contains(line, "=") {
				envs = append(envs, line)
			}
		}
	}
	args = append(append(envs, "/bin/sh", "-c", `cd / && umask "$0" && exec "$@"`, umask), args...)
	log := filepath.Join(root, strings.TrimSuffix(u.name, ".service")+".log")
	p, err := bench.StartProcess(u.name, "/usr/bin/env", args, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return &started{unit: u.name, proc: p, notify: sock, log: log, uid: uid}
}

// TestDeployGuide follows docs/deploy.md into a temporary root: the
// operator's commands make the certificates and keys and install three
// replicas and an agent onto their units, the units pass systemd-analyze
// verify and start as systemd would start them, and the guide's own
// check brings the example manifest's process workloads to Running.
func TestDeployGuide(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test: builds the programs and runs three replicas and an agent")
	}
	// CI (.ci/run sets GRAPNEL_REQUIRE_SYSTEMD; CI services set CI=true)
	// fails rather than skips what it cannot run.
	inCI := os.Getenv("CI") == "true" || os.Getenv("GRAPNEL_REQUIRE_SYSTEMD") == "1"
	if os.Geteuid() != 0 {
		msg := "the guide's agent runs as root: it starts process workloads under uids of their own (workload_uid_range)"
		if inCI {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	_, errAnalyze := exec.LookPath("systemd-analyze")
	if errAnalyze != nil && inCI {
		t.Fatalf("systemd-analyze is missing in CI (CI=true or GRAPNEL_REQUIRE_SYSTEMD=1; .ci/run installs Debian's systemd): %v", errAnalyze)
	}
	doc, err := os.ReadFile(guidePath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := guideBlocks(t, string(doc))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	tmp := t.TempDir()
	e := env{src: filepath.Join(tmp, "src"), units: filepath.Join(tmp, "units"), shimsPath: filepath.Join(tmp, "shims.sh"),
		net: fmt.Sprintf("127.%d.%d.", 100+rand.IntN(100), 1+rand.IntN(254)), uid: 64000 + rand.IntN(500)}
	if _, err := bench.BuildCommands(filepath.Join(e.src, "bin"), "grapnel-server", "grapnel-agent", "grapnel"); err != nil {
		t.Fatal(err)
	}
	copyTree(t, ".", filepath.Join(e.src, "deploy"), e.onNet)
	if err := os.WriteFile(e.shimsPath, []byte(shims), 0o644); err != nil {
		t.Fatal(err)
	}

	var check block
	for _, b := range blocks {
		switch b.kind {
		case "operator":
			e.run(t, ctx, b, b.text)
		case "replica", "agent":
			for _, text := range perUnit(t, b) {
				e.run(t, ctx, b, text)
			}
		case "check":
			check = b
		default:
			t.Fatalf("%s:%d: unknown mark test=%s", guidePath, b.line, b.kind)
		}
	}

	// What systemd would do on each unit: check the units enabled, then
	// start the replicas before the agents (the order does not matter
	// to Grapnel; it keeps the logs readable).
	roots, err := filepath.Glob(filepath.Join(e.units, "*"))
	if err != nil || len(roots) != 4 {
		t.Fatalf("the guide set up %d units (%v), want 3 replicas and 1 agent", len(roots), roots)
	}
	type enabled struct {
		root string
		unit unitFile
	}
	var units []enabled
	for _, root := range roots {
		names, err := os.ReadFile(filepath.Join(root, ".enabled"))
		if err != nil {
			t.Fatalf("unit %s: nothing enabled: %v", filepath.Base(root), err)
		}
		for _, n := range strings.Fields(string(names)) {
			units = append(units, enabled{root, readUnit(t, filepath.Join(root, "etc/systemd/system", n))})
		}
		// The configuration files the guide installed name paths on
		// the unit: move them into its directory.
		cfgs, _ := filepath.Glob(filepath.Join(root, "etc/grapnel/*.yaml"))
		for _, c := range cfgs {
			data, err := os.ReadFile(c)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(c, []byte(onUnit(root, string(data))), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	slices.SortStableFunc(units, func(a, b enabled) int { return strings.Compare(b.unit.name, a.unit.name) }) // server before agent
	t.Run("systemd-analyze verify", func(t *testing.T) {
		if errAnalyze != nil {
			t.Skipf("systemd-analyze not found (%v): install Debian's systemd to check the units; in CI (CI=true or GRAPNEL_REQUIRE_SYSTEMD=1) the test fails instead", errAnalyze)
		}
		for _, u := range units {
			verifyUnit(t, u.unit, u.root, t.TempDir())
			// The guide's drop-in for podman workloads, as it says to
			// install it next to the agent's unit.
			if d := filepath.Join(e.src, "deploy/systemd", u.unit.name+".d", "podman.conf"); u.unit.name == "grapnel-agent.service" {
				verifyUnit(t, u.unit, u.root, t.TempDir(), d)
			}
		}
	})
	var agentRoots []*bench.Agent
	for _, u := range units {
		if u.unit.name == "grapnel-agent.service" {
			agentRoots = append(agentRoots, &bench.Agent{Name: agentName(t, u.root), RunFolder: filepath.Join(u.root, "var/lib/grapnel-agent")})
		}
	}
	// Workloads outlive their agent by design: end them after the test,
	// once the agent is gone (cleanups run last first), or it would
	// start greeter again (restartPolicy ON_FAILURE).
	t.Cleanup(func() { bench.RemoveWorkloads(agentRoots) })
	var procs []*started
	for _, u := range units {
		procs = append(procs, startUnit(t, u.unit, u.root))
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range procs {
				t.Logf("%s", bench.LogTail(p.log, 30))
			}
		}
	})

	// READY=1 from every unit (Type=notify); then the agent's stream to
	// a leader, which needs the cluster formed.
	for _, p := range procs {
		if err := bench.PollUntil(ctx, 20*time.Millisecond, func() (bool, error) {
			if err := p.proc.ExitErr(); err != nil {
				return false, err
			}
			return p.notify.Count("READY=1") > 0, nil
		}); err != nil {
			t.Fatalf("%s: no READY=1: %v", p.unit, err)
		}
		if uid := procUID(t, p.proc.Pid()); uid != p.uid {
			t.Fatalf("%s runs as uid %d, want %d (its User=)", p.unit, uid, p.uid)
		}
	}
	// The shipped server.yaml names no startup manifest, and the replica
	// says what that means (docs/deploy.md, step 2).
	for _, p := range procs {
		if p.unit != "grapnel-server.service" {
			continue
		}
		if log, err := os.ReadFile(p.log); err != nil || !strings.Contains(string(log), "no startup manifest") {
			t.Fatalf("%s: its log does not say it starts without a startup manifest (%v)", p.log, err)
		}
	}
	for _, p := range procs {
		if p.unit != "grapnel-agent.service" {
			continue
		}
		if err := bench.PollUntil(ctx, 20*time.Millisecond, func() (bool, error) {
			if err := p.proc.ExitErr(); err != nil {
				return false, err
			}
			return strings.HasPrefix(p.notify.Status(), "connected to leader"), nil
		}); err != nil {
			t.Fatalf("%s: not connected to a leader (STATUS=%q): %v", p.unit, p.notify.Status(), err)
		}
	}

	out := e.run(t, ctx, check, check.text)
	t.Logf("%s:%d (test=check) printed:\n%s", guidePath, check.line, out)
	for _, want := range []string{"s1", "s2", "s3", "agent_A", "greeter", "clock"} {
		if !strings.Contains(out, want) {
			t.Fatalf("%s:%d: the check's output names no %s:\n%s", guidePath, check.line, want, out)
		}
	}
	alice := rpc.TLSFiles{CA: filepath.Join(e.src, "pki/alice/ca.pem"), Cert: filepath.Join(e.src, "pki/alice/cert.pem"), Key: filepath.Join(e.src, "pki/alice/key.pem")}
	var addrs []string
	for i := 1; i <= 3; i++ {
		addrs = append(addrs, fmt.Sprintf("%s%d:25551", e.net, i))
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if _, err := bench.WaitStatesWith(wctx, client.Options{Addrs: addrs, TLS: alice}, "greeter and clock Running", func(ws []state.WorkloadState) bool {
		for _, w := range []string{"greeter", "clock"} {
			if s, ok := bench.StateOf(ws, w); !ok || s.State.State != state.StateRunning {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("the example's workloads are not Running: %v\n%s", err, out)
	}

	// Metrics and dashboard answer, each on its own port.
	cert, err := tls.LoadX509KeyPair(alice.Cert, alice.Key)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(alice.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s: no certificate", alice.CA)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "ank-server", MinVersion: tls.VersionTLS12}}}
	for _, url := range []string{"http://" + e.net + "1:25581/metrics", "https://" + e.net + "1:25582/"} {
		resp, err := hc.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Fatalf("GET %s: %s, %d bytes", url, resp.Status, len(body))
		}
	}
	for _, p := range procs {
		if err := p.proc.ExitErr(); err != nil {
			t.Fatalf("%s ended: %v", p.unit, err)
		}
	}
}

// agentName is the name in the agent.yaml the guide installed at root.
func agentName(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "etc/grapnel/agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "name:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s: no name", filepath.Join(root, "etc/grapnel/agent.yaml"))
	return ""
}

// copyTree copies the text files below src to dst through edit (the
// test's network for the guide's).
func copyTree(t *testing.T, src, dst string, edit func(string) string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if strings.HasSuffix(p, ".go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), []byte(edit(string(data))), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
