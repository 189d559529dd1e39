package netns

import (
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// CleanLeftovers removes every namespace and interface named the way
// Setup names them under prefix, kills processes still inside those
// namespaces, and deletes the root FORWARD rule Setup may have added. It
// is what Close runs and what a rerun after a crash needs.
func CleanLeftovers(prefix string) error {
	if err := validPrefix(prefix); err != nil {
		return err
	}
	re := leftoverRE(prefix)
	var errs []error

	nsOut, err := run("ip", "netns", "list")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(nsOut, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !re.MatchString(f[0]) {
			continue
		}
		killIn(f[0])
		if _, err := run("ip", "netns", "del", f[0]); err != nil {
			errs = append(errs, err)
		}
	}

	links, err := linkNames()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, l := range links {
		if !re.MatchString(l) {
			continue
		}
		// Deleting one end of a veth pair deletes the other; tolerate it.
		if _, err := run("ip", "link", "del", l); err != nil && linkExists(l) {
			errs = append(errs, err)
		}
	}

	if _, err := exec.LookPath("iptables"); err == nil {
		errs = append(errs, dropForwardRules(prefix+"-chaos"))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return checkGone(prefix)
}

// killIn SIGKILLs the processes in a namespace: an orphaned server would
// otherwise keep running after its network is gone.
func killIn(ns string) {
	out, err := run("ip", "netns", "pids", ns)
	if err != nil {
		return
	}
	for _, f := range strings.Fields(out) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// linkNames lists the root namespace's interfaces without the @peer part.
func linkNames() ([]string, error) {
	out, err := run("ip", "-o", "link", "show")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name := strings.TrimSuffix(f[1], ":")
		name, _, _ = strings.Cut(name, "@")
		names = append(names, name)
	}
	return names, nil
}

func linkExists(name string) bool {
	_, err := run("ip", "link", "show", "dev", name)
	return err == nil
}

// dropForwardRules deletes root FORWARD rules carrying our comment.
func dropForwardRules(comment string) error {
	out, err := run("iptables", "-w", "-S", "FORWARD")
	if err != nil {
		return err
	}
	var errs []error
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "-A" || !hasComment(f, comment) {
			continue
		}
		f[0] = "-D"
		if _, err := run("iptables", append([]string{"-w"}, f...)...); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func hasComment(f []string, comment string) bool {
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "--comment" && strings.Trim(f[i+1], `"`) == comment {
			return true
		}
	}
	return false
}

// checkGone reports anything of prefix that is still there.
func checkGone(prefix string) error {
	left, err := Leftovers(prefix)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("%w: still present after cleanup: %s", ErrCommand, strings.Join(left, ", "))
	}
	return nil
}

// Leftovers lists the namespaces and interfaces named like Setup's under
// prefix that exist now.
func Leftovers(prefix string) ([]string, error) {
	if err := validPrefix(prefix); err != nil {
		return nil, err
	}
	re := leftoverRE(prefix)
	var left []string
	nsOut, err := run("ip", "netns", "list")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(nsOut, "\n") {
		if f := strings.Fields(line); len(f) > 0 && re.MatchString(f[0]) {
			left = append(left, "netns "+f[0])
		}
	}
	links, err := linkNames()
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		if re.MatchString(l) {
			left = append(left, "link "+l)
		}
	}
	return left, nil
}
