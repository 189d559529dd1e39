package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPowerDomain powers a domain on with two processes, finds them
// through the domain's own /proc, cuts the power and checks that nothing
// of the namespace is left; a second power-on runs them again.
func TestPowerDomain(t *testing.T) {
	if out, err := exec.Command("unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "true").CombinedOutput(); err != nil {
		t.Skipf("no pid namespace here (unshare --pid --fork --kill-child --mount-proc): %v: %s", err, strings.TrimSpace(string(out)))
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	dir := t.TempDir()
	spec := PowerSpec{}
	args := []string{"1000001", "1000002"}
	for i, a := range args {
		spec.Commands = append(spec.Commands, PowerCommand{Name: fmt.Sprintf("s%d", i), Args: []string{sleep, a}, Log: filepath.Join(dir, fmt.Sprintf("s%d.log", i))})
	}
	specPath, logPath := filepath.Join(dir, "spec.json"), filepath.Join(dir, "domain.log")
	if err := WritePowerSpec(specPath, spec); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	isOurs := func(argv []string) bool { return len(argv) == 2 && slices.Contains(args, argv[1]) }

	base, err := niceOf("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		if round == 1 {
			// A bench that raised its own priority still powers the
			// domain on at the one it had.
			prev, err := SetNice(base - 3)
			if err != nil {
				t.Skipf("cannot raise the priority here: %v", err)
			}
			defer func() { _, _ = SetNice(prev) }()
		}
		d, err := PowerOn(ctx, specPath, logPath)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := niceOf(fmt.Sprintf("/proc/%d/stat", d.Init)); err != nil || n != base {
			t.Fatalf("round %d: the domain's init runs at nice %d (%v), want %d", round, n, err, base)
		}
		t.Cleanup(func() { _ = d.Cut(context.Background()) })
		if own, _ := os.Readlink("/proc/self/ns/pid"); d.NS == own || d.NS == "" {
			t.Fatalf("round %d: the domain's namespace %q is not a new one (ours: %q)", round, d.NS, own)
		}
		procs := d.Procs("sleep")
		var seen [][]string
		err = PollUntil(ctx, 5*time.Millisecond, func() (bool, error) {
			argvs, err := procs.Argvs()
			seen = slices.DeleteFunc(argvs, func(a []string) bool { return !isOurs(a) })
			return len(seen) == len(args), err
		})
		if err != nil {
			t.Fatalf("round %d: the domain's processes: %v (seen %v)\n%s", round, err, seen, LogTail(logPath, 10))
		}
		classes, err := procs.CPUTicks(func(argv []string) string {
			if isOurs(argv) {
				return "sleep"
			}
			return "other"
		})
		if err != nil || len(classes) != 2 || classes["sleep"] < 0 {
			t.Fatalf("round %d: CPU of the domain by class: %v, %v", round, classes, err)
		}
		if n := CountInNamespace(d.NS); n != len(args)+1 {
			t.Fatalf("round %d: %d processes in %s, want the init and %d sleeps", round, n, d.NS, len(args))
		}
		if err := d.Cut(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if d.Alive() {
			t.Fatalf("round %d: the init survived the cut", round)
		}
		if n := CountInNamespace(d.NS); n != 0 {
			t.Fatalf("round %d: %d processes of %s left after the cut", round, n, d.NS)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "s0.log")); strings.Count(string(b), "start (power domain)") != 2 {
		t.Fatalf("s0.log does not show two starts:\n%s", b)
	}
}
